// The rotary table (see rotary_table.h).
#include "framework/rotary_table.h"

#include <cmath>
#include <numbers>

namespace gpt {

std::vector<float> rotary_inverse_frequencies(const ModelConfig& model) {
  const int64_t HS = model.head_dim(), half = HS / 2;
  const float theta = static_cast<float>(model.rope_theta);
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; i++) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(HS);
    inv_freq[static_cast<size_t>(i)] = 1.0f / std::pow(theta, exponent);
  }
  const RopeScalingParams& r = model.rope_scaling;
  if (r.type != RopeScaling::kLlama3) return inv_freq;
  // Llama 3.1: wavelengths longer than original/low_freq_factor are stretched by `factor`,
  // shorter than original/high_freq_factor kept, and those between blended linearly in
  // original/wavelength.
  const float factor = static_cast<float>(r.factor);
  const float low = static_cast<float>(r.low_freq_factor);
  const float high = static_cast<float>(r.high_freq_factor);
  const float original = static_cast<float>(r.original_max_positions);
  const float low_freq_wavelen = original / low;
  const float high_freq_wavelen = original / high;
  const float two_pi = 2.0f * std::numbers::pi_v<float>;
  for (float& f : inv_freq) {
    const float wavelen = two_pi / f;
    const float stretched = wavelen > low_freq_wavelen ? f / factor : f;
    if (wavelen < high_freq_wavelen || wavelen > low_freq_wavelen) {
      f = stretched;
      continue;
    }
    const float smooth = (original / wavelen - low) / (high - low);
    f = (1.0f - smooth) * stretched / factor + smooth * stretched;
  }
  return inv_freq;
}

std::vector<float> rotary_table(const ModelConfig& model, int64_t positions) {
  const int64_t HS = model.head_dim(), half = HS / 2;
  const std::vector<float> inv_freq = rotary_inverse_frequencies(model);
  std::vector<float> table(static_cast<size_t>(positions * HS));
  for (int64_t p = 0; p < positions; p++)
    for (int64_t i = 0; i < half; i++) {
      const float angle = static_cast<float>(p) * inv_freq[static_cast<size_t>(i)];
      table[static_cast<size_t>(p * HS + i)] = static_cast<float>(std::cos(double{angle}));
      table[static_cast<size_t>(p * HS + half + i)] = static_cast<float>(std::sin(double{angle}));
    }
  return table;
}

}  // namespace gpt
