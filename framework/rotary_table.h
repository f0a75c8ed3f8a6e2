// The rotary position table of a Llama-family model: for each position p < positions, the
// cosines and sines of p * inv_freq[i] for the head's HS/2 frequencies, laid out (positions, HS)
// as [cos | sin] per position (what Backend::rotary_forward reads). Computed in float32 the way
// transformers' LlamaRotaryEmbedding computes it (inv_freq = 1 / theta^(2i/HS) in float32, Llama
// 3.1's rescaling applied to it, the angle as a float32 product), so positions agree with
// Hugging Face's to the last bit of the angle.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/config.h"

namespace gpt {

// inv_freq (HS/2 floats) after the model's rope scaling.
std::vector<float> rotary_inverse_frequencies(const ModelConfig& model);
std::vector<float> rotary_table(const ModelConfig& model, int64_t positions);

}  // namespace gpt
