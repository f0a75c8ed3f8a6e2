// A generation or serving step through this rank's stage (see decode_engine.h).
#include "launch/inference/decode_engine.h"

#include "framework/check.h"

namespace gpt {

DecodeEngine::DecodeEngine(Runtime& rt, const DecodeCapacity& capacity)
    : rt_(rt), state_(rt.stage().make_decode_state(capacity)) {}

DecodeEngine::~DecodeEngine() {
  // A destructor must not throw: an unfinished send at teardown is left to MPI_Finalize.
  try {
    finish_sends();
  } catch (...) {
  }
}

void DecodeEngine::finish_sends() {
  if (pending_send_) pending_send_->wait();
  pending_send_.reset();
}

std::vector<std::vector<float>> DecodeEngine::run(const DecodeBatch& batch, int tag) {
  ProcessGrid& grid = rt_.grid();
  ModelStage& stage = rt_.stage();
  const int64_t floats = batch.rows() * rt_.model().d_model;
  // The input buffer is not what the last send reads (that is the output), so the receive may
  // come first; the output must not be overwritten before its send is done.
  if (!grid.is_first_stage())
    grid.pp().recv(stage.decode_input(state_), floats, grid.stage() - 1, tag);
  finish_sends();
  stage.decode(state_, batch);
  if (!grid.is_last_stage()) {
    pending_send_ = grid.pp().isend(stage.decode_output(state_), floats, grid.stage() + 1, tag);
    return {};
  }
  if (batch.logit_rows.empty()) return {};
  return stage.gather_decoded_logits(state_);
}

void append_sequence_rows(DecodeBatch& batch, int64_t max_blocks, int64_t block_tokens,
                          const std::vector<int32_t>& table, const int32_t* tokens, int64_t count,
                          int64_t first_position, bool wants_logits) {
  GPT_CHECK(static_cast<int64_t>(table.size()) <= max_blocks &&
                (first_position + count + block_tokens - 1) / block_tokens <=
                    static_cast<int64_t>(table.size()),
            "a block table of " << table.size() << " blocks for positions up to "
                                << first_position + count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t pos = first_position + i;
    batch.tokens.push_back(tokens[i]);
    batch.positions.push_back(static_cast<int32_t>(pos));
    batch.slots.push_back(
        static_cast<int32_t>(table[pos / block_tokens] * block_tokens + pos % block_tokens));
    batch.block_tables.insert(batch.block_tables.end(), table.begin(), table.end());
    batch.block_tables.insert(batch.block_tables.end(), max_blocks - table.size(), -1);
  }
  if (wants_logits && count > 0) batch.logit_rows.push_back(static_cast<int32_t>(batch.rows() - 1));
}

}  // namespace gpt
