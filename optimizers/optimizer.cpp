// The shared part of the optimizers: the parameter runs, step bookkeeping and the factory.
#include "optimizers/optimizer.h"

#include <cmath>

#include "framework/check.h"
#include "optimizers/adamw.h"
#include "optimizers/sgd.h"

namespace gpt {

std::vector<ParameterRun> weight_decay_runs(const ParameterStore& store) {
  std::vector<ParameterRun> runs;
  for (const Parameter& p : store.params()) {
    if (p.numel() == 0) continue;  // nothing to update, and it must not split a run
    if (!runs.empty() && runs.back().weight_decay == p.weight_decay &&
        runs.back().offset + runs.back().numel == p.offset) {
      runs.back().numel += p.numel();
    } else {
      runs.push_back({p.offset, p.numel(), p.weight_decay});
    }
  }
  return runs;
}

Optimizer::Optimizer(ParameterStore& store) : store_(store), runs_(weight_decay_runs(store)) {}

void Optimizer::set_step_count(int64_t steps) {
  GPT_CHECK(steps >= 0, "optimizer step count must be >= 0, got " << steps);
  step_count_ = steps;
}

void Optimizer::begin_step(const ParameterStore& store, double lr) {
  GPT_CHECK(&store == &store_, type() << " optimizer stepped on a store it was not built for");
  GPT_CHECK(std::isfinite(lr) && lr >= 0.0, "learning rate must be finite and >= 0, got " << lr);
  ++step_count_;
}

std::unique_ptr<Optimizer> make_optimizer(const std::string& type, ParameterStore& store,
                                          const OptimizerOptions& options) {
  if (type == "adamw")
    return std::make_unique<AdamW>(store, options.beta1, options.beta2, options.eps,
                                   options.weight_decay);
  if (type == "sgd") return std::make_unique<Sgd>(store, options.momentum, options.weight_decay);
  fail_input(GPT_MSG("--optimizer must be adamw or sgd, got '" << type << "'"));
}

}  // namespace gpt
