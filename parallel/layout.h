// One parallel layout of a job, the one type train, eval, generate, plan and the memory model
// share (as torchtitan's ParallelDims and Megatron's ModelParallelConfig): the grid (tp, pp, dp),
// the pipeline schedule and its virtual stages, the stage split, the micro-batch size, and the
// memory-saving and precision options. validate() holds every rule a layout must keep on a model
// and a job size, with messages that name train's options; the programs and the planner call it
// and nothing else checks these rules.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/config.h"
#include "parallel/layer_sizes.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/process_grid.h"

namespace gpt {

// What the arithmetic runs in. fp32; bf16 (bf16 compute copies of the weights, matrix-product
// operands, residual stream, activations kept for the backward, tp and pp messages; fp32
// arithmetic, norm statistics, gradients, master weights and optimizer state), what train runs
// on CUDA; and megatron-mixed, the regime of Megatron-LM's published runs (16-bit weights,
// activations and gradients, fp32 master weights and Adam state), which only the planner prices.
enum class PrecisionRegime { kFp32, kBf16, kMegatronMixed };
inline constexpr PrecisionRegime kPrecisionRegimes[] = {
    PrecisionRegime::kFp32, PrecisionRegime::kBf16, PrecisionRegime::kMegatronMixed};
const char* regime_name(PrecisionRegime p);  // "fp32", "bf16", "megatron-mixed"
// One line saying what the regime keeps in which precision, for plan's output.
const char* regime_description(PrecisionRegime p);

// What the dp gradient reduction moves (--grad-reduce-dtype): float32, or bf16 (half the bytes;
// parallel/data_parallel.h). The gradients accumulate in float32 either way.
enum class GradReduceDtype { kFp32, kBf16 };
inline constexpr GradReduceDtype kGradReduceDtypes[] = {GradReduceDtype::kFp32,
                                                        GradReduceDtype::kBf16};
inline const char* grad_reduce_dtype_name(GradReduceDtype d) {
  return d == GradReduceDtype::kBf16 ? "bf16" : "fp32";
}

// The most sequences one optimizer step may take (--global-batch-size, train's and plan's): far
// above any published run (a few thousand sequences), and small enough that a step's microbatch
// count is an int and dp x micro-batch cannot overflow before it is compared with it.
inline constexpr int64_t kMaxGlobalBatchSize = int64_t{1} << 20;
// A one-line input error naming --global-batch-size unless it is in [1, kMaxGlobalBatchSize].
void validate_global_batch_size(int64_t global_batch_size);

struct Layout {
  int tp = 1, pp = 1;
  int dp = 0;  // 0: world / (tp * pp)
  ScheduleKind schedule = ScheduleKind::k1f1b;
  int virtual_stages = 1;  // model chunks per stage (interleaved schedules)
  // Blocks of each virtual stage in model order (--pipeline-layers): pp x virtual_stages entries,
  // virtual stage chunk * pp + stage; empty: an even split.
  std::vector<int64_t> pipeline_layers;
  // --pipeline-layers auto: train chooses pipeline_layers before it builds the runtime
  // (parallel/planner/balance_stages.h); a layout holding it runs nothing.
  bool pipeline_layers_auto = false;
  int64_t micro_batch = 1;  // sequences per microbatch
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  int64_t recompute_layers = 0;  // full: the first N blocks of each chunk; 0 = all
  // ZeRO-1: at dp > 1 each dp rank keeps the optimizer state of its shard (bucket_plan.h).
  bool distributed_optimizer = false;
  std::optional<PrecisionRegime> precision;  // nullopt: auto, bf16 on cuda and fp32 on the CPU
  GradReduceDtype grad_reduce_dtype = GradReduceDtype::kFp32;

  // The data-parallel size on `world` ranks: dp when given, else world / (tp * pp). The one
  // place that division is made; the product is taken in 64 bits (two large sizes would wrap an
  // int to 0). Call after validate_sizes().
  int data_parallel(int world) const {
    return dp > 0 ? dp : static_cast<int>(world / (int64_t{tp} * pp));
  }
  GridShape grid(int world) const { return {tp, data_parallel(world), pp}; }
  // Microbatches of one optimizer step on each dp rank; a one-line input error naming
  // --global-batch-size when it is not in [1, kMaxGlobalBatchSize] or does not divide into
  // dp x micro-batch.
  int step_microbatches(int64_t global_batch_size, int world) const;
  // Blocks of model chunk `chunk` of `stage` (pipeline_layers, or the even split), and of the
  // largest chunk.
  int64_t chunk_layers(const ModelConfig& model, int stage, int chunk) const;
  // --pipeline-layers as train takes it: "even", "auto", or the counts ("3,5").
  std::string pipeline_layers_text() const;
  int64_t most_layers_per_chunk(const ModelConfig& model) const;
  // Of a chunk of `layers` blocks, those whose forward a full recomputation reruns (the first
  // recompute_layers of it, or all of a chunk of fewer or with recompute_layers 0); 0 without
  // full recomputation.
  int64_t recomputed_layers(int64_t layers) const;

  // Every rule of the layout on `model` and `world` ranks, as one-line input errors naming the
  // option (the same on every rank): sizes at least 1, tp dividing the heads and the width, the
  // layers splitting over pp x virtual stages (or --pipeline-layers adding up), sequence
  // parallelism's sequence length, recomputation's block count, tp x pp dividing the world and dp
  // agreeing with it. `units` and `job` name the world in messages ("the 8 ranks of the job",
  // "the 8 GPUs of --nodes 1").
  void validate(const ModelConfig& model, int world, const std::string& units = "ranks",
                const std::string& job = "of the job") const;
  // Every count at least 1 (dp and recompute_layers at least 0): the rules that need neither the
  // model nor the job's size. validate_grid() and validate() run them first.
  void validate_sizes() const;
  // The rules that need no model (sizes at least 1, tp x pp dividing the world, dp agreeing):
  // what eval and generate check before the checkpoint brings the model. validate() runs them.
  void validate_grid(int world, const std::string& units = "ranks",
                     const std::string& job = "of the job") const;
  // validate(), then the schedule's own rules for the step's microbatches (make_schedule's).
  void validate_step(const ModelConfig& model, int world, int64_t global_batch_size,
                     const std::string& units = "ranks",
                     const std::string& job = "of the job") const;
  // The schedule of one step of `global_batch_size` sequences on `world` ranks.
  Schedule step_schedule(int64_t global_batch_size, int world) const;

 private:
  // tp x pp dividing the world and dp agreeing with it (after validate_sizes).
  void validate_world(int world, const std::string& units, const std::string& job) const;
};

// The default layout with another micro-batch size: each program has its own default.
inline Layout layout_with_micro_batch(int64_t micro_batch) {
  Layout layout;
  layout.micro_batch = micro_batch;
  return layout;
}

// "tp 4 pp 4 dp 1 1f1b mb 1 sp recompute full fp32" and the like, for messages and plan's table.
std::string describe(const Layout& layout);

}  // namespace gpt
