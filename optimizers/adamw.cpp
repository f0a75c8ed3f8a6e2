// AdamW: bias corrections in double from the step count, then one backend call per state segment.
#include "optimizers/adamw.h"

#include <cmath>

#include "framework/check.h"

namespace gpt {

AdamW::AdamW(ParameterStore& store, double beta1, double beta2, double eps, double weight_decay)
    : Optimizer(store) {
  // One validation path for construction, checkpoints and overrides.
  set_hyperparameter("beta1", beta1);
  set_hyperparameter("beta2", beta2);
  set_hyperparameter("eps", eps);
  set_hyperparameter("weight_decay", weight_decay);
  exp_avg_ = store.add_state("exp_avg");
  exp_avg_sq_ = store.add_state("exp_avg_sq");
}

std::vector<std::pair<std::string, double>> AdamW::hyperparameters() const {
  return {{"beta1", beta1_}, {"beta2", beta2_}, {"eps", eps_}, {"weight_decay", weight_decay_}};
}

void AdamW::set_hyperparameter(const std::string& name, double value) {
  double* target = name == "beta1"          ? &beta1_
                   : name == "beta2"        ? &beta2_
                   : name == "eps"          ? &eps_
                   : name == "weight_decay" ? &weight_decay_
                                            : nullptr;
  GPT_INPUT_CHECK(target != nullptr, "adamw has no hyper-parameter '" << name << "'");
  check_hyperparameter(name, value);
  *target = value;
}

void AdamW::step(ParameterStore& store, double lr) {
  begin_step(store, lr);
  Backend& backend = store.backend();
  float* values = store.values();
  const float* grads = store.update_grads();
  const AdamWStep decayed = make_adamw_step(lr, beta1_, beta2_, eps_, weight_decay_, step_count_);
  const AdamWStep undecayed = make_adamw_step(lr, beta1_, beta2_, eps_, 0.0, step_count_);
  for (const SegmentRuns& s : segments_) {
    const int64_t state = s.segment.state_offset;
    backend.adamw_update(values + s.segment.offset, grads + state, exp_avg_ + state,
                         exp_avg_sq_ + state, s.runs, decayed, undecayed);
  }
}

}  // namespace gpt
