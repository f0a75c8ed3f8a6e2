// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011): a value is a pure function of
// (seed, stream name, counter), so any rank can draw any element alone. This is what makes the
// initial weights identical whatever the layout (docs/DESIGN.md "Init") and what makes random data
// order a pure function of (seed, sample index).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace gpt {

// 64-bit FNV-1a of a name: turns a parameter name into part of the Philox key.
uint64_t hash_name(std::string_view name);

// The four 32-bit outputs of Philox4x32-10 for a 128-bit counter and 64-bit key.
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, uint64_t key);

class CounterRng {
 public:
  CounterRng(uint64_t seed, std::string_view stream);
  // A standard normal for element `index` (Box-Muller on the first two outputs).
  float normal(uint64_t index) const;
  // A uniform 64-bit integer for `index`.
  uint64_t bits(uint64_t index) const;

 private:
  uint64_t key_;
};

}  // namespace gpt
