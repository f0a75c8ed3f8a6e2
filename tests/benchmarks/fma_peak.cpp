// fma_peak_gflops (see fma_peak.h). Each chain's next FMA depends on its last, so 16 chains hide
// the FMA latency (4 cycles) on two FMA pipes with room to spare; the values stay finite (a
// contraction towards 1), and their sum is returned so the compiler keeps the work.
#include "tests/benchmarks/fma_peak.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace gpt {
namespace {

constexpr int kChains = 16;
constexpr int64_t kIterations = 40'000'000;  // about 0.1 s at 3 GHz

__attribute__((target("avx512f"))) float chains_avx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm512_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm512_fmadd_ps(acc[k], b, c);
  alignas(64) float lanes[16];
  float sum = 0.0f;
  for (int k = 0; k < kChains; ++k) {
    _mm512_store_ps(lanes, acc[k]);
    for (float x : lanes) sum += x;
  }
  return sum;
}

__attribute__((target("avx2,fma"))) float chains_avx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int k = 0; k < kChains; ++k) acc[k] = _mm256_set1_ps(1.0f + 0.001f * static_cast<float>(k));
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (int64_t i = 0; i < iterations; ++i)
    for (int k = 0; k < kChains; ++k) acc[k] = _mm256_fmadd_ps(acc[k], b, c);
  alignas(32) float lanes[8];
  float sum = 0.0f;
  for (int k = 0; k < kChains; ++k) {
    _mm256_store_ps(lanes, acc[k]);
    for (float x : lanes) sum += x;
  }
  return sum;
}

}  // namespace

double fma_peak_gflops(int threads) {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return 0.0;
  const int lanes = avx512 ? 16 : 8;
  double best = 1e30;
  std::vector<float> sums(static_cast<size_t>(threads));
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        sums[static_cast<size_t>(t)] =
            avx512 ? chains_avx512(kIterations) : chains_avx2(kIterations);
      });
    for (std::thread& th : pool) th.join();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  volatile float keep = sums[0];  // the work's result is used
  (void)keep;
  return 2.0 * lanes * kChains * static_cast<double>(kIterations) * threads / best / 1e9;
}

}  // namespace gpt
