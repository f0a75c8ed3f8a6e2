// AdamW exactly as torch.optim.AdamW (bias-corrected moments, decoupled weight decay
// p -= lr*wd*p on decayed parameters only; amsgrad off). States "exp_avg" and "exp_avg_sq" are
// flat store buffers; the per-element update is adamw_element (framework/elementwise.h).
#pragma once

#include "optimizers/optimizer.h"

namespace gpt {

class AdamW final : public Optimizer {
 public:
  // Adds the zero-filled states to `store` (allocated). Invalid values throw (see
  // set_hyperparameter).
  AdamW(ParameterStore& store, double beta1, double beta2, double eps, double weight_decay);

  OptimizerKind kind() const override { return OptimizerKind::kAdamW; }
  std::vector<std::string> state_names() const override { return {"exp_avg", "exp_avg_sq"}; }
  // beta1, beta2, eps, weight_decay
  std::vector<std::pair<std::string, double>> hyperparameters() const override;
  // Checked by check_hyperparameter (optimizer.h).
  void set_hyperparameter(const std::string& name, double value) override;
  void step(ParameterStore& store, double lr) override;

 private:
  double beta1_ = 0.0, beta2_ = 0.0, eps_ = 0.0, weight_decay_ = 0.0;
  float* exp_avg_ = nullptr;     // (total_numel), first moment
  float* exp_avg_sq_ = nullptr;  // (total_numel), second moment
};

}  // namespace gpt
