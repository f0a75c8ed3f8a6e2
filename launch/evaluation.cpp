// Validation loss (see evaluation.h).
#include "launch/evaluation.h"

#include <algorithm>
#include <vector>

#include "framework/check.h"

namespace gpt {

EvalResult evaluate(Runtime& rt, const TokenDataset& data, int64_t max_windows) {
  ProcessGrid& grid = rt.grid();
  GptStage& stage = rt.stage();
  const int64_t T = rt.model().seq_len, B = stage.micro_batch();
  const int dp = grid.shape().dp, dp_rank = grid.dp_rank();
  GPT_INPUT_CHECK(grid.shape().pp == 1, "evaluation with --pp > 1 needs the pipeline executor");
  EvalResult result;
  result.windows = std::min(max_windows, data.num_windows(T));
  // This dp rank's windows: dp_rank, dp_rank + dp, ...; every rank runs the same number of
  // microbatches so the tp and pp collectives inside the forward stay matched.
  const int64_t per_rank = (result.windows + dp - 1) / dp;
  const int64_t microbatches = (per_rank + B - 1) / B;
  std::vector<int32_t> tokens(static_cast<size_t>(B * T)), targets(tokens.size());
  double loss_sum = 0.0;
  for (int64_t m = 0; m < microbatches; ++m) {
    int64_t valid_rows = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t window = (m * B + b) * dp + dp_rank;
      const bool valid = window < result.windows;
      if (valid) ++valid_rows;
      read_window(data, valid ? window : 0, T, tokens.data() + b * T, targets.data() + b * T);
    }
    stage.forward(0, tokens.data(), targets.data());
    if (stage.spec().has_head && valid_rows > 0) loss_sum += stage.loss_sum(0, valid_rows);
  }
  // Sum over dp ranks, and over stages (only the last contributes), once per rank.
  if (grid.tp_rank() != 0) loss_sum = 0.0;  // tp ranks hold the same loss: count it once
  grid.world().all_reduce(&loss_sum, 1, ReduceOp::kSum);
  result.tokens = result.windows * T;
  result.loss = result.tokens > 0 ? loss_sum / static_cast<double>(result.tokens) : 0.0;
  return result;
}

}  // namespace gpt
