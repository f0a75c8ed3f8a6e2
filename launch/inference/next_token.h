// What generate asks for each new token: the logits that follow a sequence, on the last stage.
// Two ways to get them. WindowForward runs the window of the last seq_len tokens through every
// stage each time (the cost of a full forward per token). KvCacheDecoder runs the prompt's rows
// once (the prefill, in steps of at most kPrefillRows rows) through the decode engine
// (decode_engine.h), keeping every block's keys and values in the paged cache, then runs only the
// new token's row, attending over the cache; the stages pass the rows (d_model floats each)
// forward. It is the computation serve runs for each request, row by row, so serve's tokens are
// generate's. Positions are learned, so a window cannot slide under a cache: once the sequence is
// longer than seq_len, each token re-prefills the window of the last seq_len tokens, as
// WindowForward does, and both give the same tokens whatever the length (to float rounding: the
// two compute the same sums in different orders).
#pragma once

#include <cstdint>
#include <vector>

#include "launch/inference/decode_engine.h"
#include "launch/inference/kv_block_pool.h"
#include "launch/runtime/runtime.h"
#include "layers/model_chunk.h"
#include "parallel/pipeline_executor.h"

namespace gpt {

class NextTokenLogits {
 public:
  virtual ~NextTokenLogits() = default;
  // The logits (vocab_size floats) of the token after `sequence` (not empty) on the last stage,
  // empty on the others. Collective over the ranks of the runtime.
  virtual std::vector<float> next(const std::vector<int32_t>& sequence) = 0;
};

// The last min(n, seq_len) tokens, left-aligned in a window of seq_len (causal attention ignores
// what follows them), through the forward-only schedule.
class WindowForward : public NextTokenLogits {
 public:
  explicit WindowForward(Runtime& rt);
  WindowForward(const WindowForward&) = delete;  // the chunk points at the window
  WindowForward& operator=(const WindowForward&) = delete;
  std::vector<float> next(const std::vector<int32_t>& sequence) override;

 private:
  Runtime& rt_;
  std::vector<int32_t> window_, targets_;
  MicrobatchData batch_;
  ModelChunk chunk_;
  Schedule schedule_;
  PipelineExecutor executor_;
};

class KvCacheDecoder : public NextTokenLogits {
 public:
  static constexpr int64_t kPrefillRows = 128;
  static constexpr int64_t kBlockTokens = 16;
  explicit KvCacheDecoder(Runtime& rt);
  // A sequence that extends the cached one by one token (within seq_len) is decoded; any other
  // (a new prompt, or one past seq_len) is prefilled.
  std::vector<float> next(const std::vector<int32_t>& sequence) override;

 private:
  Runtime& rt_;
  DecodeEngine engine_;
  KvBlockPool pool_;
  std::vector<int32_t> table_;   // the sequence's blocks
  std::vector<int32_t> cached_;  // the tokens whose keys and values the cache holds, in order
};

}  // namespace gpt
