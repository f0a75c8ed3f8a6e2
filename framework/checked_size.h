// Sizes computed from numbers that files declare (shapes, counts, offsets). A product or sum of
// such numbers can wrap int64_t and then pass a bounds check it should fail ([2^32, 2^32] floats
// "need" 0 bytes), so every reader computes them here: none on a negative factor or an overflow,
// and the caller names the file and the rule broken.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace gpt {

inline std::optional<int64_t> checked_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

inline std::optional<int64_t> checked_add(int64_t a, int64_t b) {
  int64_t out = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

// The number of elements of `shape` times `element_bytes` (1 for a count of elements).
inline std::optional<int64_t> checked_numel(const std::vector<int64_t>& shape,
                                            int64_t element_bytes = 1) {
  std::optional<int64_t> n = element_bytes;
  for (int64_t d : shape)
    if (!(n = checked_mul(*n, d))) return std::nullopt;
  return n;
}

}  // namespace gpt
