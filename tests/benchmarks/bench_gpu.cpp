// GPU training-throughput benchmark (built with GPT_WITH_CUDA): a GPT-2 124M step (12 layers, 12
// heads, d_model 768, seq 1024, vocab 50304; forward, backward, AdamW) on the CUDA backend in bf16,
// beside the cuBLASLt bf16 GEMM peak measured in the same run; tokens/s, TFLOP/s, MFU, a JSON line.
// Usage: bench_gpu [--micro-batch 16] [--steps 10] [--warmup 2] [--peak-tflops 989]
//                  [--gemm-reps 10] [--arena-gb 0] [--skip-train] [--skip-gemm]
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "framework/cuda/cuda_check.h"
#include "framework/logging.h"
#include "framework/timer.h"
#include "tests/benchmarks/single_rank_model.h"

namespace gpt {
namespace {

// Dense bf16 tensor-core peak of an H100/H200 SXM without sparsity (the vendor's datasheet).
constexpr double kDefaultPeakTflops = 989.0;

struct Args {
  int64_t micro_batch = 16;
  int steps = 10;
  int warmup = 2;  // at least 1: the first warm-up step logs the initial loss
  double peak_tflops = kDefaultPeakTflops;
  int gemm_reps = 10;
  double arena_gb = 0.0;
  bool train = true;
  bool gemm = true;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_gpu: %s needs a value\n", name.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (name == "--micro-batch")
      a.micro_batch = std::atoll(value());
    else if (name == "--steps")
      a.steps = std::atoi(value());
    else if (name == "--warmup")
      a.warmup = std::atoi(value());
    else if (name == "--peak-tflops")
      a.peak_tflops = std::atof(value());
    else if (name == "--gemm-reps")
      a.gemm_reps = std::atoi(value());
    else if (name == "--arena-gb")
      a.arena_gb = std::atof(value());
    else if (name == "--skip-train")
      a.train = false;
    else if (name == "--skip-gemm")
      a.gemm = false;
    else {
      std::fprintf(stderr, "bench_gpu: unknown option %s (see the file's header)\n", name.c_str());
      std::exit(2);
    }
  }
  a.micro_batch = std::max<int64_t>(a.micro_batch, 1);
  a.steps = std::max(a.steps, 1);
  a.warmup = std::max(a.warmup, 1);
  a.gemm_reps = std::max(a.gemm_reps, 1);
  return a;
}

ModelConfig gpt2_124m() {
  ModelConfig cfg;
  cfg.n_layer = 12, cfg.n_head = 12, cfg.d_model = 768, cfg.seq_len = 1024, cfg.vocab_size = 50304;
  return cfg;
}

// ---------------------------------------------------------------------------------------------
// (a) the bf16 GEMM peak: D (m,n) fp32 = op(A)^T (m,k) . B (k,n), A and B bf16, fp32 accumulation,
// column-major "TN" (what out = inp . W^T of nn.Linear weights becomes); the best of the
// heuristic's first algorithms, each the fastest of `reps` timed products.

uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

// Fills n bf16 values on the device with a tiled random block (uniform in [-1, 1)).
void fill_random_bf16(uint16_t* dst, size_t n, uint32_t seed) {
  const size_t block = std::min<size_t>(n, size_t{1} << 24);
  std::vector<uint16_t> host(block);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (auto& x : host) x = to_bf16(dist(rng));
  for (size_t off = 0; off < n; off += block)
    GPT_CUDA_CHECK(cudaMemcpy(dst + off, host.data(), sizeof(uint16_t) * std::min(block, n - off),
                              cudaMemcpyHostToDevice));
}

struct GemmCase {
  std::string name;
  int64_t m, n, k;
};

struct GemmResult {
  GemmCase shape;
  double tflops = 0.0;
  int algorithms = 0;
};

class GemmBench {
 public:
  explicit GemmBench(const std::vector<GemmCase>& shapes) {
    size_t a = 0, b = 0, d = 0;
    for (const auto& s : shapes) {
      a = std::max<size_t>(a, s.m * s.k);
      b = std::max<size_t>(b, s.k * s.n);
      d = std::max<size_t>(d, s.m * s.n);
    }
    GPT_CUBLAS_CHECK(cublasLtCreate(&lt_));
    GPT_CUDA_CHECK(cudaMalloc(&a_, sizeof(uint16_t) * a));
    GPT_CUDA_CHECK(cudaMalloc(&b_, sizeof(uint16_t) * b));
    GPT_CUDA_CHECK(cudaMalloc(&d_, sizeof(float) * d));
    GPT_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspace));
    fill_random_bf16(a_, a, 1);
    fill_random_bf16(b_, b, 2);
    GPT_CUDA_CHECK(cudaEventCreate(&start_));
    GPT_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~GemmBench() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
    cudaFree(a_);
    cudaFree(b_);
    cudaFree(d_);
    cudaFree(workspace_);
    cublasLtDestroy(lt_);
  }
  GemmBench(const GemmBench&) = delete;
  GemmBench& operator=(const GemmBench&) = delete;

  GemmResult run(const GemmCase& s, int reps) {
    cublasLtMatmulDesc_t op;
    GPT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
    GPT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
    GPT_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
    cublasLtMatrixLayout_t la, lb, ld;
    GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.m, s.k));
    GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, s.n, s.k));
    GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, s.m, s.n, s.m));
    cublasLtMatmulPreference_t pref;
    GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace, sizeof kWorkspace));
    cublasLtMatmulHeuristicResult_t heuristics[kAlgorithms];
    int found = 0;
    GPT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(lt_, op, la, lb, ld, ld, pref, kAlgorithms,
                                                    heuristics, &found));
    const float alpha = 1.0f, beta = 0.0f;
    double best_ms = 1e30;
    for (int i = 0; i < found; ++i) {
      auto gemm = [&] {
        return cublasLtMatmul(lt_, op, &alpha, a_, la, b_, lb, &beta, d_, ld, d_, ld,
                              &heuristics[i].algo, workspace_, kWorkspace, nullptr);
      };
      if (gemm() != CUBLAS_STATUS_SUCCESS) continue;  // warm-up; an algorithm may refuse
      for (int r = 0; r < reps; ++r) {
        GPT_CUDA_CHECK(cudaEventRecord(start_));
        GPT_CUBLAS_CHECK(gemm());
        GPT_CUDA_CHECK(cudaEventRecord(stop_));
        GPT_CUDA_CHECK(cudaEventSynchronize(stop_));
        float ms = 0.0f;
        GPT_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        best_ms = std::min(best_ms, static_cast<double>(ms));
      }
    }
    cublasLtMatmulPreferenceDestroy(pref);
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
    GemmResult r;
    r.shape = s;
    r.algorithms = found;
    if (best_ms < 1e29) r.tflops = 2.0 * s.m * s.n * s.k / (best_ms * 1e-3) / 1e12;
    return r;
  }

 private:
  static constexpr size_t kWorkspace = size_t{64} << 20;
  static constexpr int kAlgorithms = 8;
  cublasLtHandle_t lt_ = nullptr;
  uint16_t *a_ = nullptr, *b_ = nullptr;
  float* d_ = nullptr;
  void* workspace_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// The 8192^3 product and the model's own largest: the forward products of the LM head, c_fc,
// the MLP's c_proj and c_attn at `tokens` rows (m = out features, k = in features), and the LM
// head's weight gradient (k = tokens).
std::vector<GemmCase> gemm_shapes(const ModelConfig& cfg, int64_t tokens) {
  const int64_t C = cfg.d_model, V = cfg.padded_vocab(1);
  return {{"square 8192^3", 8192, 8192, 8192},      {"lm_head forward", V, tokens, C},
          {"lm_head weight grad", V, C, tokens},    {"mlp c_fc forward", 4 * C, tokens, C},
          {"mlp c_proj forward", C, tokens, 4 * C}, {"attn c_attn forward", 3 * C, tokens, C}};
}

// ---------------------------------------------------------------------------------------------
// (b) the GPT-2 124M training step on the CUDA backend in bf16

struct TrainResult {
  bool ok = false;
  std::string error;
  int64_t micro_batch = 0;
  double mean_step_s = 0.0, median_step_s = 0.0;
  double tokens_per_s = 0.0, tflops = 0.0;
  double loss_first = 0.0, loss_last = 0.0;
  double init_s = 0.0;
};

TrainResult train_once(const Args& args, int64_t B) {
  TrainResult r;
  r.micro_batch = B;
  const ModelConfig cfg = gpt2_124m();
  const int64_t N = B * cfg.seq_len;
  const double t_init = now_seconds();
  CudaBackendOptions options;
  options.precision = Precision::kBf16;
  options.arena_bytes = static_cast<size_t>(args.arena_gb * 1e9);
  std::unique_ptr<Backend> backend = make_cuda_backend(options);
  SingleRankModel model(*backend, cfg, B, 50256);  // GPT-2's real vocabulary
  backend->synchronize();
  r.init_s = now_seconds() - t_init;

  // The loss of a step is read (a host synchronisation) only where asked for.
  auto step = [&](double* loss) {
    model.step();
    if (loss) *loss = model.stage.loss_sum(0) / static_cast<double>(N);
  };
  for (int s = 0; s < args.warmup; ++s) step(s == 0 ? &r.loss_first : nullptr);
  backend->synchronize();
  std::vector<double> times;
  const double t0 = now_seconds();
  for (int s = 0; s < args.steps; ++s) {
    const double ts = now_seconds();
    step(nullptr);
    backend->synchronize();
    times.push_back(now_seconds() - ts);
  }
  r.mean_step_s = (now_seconds() - t0) / args.steps;
  std::sort(times.begin(), times.end());
  r.median_step_s = times[times.size() / 2];
  step(&r.loss_last);
  backend->synchronize();
  r.tokens_per_s = static_cast<double>(N) / r.mean_step_s;
  r.tflops = cfg.flops_per_token() * r.tokens_per_s / 1e12;
  r.ok = std::isfinite(r.loss_last);
  if (!r.ok) r.error = "the loss is not finite";
  return r;
}

// The requested micro-batch, halved until it fits.
TrainResult train(const Args& args) {
  TrainResult last;
  for (int64_t B = args.micro_batch; B >= 1; B /= 2) {
    try {
      return train_once(args, B);
    } catch (const std::exception& e) {
      last.error = e.what();
      std::printf("micro-batch %lld failed (%s)%s\n", static_cast<long long>(B), e.what(),
                  B > 1 ? "; halving it" : "");
      std::fflush(stdout);
    }
  }
  return last;
}

}  // namespace
}  // namespace gpt

static int run_bench(int argc, char** argv) {
  using namespace gpt;
  const Args args = parse_args(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device visible\n");
    return 77;
  }
  MPI_Init(&argc, &argv);
  log::set_quiet(true);
  cudaDeviceProp prop{};
  GPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  const ModelConfig cfg = gpt2_124m();
  const double n_params = static_cast<double>(cfg.num_parameters(false));
  std::printf(
      "bench_gpu: %s (%d SMs, %.0f GiB), CUDA runtime %d, driver %d\n"
      "model: GPT-2 124M (L %lld, NH %lld, C %lld, T %lld, V %lld), N = %.2fM without wpe, "
      "6N + 12LTC = %.3f GFLOP per token; bf16, AdamW\n",
      prop.name, prop.multiProcessorCount, static_cast<double>(prop.totalGlobalMem) / (1 << 30),
      runtime, driver, static_cast<long long>(cfg.n_layer), static_cast<long long>(cfg.n_head),
      static_cast<long long>(cfg.d_model), static_cast<long long>(cfg.seq_len),
      static_cast<long long>(cfg.vocab_size), n_params / 1e6, cfg.flops_per_token() / 1e9);
  std::fflush(stdout);

  // The training step first: its arena (by default most of the free memory) is released before
  // the GEMM buffers are taken.
  TrainResult tr;
  if (args.train) {
    tr = train(args);
    if (tr.ok)
      std::printf(
          "train: micro-batch %lld (%lld tokens/step), set-up %.1f s, loss %.4f -> %.4f, "
          "step %.2f ms (median %.2f ms over %d steps after %d warm-up)\n",
          static_cast<long long>(tr.micro_batch), static_cast<long long>(tr.micro_batch * 1024),
          tr.init_s, tr.loss_first, tr.loss_last, tr.mean_step_s * 1e3, tr.median_step_s * 1e3,
          args.steps, args.warmup);
    else
      std::printf("train: FAILED: %s\n", tr.error.c_str());
    std::fflush(stdout);
  }

  std::vector<GemmResult> gemms;
  double peak_measured = 0.0;
  if (args.gemm) {
    const int64_t tokens = (tr.ok ? tr.micro_batch : args.micro_batch) * cfg.seq_len;
    const std::vector<GemmCase> shapes = gemm_shapes(cfg, tokens);
    GemmBench bench(shapes);
    for (const GemmCase& s : shapes) {
      gemms.push_back(bench.run(s, args.gemm_reps));
      const GemmResult& g = gemms.back();
      peak_measured = std::max(peak_measured, g.tflops);
      std::printf(
          "gemm bf16 x bf16 -> fp32 %-20s m %6lld n %6lld k %6lld: %7.1f TFLOP/s "
          "(best of %d reps x %d algorithms)\n",
          s.name.c_str(), static_cast<long long>(s.m), static_cast<long long>(s.n),
          static_cast<long long>(s.k), g.tflops, args.gemm_reps, g.algorithms);
      std::fflush(stdout);
    }
  }

  const double mfu = tr.ok ? tr.tflops / args.peak_tflops : 0.0;
  const double mfu_measured = tr.ok && peak_measured > 0 ? tr.tflops / peak_measured : 0.0;
  if (tr.ok) {
    std::printf(
        "result: %.0f tokens/s | %.1f TFLOP/s | MFU %.1f%% of %.0f TFLOP/s (dense bf16, "
        "theoretical) | %.1f%% of the measured GEMM peak %.1f TFLOP/s\n",
        tr.tokens_per_s, tr.tflops, 100.0 * mfu, args.peak_tflops, 100.0 * mfu_measured,
        peak_measured);
  }
  std::string gemm_json;
  for (const GemmResult& g : gemms)
    gemm_json += (gemm_json.empty() ? "" : ", ") + std::string("\"") + g.shape.name +
                 "\": " + std::to_string(g.tflops);
  std::printf(
      "{\"device\": \"%s\", \"ok\": %s, \"micro_batch\": %lld, \"tokens_per_s\": %.1f, "
      "\"step_time_s\": %.6f, \"tflops\": %.2f, \"peak_tflops_theoretical\": %.1f, "
      "\"mfu_theoretical\": %.4f, \"gemm_peak_tflops\": %.2f, \"mfu_measured_peak\": %.4f, "
      "\"loss_first\": %.5f, \"loss_last\": %.5f, \"gemm_tflops\": {%s}}\n",
      prop.name, tr.ok ? "true" : "false", static_cast<long long>(tr.micro_batch), tr.tokens_per_s,
      tr.mean_step_s, tr.tflops, args.peak_tflops, mfu, peak_measured, mfu_measured,
      tr.ok ? tr.loss_first : 0.0, tr.ok ? tr.loss_last : 0.0, gemm_json.c_str());
  std::fflush(stdout);
  MPI_Finalize();
  return args.train && !tr.ok ? 1 : 0;
}

int main(int argc, char** argv) {
  try {
    return run_bench(argc, argv);
  } catch (const std::exception& e) {  // a failed CUDA or cuBLASLt call, with its call and line
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
}
