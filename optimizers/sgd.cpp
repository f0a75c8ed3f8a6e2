// SGD with momentum: one backend launch per state segment (see optimizer.h).
#include "optimizers/sgd.h"

#include <cmath>

#include "framework/check.h"

namespace gpt {

Sgd::Sgd(ParameterStore& store, double momentum, double weight_decay) : Optimizer(store) {
  set_hyperparameter("momentum", momentum);
  set_hyperparameter("weight_decay", weight_decay);
  momentum_buffer_ = store.add_state("momentum_buffer");
}

std::vector<std::pair<std::string, double>> Sgd::hyperparameters() const {
  return {{"momentum", momentum_}, {"weight_decay", weight_decay_}};
}

void Sgd::set_hyperparameter(const std::string& name, double value) {
  double* target = name == "momentum"       ? &momentum_
                   : name == "weight_decay" ? &weight_decay_
                                            : nullptr;
  GPT_INPUT_CHECK(target != nullptr, "sgd has no hyper-parameter '" << name << "'");
  check_hyperparameter(name, value);
  *target = value;
}

void Sgd::step(ParameterStore& store, double lr) {
  const bool first = step_count_ == 0;  // before begin_step counts this one
  begin_step(store, lr);
  SgdStep s{};
  s.lr = static_cast<float>(lr);
  s.momentum = static_cast<float>(momentum_);
  s.first_step = first;
  Backend& backend = store.backend();
  float* values = store.values();
  const float* grads = store.update_grads();
  SgdStep undecayed = s;
  s.weight_decay = static_cast<float>(weight_decay_);
  undecayed.weight_decay = 0.0f;
  for (const SegmentRuns& seg : segments_) {
    const int64_t state = seg.segment.state_offset;
    backend.sgd_update(values + seg.segment.offset, grads + state, momentum_buffer_ + state,
                       seg.runs, s, undecayed);
  }
}

}  // namespace gpt
