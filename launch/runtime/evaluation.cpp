// Validation loss (see evaluation.h).
#include "launch/runtime/evaluation.h"

#include <algorithm>
#include <deque>
#include <vector>

#include "framework/check.h"
#include "layers/model_chunk.h"
#include "parallel/pipeline_executor.h"

namespace gpt {

bool rank_reads_data(Runtime& rt) {
  for (const auto& chunk : rt.chunks())
    if (chunk->spec().has_embedding || chunk->spec().has_head) return true;
  return false;
}

EvalResult evaluate(Runtime& rt, const TokenDataset& data, int64_t max_windows) {
  ProcessGrid& grid = rt.grid();
  const int64_t T = rt.model().seq_len, B = rt.stage().micro_batch();
  const int dp = grid.shape().dp, dp_rank = grid.dp_rank(), pp = grid.shape().pp;
  const int chunks = static_cast<int>(rt.chunks().size());
  EvalResult result;
  result.windows = std::min(max_windows, data.num_windows(T));
  // This dp rank's windows: dp_rank, dp_rank + dp, ...; every rank runs the same number of
  // microbatches so the tp and pp collectives inside the forward stay matched.
  const int64_t per_rank = (result.windows + dp - 1) / dp;
  const int microbatches = static_cast<int>(std::max<int64_t>(1, (per_rank + B - 1) / B));
  std::vector<int32_t> tokens(static_cast<size_t>(microbatches * B * T)), targets(tokens.size());
  MicrobatchData batch{tokens.data(), targets.data(), microbatches, 1.0f, {}};
  const bool reads = rank_reads_data(rt);
  for (int64_t m = 0; m < microbatches; ++m) {
    int64_t valid = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t window = (m * B + b) * dp + dp_rank;
      const bool counted = window < result.windows;
      valid += counted ? 1 : 0;
      const int64_t row = (m * B + b) * T;
      if (reads)
        read_window(data, counted ? window : 0, T, tokens.data() + row, targets.data() + row);
    }
    batch.valid_sequences.push_back(valid);
  }
  const Schedule forwards = make_forward_only_schedule(pp, microbatches, chunks);
  std::deque<ModelChunk> adapters = rt.pipeline_chunks();
  std::vector<PipelineChunk*> pointers;
  for (ModelChunk& adapter : adapters) {
    adapter.begin(&batch, nullptr);
    pointers.push_back(&adapter);
  }
  PipelineExecutor(grid.pp(), chunks).run(forwards, pointers);
  double loss_sum = 0.0;
  for (const ModelChunk& chunk : adapters)
    if (chunk.has_head()) loss_sum += chunk.loss_sum();
  loss_sum = grid.sum_tp_replicated(loss_sum);  // over dp ranks and stages (the last has it)
  result.tokens = result.windows * T;
  result.loss = result.tokens > 0 ? loss_sum / static_cast<double>(result.tokens) : 0.0;
  return result;
}

}  // namespace gpt
