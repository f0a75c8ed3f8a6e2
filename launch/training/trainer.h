// The training loop: per optimizer step, the step's samples (docs/DESIGN.md "Data") are cut into
// microbatches, run through the pipeline schedule (forward and backward with gradient
// accumulation; at pp 1 simply F, B per microbatch), reduced over dp (and the tied embedding
// over the embedding group), clipped, applied by the optimizer; then logging,
// metrics, validation, checkpoints and stop requests at the step boundary. Under
// --distributed-optimizer the dp reduction is a reduce-scatter into this rank's shards, the
// optimizer updates the shards, and the updated shards are all-gathered after it: bucket by
// bucket behind the next step's forward (each layer waits for its own buckets), or at once with
// --no-overlap-param-gather. Either way the weights are the same bits.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "framework/io/checkpoint_directory.h"
#include "framework/io/dataset.h"
#include "launch/runtime/runtime.h"
#include "launch/training/metrics.h"
#include "launch/training/train_options.h"
#include "layers/model_chunk.h"
#include "optimizers/lr_schedule.h"
#include "optimizers/optimizer.h"
#include "parallel/data_parallel.h"
#include "parallel/pipeline_executor.h"
#include "parallel/pipeline_schedule.h"

namespace gpt {

struct StepStats {
  int64_t step = 0;
  double loss = 0.0;  // mean token loss of the step, before its update
  double lr = 0.0;
  double grad_norm = 0.0;  // before clipping
  bool skipped = false;    // non-finite norm: no update
  double step_time_s = 0.0, compute_s = 0.0, tp_comm_s = 0.0, dp_comm_s = 0.0, pp_wait_s = 0.0;
  int64_t tp_bytes = 0, dp_bytes = 0, pp_bytes = 0;
  int peak_caches = 0;  // forward caches this rank held at once (pipeline)
};

struct TrainState {
  int64_t step = 0;              // optimizer steps done
  int64_t consumed_samples = 0;  // samples of all steps done
};

class Trainer {
 public:
  Trainer(const TrainOptions& options, Runtime& rt, const TokenDataset& train,
          const TokenDataset* validation, Optimizer& optimizer, TrainState state,
          std::string config_json, MetricsWriter& metrics);
  // Runs to --steps; returns the exit code (0, or kExitStopped after a stop request).
  int run();
  // One optimizer step (exposed for tests). Under the distributed optimizer the updated weights
  // may still be arriving when it returns: wait_for_weights() before reading them.
  StepStats train_step();
  void wait_for_weights() { dp_buckets_.wait_all_gathered(); }
  const TrainState& state() const { return state_; }
  // Collective; returns the path. Refuses (an AgreedError on every rank, no file written) when
  // the last step's loss or gradient norm or any weight is not finite: a diverged run must not
  // leave a checkpoint that --resume auto would take for a good one.
  std::string save_checkpoint();

 private:
  struct StepBatch {
    std::vector<int32_t> tokens, targets;  // (microbatches, B*T) each, host
    int64_t microbatches = 0;
  };
  StepBatch read_step_batch() const;
  double forward_backward(const StepBatch& batch, StepStats& stats);
  void apply_update(StepStats& stats);
  void log_step(const StepStats& stats);
  // Under Slurm with the template's GPT_WARNING_S: warns once, after the first checkpoint write,
  // when the warning leaves less time than slurmctld's 30 s, a step and a write need.
  void check_stop_grace(double write_s);
  void run_validation();
  void write_trace_if_asked();  // collective; --trace

  const TrainOptions& options_;
  Runtime& rt_;
  const TokenDataset& train_;
  const TokenDataset* validation_;
  Optimizer& optimizer_;
  TrainState state_;
  std::string config_json_;
  LrSchedule lr_schedule_;
  MetricsWriter& metrics_;
  GradientBuckets dp_buckets_;
  // Seconds the step's forward waited for (and drove) the parameter gather: part of dp_comm_s.
  double param_gather_wait_s_ = 0.0;
  const Schedule& schedule_;   // the runtime's
  double theoretical_bubble_;  // the schedule's bubble share with F = B = W
  PipelineExecutor executor_;
  std::deque<ModelChunk> chunks_;  // deque: the executor keeps pointers to them
  std::vector<PipelineChunk*> chunk_pointers_;
  int consecutive_skips_ = 0;
  // For the log line: when and at which step this process's training loop started, and the
  // losses since the last line.
  double loop_start_s_ = 0.0;
  int64_t loop_first_step_ = 0;
  double interval_loss_sum_ = 0.0;
  double last_step_s_ = 0.0;  // the last step's time, for check_stop_grace
  bool stop_grace_checked_ = false;
  int64_t interval_steps_ = 0;
  // The last step's loss and gradient norm were finite (the same on every rank): a checkpoint is
  // written only then, and only of finite weights.
  bool last_step_finite_ = true;
  // Rank 0: the older checkpoints --keep-last has read back and found valid, each read once.
  VerifiedCheckpoints verified_checkpoints_;
};

}  // namespace gpt
