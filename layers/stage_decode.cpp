// ModelStage's generation (see model_stage.h and decode_rows.h): the decode state of a stage (every
// block's paged key/value pool and one step's row buffers), a step's token rows through the
// stage's layers, and the logits of the rows that asked for them, gathered over tp.
#include "layers/model_stage.h"

#include <algorithm>

#include "framework/check.h"

namespace gpt {

StageDecodeState ModelStage::make_decode_state(const DecodeCapacity& capacity) const {
  GPT_CHECK(!tp_.sequence_parallel(), "generation runs without sequence parallelism");
  GPT_CHECK(capacity.rows >= 1 && capacity.kv_blocks >= 1 && capacity.block_tokens >= 1,
            "a decode state of " << capacity.rows << " rows and " << capacity.kv_blocks
                                 << " blocks of " << capacity.block_tokens << " positions");
  const int64_t R = capacity.rows, C = cfg_.d_model;
  StageDecodeState s;
  s.capacity = capacity;
  s.max_blocks = (cfg_.seq_len + capacity.block_tokens - 1) / capacity.block_tokens;
  const int64_t max_positions = s.max_blocks * capacity.block_tokens;
  for (auto& block : blocks_)
    s.kv.push_back(block->make_kv_cache(capacity.kv_blocks, capacity.block_tokens));
  if (!blocks_.empty()) s.block = blocks_.front()->make_decode_cache(R, max_positions);
  for (int64_t l = 0; l <= spec_.n_layers; ++l) s.acts.emplace_back(backend_, R * C, kDecodeStep);
  if (embedding_) s.tokens = DeviceArray<int32_t>(backend_, R, kDecodeStep);
  s.slots = DeviceArray<int32_t>(backend_, R, kDecodeStep);
  s.block_tables = DeviceArray<int32_t>(backend_, R * s.max_blocks, kDecodeStep);
  s.lengths = DeviceArray<int32_t>(backend_, R, kDecodeStep);
  if (head_) {
    s.head_input = DeviceArray<float>(backend_, R * C, kDecodeStep);
    s.head = head_->make_decode_cache(R);
  }
  return s;
}

void ModelStage::decode(StageDecodeState& s, const DecodeBatch& batch) {
  const int64_t R = batch.rows(), C = cfg_.d_model;
  const auto bytes = [](int64_t n) { return sizeof(int32_t) * static_cast<size_t>(n); };
  GPT_CHECK(R >= 1 && R <= s.capacity.rows,
            "a decode step of " << R << " rows (capacity " << s.capacity.rows << ")");
  GPT_CHECK(static_cast<int64_t>(batch.slots.size()) == R &&
                static_cast<int64_t>(batch.block_tables.size()) == R * s.max_blocks &&
                (!embedding_ || static_cast<int64_t>(batch.tokens.size()) == R),
            "a decode step's rows disagree in size");
  const int64_t pool_slots = s.capacity.kv_blocks * s.capacity.block_tokens;
  s.host_lengths.resize(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) {
    const int32_t pos = batch.positions[r];
    GPT_CHECK(pos >= 0 && pos < cfg_.seq_len && batch.slots[r] >= 0 &&
                  batch.slots[r] < pool_slots &&
                  batch.block_tables[r * s.max_blocks + pos / s.capacity.block_tokens] ==
                      batch.slots[r] / s.capacity.block_tokens,
              "decode row " << r << " at position " << pos << " into slot " << batch.slots[r]);
    for (int64_t b = 0; b <= pos / s.capacity.block_tokens; ++b) {
      const int32_t block = batch.block_tables[r * s.max_blocks + b];
      GPT_CHECK(block >= 0 && block < s.capacity.kv_blocks,
                "decode row " << r << " reads block " << block);
    }
    s.host_lengths[r] = pos + 1;
  }
  s.positions = batch.positions;
  backend_.copy_from_host(s.slots.data(), batch.slots.data(), bytes(R));
  backend_.copy_from_host(s.block_tables.data(), batch.block_tables.data(),
                          bytes(R * s.max_blocks));
  backend_.copy_from_host(s.lengths.data(), s.host_lengths.data(), bytes(R));
  const DecodeRows rows{.count = R,
                        .positions = s.positions.data(),
                        .slots = s.slots.data(),
                        .block_tables = s.block_tables.data(),
                        .lengths = s.lengths.data(),
                        .max_blocks = s.max_blocks,
                        .block_tokens = s.capacity.block_tokens};
  s.rows = R;
  if (embedding_) {
    backend_.copy_from_host(s.tokens.data(), batch.tokens.data(), bytes(R));
    embedding_->decode(s.acts[0].data(), s.tokens.data(), s.positions.data(), R);
  }
  for (size_t l = 0; l < blocks_.size(); ++l)
    blocks_[l]->decode(s.acts[l + 1].data(), s.acts[l].data(), s.block, s.kv[l], rows);
  if (!head_) return;
  // Only the rows whose next token is wanted go through the head (a prompt's last row, each
  // decoding sequence's row): the vocabulary product is the largest of a small model's step.
  const int64_t L = static_cast<int64_t>(batch.logit_rows.size());
  GPT_CHECK(L <= R, "more logit rows than rows");
  for (int64_t i = 0; i < L; ++i) {
    const int32_t r = batch.logit_rows[i];
    GPT_CHECK(r >= 0 && r < R, "logit row " << r << " of " << R);
    backend_.copy(s.head_input.data() + i * C, s.acts.back().data() + r * C,
                  sizeof(float) * static_cast<size_t>(C));
  }
  s.logit_rows = L;
  if (L > 0) head_->decode(s.head_input.data(), s.head, L);
}

std::vector<std::vector<float>> ModelStage::gather_decoded_logits(const StageDecodeState& s) {
  GPT_CHECK(head_ != nullptr, "only the last stage has logits");
  const int64_t L = s.logit_rows, Vl = vocab_.count, tp = tp_.size();
  std::vector<float> local(static_cast<size_t>(L * Vl));
  std::vector<float> gathered(static_cast<size_t>(L * Vl * tp));
  if (L > 0)
    backend_.copy_to_host(local.data(), s.head.logits.data(), sizeof(float) * local.size());
  tp_.comm().all_gather(local.data(), gathered.data(), L * Vl);  // host buffers: MPI
  std::vector<std::vector<float>> logits(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    std::vector<float>& row = logits[i];
    row.resize(static_cast<size_t>(Vl * tp));
    for (int64_t rank = 0; rank < tp; ++rank)
      std::copy_n(gathered.begin() + (rank * L + i) * Vl, Vl, row.begin() + rank * Vl);
    row.resize(static_cast<size_t>(cfg_.vocab_size));  // drop the padding columns
  }
  return logits;
}

}  // namespace gpt
