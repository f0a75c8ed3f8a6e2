// Benchmark of the CPU backend's hot kernels: dnnl_sgemm GFLOP/s on the GPT-2 linear shapes
// (forward, input-gradient and weight-gradient layouts) and the causal attention forward and
// backward at B=8, T=256, NH=8, HS=64, and generation's batch-invariant row product
// (matmul_forward_rows) beside oneDNN's matmul_forward on the same rows, each at 1 and 2 threads.
// Prints one line per measurement.
// Usage: bench_kernels [max_threads [sgemm|attention|rows]]   (default: 2, all)
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "framework/cpu/cpu_backend.h"

namespace {

using Clock = std::chrono::steady_clock;

// Best of `reps` timed runs after one warm-up run: the least disturbed measurement. `cpu_ratio`
// gets the process CPU time over wall time of that run, which shows how many threads really ran.
double best_time(int reps, const std::function<void()>& fn, double* cpu_ratio = nullptr) {
  fn();
  double best = 1e30;
  for (int r = 0; r < reps; r++) {
    const std::clock_t c0 = std::clock();
    const auto t0 = Clock::now();
    fn();
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    if (wall < best) {
      best = wall;
      if (cpu_ratio != nullptr) *cpu_ratio = cpu / wall;
    }
  }
  return best;
}

std::vector<float> random_vector(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct GemmCase {
  const char* what;
  char ta, tb;
  int64_t M, N, K;
};

void bench_sgemm(int threads, std::mt19937& rng) {
  // N = B*T = 2048 tokens, d_model 512: qkv, attn proj, fc, mlp proj and their gradients.
  const GemmCase cases[] = {
      {"fwd qkv    (N,3C)=(N,C).W^T", 'N', 'T', 2048, 1536, 512},
      {"fwd fc     (N,4C)=(N,C).W^T", 'N', 'T', 2048, 2048, 512},
      {"fwd proj   (N,C)=(N,4C).W^T", 'N', 'T', 2048, 512, 2048},
      {"bwd dinp   (N,C)=(N,4C).W  ", 'N', 'N', 2048, 512, 2048},
      {"bwd dW     (4C,C)=dout^T.x ", 'T', 'N', 2048, 512, 2048},
  };
  omp_set_num_threads(threads);
  for (const auto& c : cases) {
    const int64_t lda = c.ta == 'N' ? c.K : c.M, ldb = c.tb == 'N' ? c.N : c.K;
    std::vector<float> A = random_vector(c.M * c.K, rng), B = random_vector(c.K * c.N, rng),
                       C(c.M * c.N, 0.0f);
    double ratio = 0.0;
    double t = best_time(
        10,
        [&] {
          dnnl_status_t s = dnnl_sgemm(c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(),
                                       ldb, 0.0f, C.data(), c.N);
          if (s != dnnl_success) std::abort();
        },
        &ratio);
    std::printf("sgemm %d thr  %s  M=%ld N=%ld K=%ld  %7.2f ms  %6.1f GFLOP/s  cpu/wall %.2f\n",
                threads, c.what, static_cast<long>(c.M), static_cast<long>(c.N),
                static_cast<long>(c.K), t * 1e3, 2.0 * c.M * c.N * c.K / t * 1e-9, ratio);
  }
}

void bench_attention(int threads, std::mt19937& rng) {
  const int64_t B = 8, T = 256, NH = 8, HS = 64, C = NH * HS;
  gpt::cpu::CpuBackend be(threads);
  std::vector<float> qkv = random_vector(B * T * 3 * C, rng), dout = random_vector(B * T * C, rng);
  std::vector<float> out(B * T * C), att(B * NH * T * T), dqkv(qkv.size()), datt(att.size());
  double tf =
      best_time(5, [&] { be.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, HS); });
  double tb = best_time(10, [&] {
    be.attention_backward(dqkv.data(), datt.data(), dout.data(), out.data(), qkv.data(), att.data(),
                          B, T, NH, HS);
  });
  // Dense-equivalent FLOPs (2 T^2 HS per product per head): 2 products forward, 4 backward.
  const double gemm_flop = 2.0 * T * T * HS * B * NH;
  std::printf(
      "attention %d thr  B=%ld T=%ld NH=%ld HS=%ld  fwd %7.2f ms  bwd %7.2f ms  "
      "fwd+bwd %7.2f ms  (%6.1f dense-equivalent GFLOP/s)\n",
      threads, static_cast<long>(B), static_cast<long>(T), static_cast<long>(NH),
      static_cast<long>(HS), tf * 1e3, tb * 1e3, (tf + tb) * 1e3,
      6.0 * gemm_flop / (tf + tb) * 1e-9);
}

// The row product of generate and serve against oneDNN's, side by side: GPT-2's c_fc shape
// (768 -> 3072) at the step sizes of a decode (1 row), a batch of decodes and prefill chunks.
void bench_rows(int threads, std::mt19937& rng) {
  gpt::cpu::CpuBackend be(threads);
  const int64_t IC = 768, OC = 3072;
  const std::vector<float> W = random_vector(IC * OC, rng), bias = random_vector(OC, rng);
  for (int64_t R : {1, 4, 16, 64, 256}) {
    const std::vector<float> x = random_vector(R * IC, rng);
    std::vector<float> out(R * OC);
    const int reps = R <= 16 ? 200 : 20;
    const double rows = best_time(reps, [&] {
      be.matmul_forward_rows(out.data(), x.data(), W.data(), bias.data(), R, IC, OC);
    });
    const double dnnl = best_time(
        reps, [&] { be.matmul_forward(out.data(), x.data(), W.data(), bias.data(), R, IC, OC); });
    std::printf(
        "rows %d thr  R=%3ld IC=%ld OC=%ld  rows %8.3f ms (%6.1f GFLOP/s)  oneDNN %8.3f ms "
        "(%6.1f GFLOP/s)  rows/oneDNN time %.2f\n",
        threads, static_cast<long>(R), static_cast<long>(IC), static_cast<long>(OC), rows * 1e3,
        2.0 * R * IC * OC / rows * 1e-9, dnnl * 1e3, 2.0 * R * IC * OC / dnnl * 1e-9, rows / dnnl);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int max_threads = argc > 1 ? std::atoi(argv[1]) : 2;
  std::mt19937 rng(1);
  const std::string only = argc > 2 ? argv[2] : "";  // "sgemm", "attention" or "rows": one part
  if (only.empty() || only == "sgemm")
    for (int threads = 1; threads <= max_threads; threads *= 2) bench_sgemm(threads, rng);
  if (only.empty() || only == "attention")
    for (int threads = 1; threads <= max_threads; threads *= 2) bench_attention(threads, rng);
  if (only.empty() || only == "rows")
    for (int threads = 1; threads <= max_threads; threads *= 2) bench_rows(threads, rng);
  return 0;
}
