// bfloat16 on the host: the bits of a float32 rounded to nearest even (what the GPU's
// cvt.rn.bf16.f32 gives), their widening back, and the float32 value a bf16 operand holds. The
// CPU backend's bf16 precision rounds product operands with round_to_bf16; the safetensors writer
// stores BF16 tensors with float_to_bf16.
#pragma once

#include <bit>
#include <cstdint>

namespace gpt {

// float32 to bfloat16 bits, rounded to nearest even (NaN stays a NaN).
inline uint16_t float_to_bf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it one (rounding could make it inf)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  // Adding 0x7fff plus the lowest kept bit rounds half-way cases to the even neighbour.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float bf16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

// The float32 holding exactly the bfloat16 nearest to value: a product of two such values is
// exact in float32, so a float32 product of rounded operands is a bf16 product with float32
// accumulation.
inline float round_to_bf16(float value) {
  return bf16_to_float(float_to_bf16(value));
}

}  // namespace gpt
