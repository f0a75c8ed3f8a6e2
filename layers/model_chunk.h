// ModelChunk: a ModelStage seen by the pipeline executor. It feeds each microbatch's tokens (first
// virtual stage) and targets (last) from the step's host arrays, sums the last stage's token
// losses, and during the chunk's final backward of the step hands its parameters to the dp
// buckets as each layer's gradients become final: in its weight pass, and in its input pass for
// the blocks that run their weight halves there (weight_half_at_once, parallel/layer_sizes.h).
#pragma once

#include <vector>

#include "layers/model_stage.h"
#include "parallel/pipeline_executor.h"

namespace gpt {

struct MicrobatchData {
  const int32_t* tokens = nullptr;   // (microbatches, B*T), host
  const int32_t* targets = nullptr;  // (microbatches, B*T), host
  int microbatches = 0;
  float loss_scale = 1.0f;
  // Sequences of each microbatch that count in the loss (evaluation pads the last one); empty:
  // all of them.
  std::vector<int64_t> valid_sequences;
};

class ModelChunk : public PipelineChunk {
 public:
  explicit ModelChunk(ModelStage& stage) : stage_(stage) {}

  // Before each run: the data, what to call with each layer's finished parameters, and what to
  // call before each layer's forward reads its weights (ModelStage's hooks). The values may have
  // changed since the last run: the run's forwards refresh the bf16 compute copies.
  void begin(const MicrobatchData* data, ModelStage::WeightReadyHook on_final_weights,
             ModelStage::WeightReadyHook on_weights_needed = nullptr);
  double loss_sum() const { return loss_sum_; }
  bool has_head() const { return stage_.spec().has_head; }

  int64_t boundary_elements() const override {
    return stage_.local_rows() * stage_.model().d_model;
  }
  int num_caches() const override { return stage_.num_caches(); }
  int num_grad_sets() const override { return stage_.num_grad_sets(); }
  float* input_activation(int slot) override { return stage_.input_activation(slot); }
  float* output_activation(int slot) override { return stage_.output_activation(slot); }
  float* output_grad(int grad_set) override { return stage_.output_grad(grad_set); }
  float* input_grad(int grad_set) override { return stage_.input_grad(grad_set); }
  uint16_t* activation_wire(int slot) override { return stage_.activation_wire(slot); }
  uint16_t* gradient_wire(int grad_set) override { return stage_.gradient_wire(grad_set); }
  uint16_t* receive_wire() override { return stage_.receive_wire(); }
  void pack(uint16_t* wire, const float* values) override { stage_.pack_boundary(wire, values); }
  void unpack(float* values, const uint16_t* wire) override {
    stage_.unpack_boundary(values, wire);
  }
  void forward(int slot, int microbatch) override;
  void backward_input(int slot, int grad_set, int microbatch, bool weight_follows) override;
  void backward_weight(int slot, int grad_set, int microbatch) override;

 private:
  ModelStage& stage_;
  const MicrobatchData* data_ = nullptr;
  ModelStage::WeightReadyHook on_final_weights_;
  int input_passes_ = 0, weight_passes_ = 0;
  double loss_sum_ = 0.0;
};

}  // namespace gpt
