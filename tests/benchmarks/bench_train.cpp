// Training-throughput benchmark of the CPU backend: one training
// step (forward, backward, AdamW) of a small GPT-2 (vocab 8192, seq 256, 4 layers, 8 heads,
// d_model 512, micro-batch 8), or of a Llama of the same size (4 key/value heads, MLP width
// 1408: the same parameters per block as GPT-2's 4C MLP), at 1 and 2 threads, beside the oneDNN
// sgemm peak measured in the same run on the model's own largest GEMM shape and the processor's
// fp32 FMA peak (fma_peak.h). Prints tokens/s, achieved GFLOP/s (ModelConfig::flops_per_token)
// and its share of both peaks, one line per thread count, then a JSON line. Usage: bench_train
// [steps (default 5)] [max_threads (default 2)] [gpt2|llama]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "framework/cpu/cpu_backend.h"
#include "framework/timer.h"
#include "tests/benchmarks/fma_peak.h"
#include "tests/benchmarks/single_rank_model.h"

namespace gpt {
namespace {

ModelConfig bench_model(Arch arch) {
  ModelConfig cfg;
  cfg.n_layer = 4, cfg.n_head = 8, cfg.d_model = 512, cfg.seq_len = 256, cfg.vocab_size = 8192;
  cfg.arch = arch;
  if (arch == Arch::kLlama) cfg.n_kv_head = 4, cfg.ffn_hidden = 1408;
  return cfg;
}

// Best GFLOP/s of out (N, OC) = inp (N, IC) . W^T over `reps` calls: the LM head's shape, the
// largest product of a step.
double sgemm_peak(Backend& backend, int64_t N, int64_t IC, int64_t OC, int reps) {
  std::vector<float> inp(N * IC, 0.01f), w(OC * IC, 0.02f), out(N * OC);
  backend.matmul_forward(out.data(), inp.data(), w.data(), nullptr, N, IC, OC);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds();
    backend.matmul_forward(out.data(), inp.data(), w.data(), nullptr, N, IC, OC);
    best = std::min(best, now_seconds() - t0);
  }
  return 2.0 * N * IC * OC / best / 1e9;
}

struct Result {
  double tokens_per_s, gflops, peak, fma_peak;
};

Result run(int threads, int steps, Arch arch) {
  const ModelConfig cfg = bench_model(arch);
  const int64_t B = 8, N = B * cfg.seq_len;
  std::unique_ptr<Backend> backend = make_cpu_backend(threads);
  SingleRankModel model(*backend, cfg, B, static_cast<int32_t>(cfg.vocab_size - 1));
  model.step();  // warm-up: first-touch of every buffer
  double best = 1e30;
  for (int s = 0; s < steps; ++s) {
    const double t0 = now_seconds();
    model.step();
    best = std::min(best, now_seconds() - t0);
  }
  Result r;
  r.tokens_per_s = static_cast<double>(N) / best;
  r.gflops = cfg.flops_per_token() * r.tokens_per_s / 1e9;
  r.peak = sgemm_peak(*backend, N, cfg.d_model, cfg.vocab_size, 5);
  r.fma_peak = fma_peak_gflops(threads);
  return r;
}

}  // namespace
}  // namespace gpt

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 5;
  const int max_threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const gpt::Arch arch = gpt::parse_arch(argc > 3 ? argv[3] : "gpt2");
  std::printf("bench_train: %s, V 8192, T 256, L 4, NH 8, C 512, B 8; best of %d steps\n",
              gpt::arch_name(arch), steps);
  for (int threads = 1; threads <= max_threads; ++threads) {
    const gpt::Result r = gpt::run(threads, steps, arch);
    std::printf(
        "threads %d: %.0f tokens/s | %.1f GFLOP/s | sgemm peak %.1f GFLOP/s | %.1f%% of peak | "
        "FMA peak %.1f GFLOP/s | %.1f%% of it\n",
        threads, r.tokens_per_s, r.gflops, r.peak, 100.0 * r.gflops / r.peak, r.fma_peak,
        100.0 * r.gflops / r.fma_peak);
    std::printf(
        "{\"threads\": %d, \"tokens_per_s\": %.1f, \"gflops\": %.2f, \"sgemm_peak_gflops\": "
        "%.2f, \"fma_peak_gflops\": %.2f}\n",
        threads, r.tokens_per_s, r.gflops, r.peak, r.fma_peak);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
