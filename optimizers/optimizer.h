// The optimizer interface (docs/DESIGN.md "Optimizer semantics"): one object updates every
// parameter of a ParameterStore with one backend launch per state segment (the whole store, or
// under the distributed optimizer each bucket's shard of this dp rank) over the runs of consecutive
// parameters in it that share a weight decay flag, reading the store's update_grads(). Its state
// buffers are store states (checkpointed as /optimizer/<name>/<state>); `step_count` is the one
// optimizer step count of the checkpoint's /optimizer `step` attribute. Weight decay applies only
// to parameters with Parameter::weight_decay (two or more dimensions); lr comes from the schedule
// per step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/parameter.h"

namespace gpt {

enum class OptimizerKind { kAdamW, kSgd };
inline constexpr OptimizerKind kOptimizerKinds[] = {OptimizerKind::kAdamW, OptimizerKind::kSgd};
const char* optimizer_name(OptimizerKind kind);  // "adamw", "sgd": options, checkpoints, logs

// The one rule of each hyper-parameter, by its checkpoint key ("lr", "min_lr", "beta1", "beta2",
// "eps", "weight_decay", "momentum", "grad_clip"): every value finite; lr in (0, 10], min_lr in
// [0, 10], eps in (0, 1], weight_decay in [0, 1], grad_clip in [0, 1e6] (0 = off); beta1, beta2
// and momentum in [0, 1). The options, the learning-rate schedule and the optimizers'
// set_hyperparameter (construction, checkpoints, overrides on resume) all check through it.
// Throws a one-line gpt::Error naming the option.
void check_hyperparameter(const std::string& key, double value);

// The store's parameters as runs of one weight decay flag (ParameterRun, framework/backend.h).
// Registration order keeps a layer's weight and bias apart, so a GPT block gives a handful of
// runs; one backend call updates them all.
std::vector<ParameterRun> weight_decay_runs(const ParameterStore& store);  // unsharded stores

// One state segment (parameter.h) and its parameters' runs, offsets relative to the segment's
// start (the same in the flat buffers and in the state buffers): one backend call.
struct SegmentRuns {
  StateSegment segment;
  std::vector<ParameterRun> runs;
};
// Segments holding no parameter element (padding alone) are left out.
std::vector<SegmentRuns> weight_decay_runs_by_segment(const ParameterStore& store);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual OptimizerKind kind() const = 0;
  std::string type() const { return optimizer_name(kind()); }
  virtual std::vector<std::string> state_names() const = 0;  // store states it owns
  // Everything but the learning rate (which is per step), in a fixed order, for checkpoints
  // and logs.
  virtual std::vector<std::pair<std::string, double>> hyperparameters() const = 0;
  // Loading a checkpoint or a command-line override on resume. An unknown name or an invalid
  // value throws a one-line gpt::Error.
  virtual void set_hyperparameter(const std::string& name, double value) = 0;

  // One update of every parameter of `store` (the store given to the constructor) from its
  // gradients, with learning rate `lr`; counts the step first, so the first call is step 1.
  virtual void step(ParameterStore& store, double lr) = 0;

  int64_t step_count() const { return step_count_; }
  // Resume: the number of updates the loaded state has seen (never a "first" step after it).
  void set_step_count(int64_t steps);

 protected:
  explicit Optimizer(ParameterStore& store);
  // Checks that `store` is the constructor's and `lr` is usable; then counts the step.
  void begin_step(const ParameterStore& store, double lr);

  ParameterStore& store_;
  std::vector<SegmentRuns> segments_;
  int64_t step_count_ = 0;
};

// The optimizer's hyper-parameters as the options give them; each optimizer reads its own.
// Defaults are GPT-2 pre-training's AdamW settings (nanoGPT's); the trainer states its own.
struct OptimizerOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  double momentum = 0.9;
};

// Adds the optimizer's zero-filled states to `store` (allocated, none of them present yet).
std::unique_ptr<Optimizer> make_optimizer(OptimizerKind kind, ParameterStore& store,
                                          const OptimizerOptions& options);

}  // namespace gpt
