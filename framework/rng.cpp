// Philox4x32-10 and the normal/uniform draws built on it (see rng.h).
#include "framework/rng.h"

#include <cmath>

namespace gpt {

uint64_t hash_name(std::string_view name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, uint64_t key) {
  // Round multipliers and Weyl key increments from the Random123 paper.
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ k0, static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += kW0;
    k1 += kW1;
  }
  return ctr;
}

CounterRng::CounterRng(uint64_t seed, std::string_view stream)
    : key_(seed * 0x9E3779B97F4A7C15ull ^ hash_name(stream)) {}

float CounterRng::normal(uint64_t index) const {
  auto r =
      philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 0u, 0u}, key_);
  // Uniforms in (0, 1] and [0, 1) from 32 bits each; double keeps log() away from 0.
  double u1 = (static_cast<double>(r[0]) + 1.0) / 4294967296.0;
  double u2 = static_cast<double>(r[1]) / 4294967296.0;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

uint64_t CounterRng::bits(uint64_t index) const {
  auto r =
      philox4x32({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), 1u, 0u}, key_);
  return (static_cast<uint64_t>(r[0]) << 32) | r[1];
}

}  // namespace gpt
