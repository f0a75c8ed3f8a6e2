// The shared part of the optimizers: the parameter runs, step bookkeeping and the factory.
#include "optimizers/optimizer.h"

#include <algorithm>
#include <cmath>

#include "framework/check.h"
#include "optimizers/adamw.h"
#include "optimizers/sgd.h"

namespace gpt {

namespace {

// Extends the last run when the piece continues it with the same flag.
void append_run(std::vector<ParameterRun>& runs, int64_t offset, int64_t numel, bool decay) {
  if (!runs.empty() && runs.back().weight_decay == decay &&
      runs.back().offset + runs.back().numel == offset) {
    runs.back().numel += numel;
  } else {
    runs.push_back({offset, numel, decay});
  }
}

}  // namespace

std::vector<SegmentRuns> weight_decay_runs_by_segment(const ParameterStore& store) {
  std::vector<SegmentRuns> out;
  for (const StateSegment& segment : store.state_segments()) {
    SegmentRuns s{segment, {}};
    const int64_t segment_end = segment.offset + segment.numel;
    for (const Parameter& p : store.params()) {
      const int64_t begin = std::max(segment.offset, p.offset);
      const int64_t end = std::min(segment_end, p.offset + p.numel());
      // Empty parameters never split a run.
      if (begin < end) append_run(s.runs, begin - segment.offset, end - begin, p.weight_decay);
    }
    if (!s.runs.empty()) out.push_back(std::move(s));
  }
  return out;
}

std::vector<ParameterRun> weight_decay_runs(const ParameterStore& store) {
  GPT_CHECK(!store.optimizer_state_sharded(), "weight_decay_runs of a sharded store");
  std::vector<SegmentRuns> segments = weight_decay_runs_by_segment(store);
  return segments.empty() ? std::vector<ParameterRun>{} : std::move(segments.front().runs);
}

Optimizer::Optimizer(ParameterStore& store)
    : store_(store), segments_(weight_decay_runs_by_segment(store)) {}

void Optimizer::set_step_count(int64_t steps) {
  GPT_CHECK(steps >= 0, "optimizer step count must be >= 0, got " << steps);
  step_count_ = steps;
}

void Optimizer::begin_step(const ParameterStore& store, double lr) {
  GPT_CHECK(&store == &store_, type() << " optimizer stepped on a store it was not built for");
  GPT_CHECK(std::isfinite(lr) && lr >= 0.0, "learning rate must be finite and >= 0, got " << lr);
  ++step_count_;
}

std::unique_ptr<Optimizer> make_optimizer(OptimizerKind kind, ParameterStore& store,
                                          const OptimizerOptions& options) {
  if (kind == OptimizerKind::kSgd)
    return std::make_unique<Sgd>(store, options.momentum, options.weight_decay);
  return std::make_unique<AdamW>(store, options.beta1, options.beta2, options.eps,
                                 options.weight_decay);
}

const char* optimizer_name(OptimizerKind kind) {
  return kind == OptimizerKind::kSgd ? "sgd" : "adamw";
}

namespace {

// The range of one hyper-parameter: (low or [low, high] or high), as docs/USAGE.md lists them.
struct HyperparameterRange {
  const char* key;
  double low;
  bool low_open;
  double high;
  bool high_open;
};

// Wide enough for every published GPT recipe, narrow enough that one step cannot take finite
// weights to infinity (an lr of 1e308 would).
constexpr HyperparameterRange kHyperparameterRanges[] = {
    {"lr", 0, true, 10, false},          {"min_lr", 0, false, 10, false},
    {"eps", 0, true, 1, false},          {"weight_decay", 0, false, 1, false},
    {"grad_clip", 0, false, 1e6, false}, {"beta1", 0, false, 1, true},
    {"beta2", 0, false, 1, true},        {"momentum", 0, false, 1, true}};

}  // namespace

void check_hyperparameter(const std::string& key, double value) {
  std::string option = "--" + key;
  std::replace(option.begin(), option.end(), '_', '-');
  GPT_INPUT_CHECK(std::isfinite(value), option << " must be a finite number (got " << value << ")");
  const auto* range =
      std::find_if(std::begin(kHyperparameterRanges), std::end(kHyperparameterRanges),
                   [&](const HyperparameterRange& r) { return key == r.key; });
  GPT_CHECK(range != std::end(kHyperparameterRanges),
            "no rule for the hyper-parameter '" << key << "'");
  const bool above_low = range->low_open ? value > range->low : value >= range->low;
  const bool below_high = range->high_open ? value < range->high : value <= range->high;
  GPT_INPUT_CHECK(above_low && below_high, option << " must be in " << (range->low_open ? "(" : "[")
                                                  << range->low << ", " << range->high
                                                  << (range->high_open ? ")" : "]") << " (got "
                                                  << value << ")");
}

}  // namespace gpt
