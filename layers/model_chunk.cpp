// ModelChunk (see model_chunk.h).
#include "layers/model_chunk.h"

namespace gpt {

void ModelChunk::begin(const MicrobatchData* data, ModelStage::WeightReadyHook on_final_weights,
                       ModelStage::WeightReadyHook on_weights_needed) {
  data_ = data;
  on_final_weights_ = std::move(on_final_weights);
  stage_.set_weight_needed_hook(std::move(on_weights_needed));
  stage_.values_changed();  // the compute copies follow the values once per run
  input_passes_ = weight_passes_ = 0;
  loss_sum_ = 0.0;
}

void ModelChunk::forward(int slot, int microbatch) {
  const int64_t offset = static_cast<int64_t>(microbatch) * stage_.rows();
  stage_.forward(slot, data_->tokens + offset, data_->targets + offset);
  if (!has_head()) return;
  const int64_t valid =
      data_->valid_sequences.empty() ? -1 : data_->valid_sequences[static_cast<size_t>(microbatch)];
  if (valid != 0) loss_sum_ += stage_.loss_sum(slot, valid);
}

void ModelChunk::backward_input(int slot, int grad_set, int /*microbatch*/, bool weight_follows) {
  // Some blocks run their weight halves inside the input pass (weight_half_at_once,
  // parallel/layer_sizes.h: a whole B's, and the recomputed blocks' in any schedule): on the final
  // one their parameters are final there.
  const bool final_pass = ++input_passes_ == data_->microbatches;
  if (final_pass && on_final_weights_) stage_.set_weight_ready_hook(on_final_weights_);
  stage_.backward_input(slot, grad_set, data_->loss_scale, weight_follows);
  if (final_pass) stage_.set_weight_ready_hook(nullptr);
}

void ModelChunk::backward_weight(int slot, int grad_set, int /*microbatch*/) {
  const bool final_pass = ++weight_passes_ == data_->microbatches;
  if (final_pass && on_final_weights_) stage_.set_weight_ready_hook(on_final_weights_);
  stage_.backward_weight(slot, grad_set);
  if (final_pass) stage_.set_weight_ready_hook(nullptr);
}

}  // namespace gpt
