// SGD exactly as torch.optim.SGD with momentum (dampening 0, no Nesterov): weight decay is added
// to the gradient of decayed parameters only, and the momentum buffer starts as the first
// gradient. State "momentum_buffer" is a flat store buffer, kept even at momentum 0 so that
// checkpoints have one layout; the per-element update is sgd_element (framework/elementwise.h).
#pragma once

#include "optimizers/optimizer.h"

namespace gpt {

class Sgd final : public Optimizer {
 public:
  // Adds the zero-filled state to `store` (allocated). Invalid values throw.
  Sgd(ParameterStore& store, double momentum, double weight_decay);

  OptimizerKind kind() const override { return OptimizerKind::kSgd; }
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  // momentum, weight_decay
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  // Checked by check_hyperparameter (optimizer.h).
  void set_hyperparameter(const std::string& name, double value) override;
  // The first step of a fresh optimizer copies the gradient into the buffer (torch's lazy
  // initialisation); after set_step_count(n > 0) the loaded buffer is used.
  void step(ParameterStore& store, double lr) override;

 private:
  double momentum_ = 0.0, weight_decay_ = 0.0;
  float* momentum_buffer_ = nullptr;  // (total_numel)
};

}  // namespace gpt
