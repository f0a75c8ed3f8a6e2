// The full-window forward and the KV-cache decoder of generate (see next_token.h).
#include "launch/inference/next_token.h"

#include <algorithm>

#include "framework/check.h"

namespace gpt {

namespace {

// The tag of a decode step's row between stages; the executor's tags of a forward-only run of
// one microbatch stay far below it, and MPI guarantees tags up to 32767.
constexpr int kDecodeTag = 32767;

}  // namespace

WindowForward::WindowForward(Runtime& rt)
    : rt_(rt),
      window_(static_cast<size_t>(rt.model().seq_len)),
      targets_(window_.size(), 0),
      batch_{window_.data(), targets_.data(), 1, 1.0f, {}},
      chunk_(rt.stage()),
      schedule_(make_forward_only_schedule(rt.grid().shape().pp, 1, 1)),
      executor_(rt.grid().pp(), 1) {
  chunk_.begin(&batch_, nullptr);
}

std::vector<float> WindowForward::next(const std::vector<int32_t>& sequence) {
  const int64_t used = std::min(static_cast<int64_t>(sequence.size()), rt_.model().seq_len);
  std::fill(window_.begin(), window_.end(), 0);
  std::copy(sequence.end() - used, sequence.end(), window_.begin());
  executor_.run(schedule_, {&chunk_});
  if (!rt_.grid().is_last_stage()) return {};
  return rt_.stage().gather_last_logits(0, used - 1);
}

KvCacheDecoder::KvCacheDecoder(Runtime& rt)
    : rt_(rt), window_(rt), state_(rt.stage().make_decode_state()) {
  GPT_CHECK(rt.stage().micro_batch() == 1, "the decoder runs one sequence");
}

std::vector<float> KvCacheDecoder::next(const std::vector<int32_t>& sequence) {
  const size_t n = sequence.size();
  const bool extends = n == cached_.size() + 1 && !cached_.empty() &&
                       std::equal(cached_.begin(), cached_.end(), sequence.begin());
  if (!extends || static_cast<int64_t>(n) > rt_.model().seq_len) return prefill(sequence);
  cached_.push_back(sequence.back());
  return decode(sequence.back(), static_cast<int64_t>(n) - 1);
}

std::vector<float> KvCacheDecoder::prefill(const std::vector<int32_t>& sequence) {
  std::vector<float> logits = window_.next(sequence);
  rt_.stage().store_keys_values(0, state_);
  // Past seq_len the cache holds a window that the next token cannot extend.
  cached_.clear();
  if (static_cast<int64_t>(sequence.size()) <= rt_.model().seq_len) cached_ = sequence;
  return logits;
}

std::vector<float> KvCacheDecoder::decode(int32_t token, int64_t pos) {
  ProcessGrid& grid = rt_.grid();
  GptStage& stage = rt_.stage();
  const int64_t row = stage.micro_batch() * rt_.model().d_model;
  if (!grid.is_first_stage())
    grid.pp().recv(stage.decode_input(state_), row, grid.stage() - 1, kDecodeTag);
  stage.decode(state_, pos, &token);
  if (!grid.is_last_stage()) {
    grid.pp().send(stage.decode_output(state_), row, grid.stage() + 1, kDecodeTag);
    return {};
  }
  return stage.gather_decoded_logits(state_, 0);
}

}  // namespace gpt
