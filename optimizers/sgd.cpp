// SGD with momentum: one backend launch per run of parameters sharing a weight decay flag.
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
  float* grads = store.grads();
  SgdStep undecayed = s;
  s.weight_decay = static_cast<float>(weight_decay_);
  undecayed.weight_decay = 0.0f;
  backend.sgd_update(values, grads, momentum_buffer_, runs_, s, undecayed);
}

}  // namespace gpt
