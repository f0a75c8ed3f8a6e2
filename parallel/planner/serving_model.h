// The planner's serving model (docs/PLANNER.md, "Serving"): what continuous batching over tp and
// pp costs on a cluster. A step runs token rows (one per decoding sequence, or a prompt's rows);
// each pipeline stage reads its weights and the key/value cache its rows attend to from HBM and
// does the rows' FLOPs, whichever is slower, then its tp collectives, then sends its rows on.
// From those steps: time to first token, time per output token of a lone request, and output
// throughput at a concurrency, capped by the key/value cache that fits beside the weights. The
// rates are the training cost model's (stream_seconds, kernel_flop_seconds, collective_seconds,
// p2p_seconds); the figures are the cluster presets'.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/config.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/plan_layout.h"

namespace gpt {

// One served layout: tp, pp and the ranks' placement (dp 1: replicas serve independently).
struct ServingSetup {
  ModelConfig model;
  PlanLayout layout;
  Cluster cluster;
  // Bytes of a weight, a cached key or value, and an activation sent between ranks. This
  // project's serving path is fp32 on both backends (4) and multiplies on the CUDA cores; 2
  // prices an fp16/bf16 server (published runs), whose products use the 16-bit tensor peak.
  double element_bytes = 4;
};

// What one step runs: `rows` token rows, of which `sampled` produce logits (every decoding row,
// a prompt's last), attending `attended` (query, key) pairs in all, reading `cached_tokens`
// tokens' keys and values.
struct StepRows {
  double rows = 0, sampled = 0, attended = 0, cached_tokens = 0;
};
// `batch` decoding sequences, each at `context` tokens.
StepRows decode_rows(double batch, double context);
// A prompt of `prompt` tokens in one pass (causal: row i attends i + 1 tokens).
StepRows prefill_rows(double prompt);

// One pipeline stage's share of a step on one of its tp ranks.
struct StageStep {
  double memory_s = 0;   // weights and key/value cache through HBM
  double compute_s = 0;  // the rows' FLOPs
  double tp_s = 0;       // its tp collectives, which nothing overlaps
  double hop_s = 0;      // its rows to the next stage; the last stage's sampled tokens to the first
  double busy() const;   // max(memory, compute) + tp
  double total() const { return busy() + hop_s; }
};
struct ServingStep {
  std::vector<StageStep> stages;
  double slowest() const;  // the lockstep tick: the slowest stage and its hop
  double in_turn() const;  // one group through every stage in turn, hops included
};
ServingStep serving_step(const ServingSetup& setup, const StepRows& rows);

// A request's shape: prompt tokens in, output tokens out.
struct ServingRequest {
  int64_t prompt_tokens = 512, output_tokens = 128;
};

// The prompt's pass through every stage; its last stage samples the first token.
double time_to_first_token(const ServingSetup& setup, const ServingRequest& request);
// A lone request's decode step, every stage in turn, at its mean context.
double time_per_output_token(const ServingSetup& setup, const ServingRequest& request);
// Weights one rank of the heaviest stage holds, in bytes.
double serving_weight_bytes(const ServingSetup& setup);
// The most sequences of `request`'s full length whose keys and values fit beside the weights on
// every stage (0: the weights alone do not fit).
int64_t max_sequences(const ServingSetup& setup, const ServingRequest& request);
// Output tokens/s with `running` sequences decoding (at most max_sequences), each request's
// prefill included.
double serving_throughput(const ServingSetup& setup, const ServingRequest& request,
                          int64_t running);

struct ThroughputAt {
  int64_t concurrency = 0, running = 0;  // asked, and what the cache holds of it
  double tokens_per_s = 0;
};
struct ServingPrediction {
  double weight_bytes = 0;  // per GPU, its heaviest stage
  int64_t max_sequences = 0;
  double ttft_s = 0, tpot_s = 0;
  std::vector<ThroughputAt> throughput;
};
ServingPrediction predict_serving(const ServingSetup& setup, const ServingRequest& request,
                                  const std::vector<int64_t>& concurrency);

// The layouts `plan --serve` prices on `gpus` GPUs of `nodes` nodes: every tp and pp of powers of
// two with tp x pp at most `gpus` that the model splits into (Layout::validate); tp inside a node
// unless `tp_across_nodes`. `fixed_tp` / `fixed_pp` > 0 keep only that size.
std::vector<PlanLayout> serving_layouts(const ModelConfig& model, const Cluster& cluster, int gpus,
                                        int nodes, bool tp_across_nodes, int fixed_tp = 0,
                                        int fixed_pp = 0);

}  // namespace gpt
