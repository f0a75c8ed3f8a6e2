// The CUDA backend against the CPU backend, kernel by kernel (docs/DESIGN.md "Backends"): every
// Backend function on the same random inputs, fp32 to float rounding (FMA contraction and summation
// order differ), bf16 matrix products and attention to bf16 rounding, and bitwise repeatability.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "framework/backend.h"
#include "framework/device_array.h"
#include "tests/shuffled_rows.h"

namespace gpt {
namespace {

using Vec = std::vector<float>;
using Tokens = std::vector<int32_t>;
using Outputs = std::vector<Vec>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// Device memory reserved by each CUDA backend of this binary (far more than the tests use).
constexpr size_t kArenaBytes = size_t{3} << 30;

// ---------------------------------------------------------------------------------------------
// backends: made on first use, freed by the environment's TearDown (before MPI and the CUDA
// runtime go away)

struct BackendSet {
  std::unique_ptr<Backend> cpu;
  std::map<std::pair<int, bool>, std::unique_ptr<Backend>> cuda;
};
BackendSet* g_backends = nullptr;

class BackendEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { g_backends = new BackendSet; }
  void TearDown() override {
    delete g_backends;
    g_backends = nullptr;
  }
};
[[maybe_unused]] const ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new BackendEnvironment);

Backend& cpu() {
  if (!g_backends->cpu) g_backends->cpu = make_cpu_backend(2);
  return *g_backends->cpu;
}

Backend& cuda(Precision precision = Precision::kFp32, bool deterministic = false) {
  auto& slot = g_backends->cuda[{static_cast<int>(precision), deterministic}];
  if (!slot) {
    CudaBackendOptions options;
    options.device = 0;
    options.precision = precision;
    options.deterministic = deterministic;
    options.arena_bytes = kArenaBytes;
    slot = make_cuda_backend(options);
  }
  return *slot;
}
Backend& cuda_bf16() {
  return cuda(Precision::kBf16);
}

// ---------------------------------------------------------------------------------------------
// host data and transfers

Vec randn(size_t n, std::mt19937& rng, float stddev = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> dist(mean, stddev);
  Vec v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

Tokens random_tokens(size_t n, int32_t lo, int32_t hi, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  Tokens t(n);
  for (auto& x : t) x = dist(rng);
  return t;
}

template <typename T>
DeviceArray<T> put(Backend& be, const std::vector<T>& host) {
  DeviceArray<T> a(be, static_cast<int64_t>(host.size()), MemoryCategory::kWorkspace);
  if (!host.empty()) a.upload(host);
  return a;
}

// A device buffer of n floats, every one `fill` (NaN: an output the kernel must overwrite).
DeviceArray<float> filled(Backend& be, size_t n, float fill) {
  return put(be, Vec(n, fill));
}

std::string shape_tag(std::initializer_list<std::pair<const char*, int64_t>> dims) {
  std::string s;
  for (const auto& [name, value] : dims) s += std::string(" ") + name + "=" + std::to_string(value);
  return s;
}

// ---------------------------------------------------------------------------------------------
// comparisons

double norm(const Vec& v) {
  double s = 0.0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

double rel_norm_diff(const Vec& got, const Vec& want) {
  double d = 0.0;
  for (size_t i = 0; i < got.size(); i++) {
    const double e = static_cast<double>(got[i]) - want[i];
    d += e * e;
  }
  const double ref = norm(want);
  if (ref == 0.0) return d == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(d) / ref;
}

void expect_bits_equal(const Vec& got, const Vec& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (got.empty()) return;
  if (std::memcmp(got.data(), want.data(), sizeof(float) * got.size()) == 0) return;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); i++) {
    if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0) {
      if (bad < 5) ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i];
      bad++;
    }
  }
  ADD_FAILURE() << what << ": " << bad << " of " << got.size() << " elements not bit-identical";
}

// GPU result against the CPU's: relative difference by norm within `rel`, and every element within
// 10*rel of itself plus rel of the tensor's largest magnitude (a cancellation leaves an element
// small beside its rounding). Equal values (infinities included) always pass; NaN never does.
void expect_match(const Vec& got, const Vec& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0.0;
  for (float w : want)
    if (std::isfinite(w)) scale = std::max(scale, static_cast<double>(std::abs(w)));
  int64_t bad = 0;
  Vec g_finite, w_finite;
  for (size_t i = 0; i < got.size(); i++) {
    if (got[i] == want[i]) {
      if (std::isfinite(want[i])) g_finite.push_back(got[i]), w_finite.push_back(want[i]);
      continue;
    }
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= 10.0 * rel * std::abs(want[i]) + rel * scale)) {
      if (bad < 5)
        ADD_FAILURE() << what << "[" << i << "]: cuda " << got[i] << " cpu " << want[i] << " (err "
                      << err << ", tensor scale " << scale << ")";
      bad++;
    }
    g_finite.push_back(got[i]), w_finite.push_back(want[i]);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off";
  const double r = rel_norm_diff(g_finite, w_finite);
  EXPECT_LE(r, rel) << what << ": relative difference by norm " << r;
}

constexpr double kFp32Rel = 1e-5;  // GPU vs CPU in fp32
constexpr double kBf16Rel = 1e-2;  // bf16 products vs the CPU's fp32

// The relative difference by norm only (bf16: elements near zero carry rounding of the others).
void expect_norm_close(const Vec& got, const Vec& want, double rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); i++)
    ASSERT_TRUE(std::isfinite(got[i])) << what << "[" << i << "] = " << got[i];
  const double r = rel_norm_diff(got, want);
  EXPECT_LE(r, rel) << what << ": relative difference by norm " << r;
}

// Runs `f` on the CPU and on `gpu` and compares each output.
void compare(const std::function<Outputs(Backend&)>& f, Backend& gpu, double rel,
             const std::vector<std::string>& names, const std::string& tag) {
  const Outputs want = f(cpu());
  const Outputs got = f(gpu);
  ASSERT_EQ(want.size(), names.size());
  ASSERT_EQ(got.size(), names.size());
  for (size_t i = 0; i < names.size(); i++) expect_match(got[i], want[i], rel, names[i] + tag);
}

// Runs `f` on the CPU and on the GPU: its first output (a forward, the same operations on both)
// must match bit for bit, its second (a backward summed in another order) to fp32 rounding.
void expect_exact_forward_close_backward(const std::function<Outputs(Backend&)>& f,
                                         const std::string& forward, const std::string& backward,
                                         const std::string& tag) {
  const Outputs want = f(cpu()), got = f(cuda());
  expect_bits_equal(got[0], want[0], forward + tag);
  expect_match(got[1], want[1], kFp32Rel, backward + tag);
}

// ---------------------------------------------------------------------------------------------
// memory

TEST(CudaMemory, BackendIdentity) {
  Backend& be = cuda();
  EXPECT_EQ(be.kind(), DeviceKind::kCuda);
  EXPECT_FALSE(be.name().empty());
  EXPECT_EQ(be.precision(), Precision::kFp32);
  EXPECT_EQ(cuda_bf16().precision(), Precision::kBf16);
  EXPECT_GT(cuda_free_memory(0), size_t{0});
  EXPECT_FALSE(cuda_device_uuid(0).empty());
  EXPECT_EQ(cuda_device_uuid(0), cuda_device_uuid(0));
}

TEST(CudaMemory, AllocateIsZeroFilledAlsoWhenReused) {
  Backend& be = cuda();
  for (size_t bytes :
       {size_t{1}, size_t{3}, size_t{64}, size_t{1000}, size_t{1} << 20, (size_t{1} << 26) + 5}) {
    for (int round = 0; round < 2; round++) {
      void* p = be.allocate(bytes, MemoryCategory::kWorkspace);
      ASSERT_NE(p, nullptr) << bytes;
      std::vector<unsigned char> host(bytes, 0xAB);
      be.copy_to_host(host.data(), p, bytes);
      EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](unsigned char b) { return b == 0; }))
          << bytes << " bytes, round " << round;
      // Dirty it before freeing: memory handed out again must still come zero-filled.
      std::vector<unsigned char> junk(bytes, 0x5C);
      be.copy_from_host(p, junk.data(), bytes);
      be.deallocate(p);
    }
  }
}

TEST(CudaMemory, CopiesAndFill) {
  Backend& be = cuda();
  std::mt19937 rng(1);
  const Vec host = randn(1001, rng);
  DeviceArray<float> a = put(be, host), b(be, 1001, MemoryCategory::kWorkspace);
  be.copy(b.data(), a.data(), sizeof(float) * 1001);
  expect_bits_equal(b.download(), host, "copy");
  // Unaligned offsets and zero-byte copies.
  be.copy(b.data() + 3, a.data() + 1, sizeof(float) * 7);
  be.copy(b.data(), a.data(), 0);
  be.copy_from_host(b.data(), host.data(), 0);
  Vec back(1001);
  be.copy_to_host(back.data(), b.data(), sizeof(float) * 1001);
  for (int i = 0; i < 7; i++) EXPECT_EQ(back[3 + i], host[1 + i]);
  EXPECT_EQ(back[0], host[0]);
  EXPECT_EQ(back[10], host[10]);
  be.copy_from_host(b.data(), host.data(), sizeof(float) * 1001);
  be.fill_zero(b.data() + 1, 999);
  be.fill_zero(b.data(), 0);
  const Vec z = b.download();
  EXPECT_EQ(z[0], host[0]);
  EXPECT_EQ(z[1000], host[1000]);
  for (int i = 1; i < 1000; i++) ASSERT_EQ(z[i], 0.0f) << i;
  be.synchronize();
}

// ---------------------------------------------------------------------------------------------
// matrix products

struct MatShape {
  int64_t N, IC, OC;
};
const MatShape kMatShapes[] = {{1, 1, 1},      {1, 7, 5},       {3, 17, 9},     {37, 64, 23},
                               {64, 100, 130}, {130, 96, 2304}, {257, 768, 96}, {17, 64, 1000}};

// forward with and without bias, backward input written and accumulated, backward weight with
// and without a bias gradient (both accumulate onto what is there).
Outputs matmul_all(Backend& be, const MatShape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t N = s.N, IC = s.IC, OC = s.OC;
  const Vec inp = randn(N * IC, rng), w = randn(OC * IC, rng), bias = randn(OC, rng);
  const Vec dout = randn(N * OC, rng), prior_dinp = randn(N * IC, rng);
  const Vec prior_dw = randn(OC * IC, rng), prior_db = randn(OC, rng);
  auto d_inp = put(be, inp), d_w = put(be, w), d_bias = put(be, bias), d_dout = put(be, dout);
  auto out_b = filled(be, N * OC, kNaN), out = filled(be, N * OC, kNaN);
  be.matmul_forward(out_b.data(), d_inp.data(), d_w.data(), d_bias.data(), N, IC, OC);
  be.matmul_forward(out.data(), d_inp.data(), d_w.data(), nullptr, N, IC, OC);
  auto dinp = filled(be, N * IC, kNaN), dinp_acc = put(be, prior_dinp);
  be.matmul_backward_input(dinp.data(), d_dout.data(), d_w.data(), N, IC, OC, false);
  be.matmul_backward_input(dinp_acc.data(), d_dout.data(), d_w.data(), N, IC, OC, true);
  auto dw = put(be, prior_dw), db = put(be, prior_db), dw2 = filled(be, OC * IC, 0.0f);
  be.matmul_backward_weight(dw.data(), db.data(), d_dout.data(), d_inp.data(), N, IC, OC);
  be.matmul_backward_weight(dw2.data(), nullptr, d_dout.data(), d_inp.data(), N, IC, OC);
  return {out_b.download(), out.download(), dinp.download(), dinp_acc.download(),
          dw.download(),    db.download(),  dw2.download()};
}
const std::vector<std::string> kMatmulOutputs = {"forward+bias",
                                                 "forward",
                                                 "backward_input",
                                                 "backward_input accumulate",
                                                 "backward_weight",
                                                 "backward_weight dbias",
                                                 "backward_weight no dbias"};

TEST(CudaMatmul, Fp32MatchesCpu) {
  uint32_t seed = 10;
  for (const auto& s : kMatShapes) {
    compare([&](Backend& be) { return matmul_all(be, s, seed); }, cuda(), kFp32Rel, kMatmulOutputs,
            shape_tag({{"N", s.N}, {"IC", s.IC}, {"OC", s.OC}}));
    seed++;
  }
}

TEST(CudaMatmul, Bf16WithinBf16Rounding) {
  uint32_t seed = 20;
  for (const auto& s : kMatShapes) {
    const Outputs want = matmul_all(cpu(), s, seed), got = matmul_all(cuda_bf16(), s, seed);
    const std::string tag = shape_tag({{"N", s.N}, {"IC", s.IC}, {"OC", s.OC}});
    for (size_t i = 0; i < want.size(); i++)
      expect_norm_close(got[i], want[i], kBf16Rel, "bf16 " + kMatmulOutputs[i] + tag);
    // Operands rounded to bf16 must show: an fp32 product here means the option is ignored.
    if (s.IC >= 64) {
      const double r = rel_norm_diff(got[1], want[1]);
      EXPECT_GT(r, 1e-5) << "bf16 matmul_forward equals fp32 to " << r << tag
                         << ": are the operands rounded to bf16?";
    }
    seed++;
  }
}

// ---------------------------------------------------------------------------------------------
// generation's and serving's row product: float32 in either precision, close to the CPU's (each
// sums in its own fixed order), and batch invariant on the GPU

Outputs matmul_rows_all(Backend& be, const MatShape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t N = s.N, IC = s.IC, OC = s.OC;
  auto inp = put(be, randn(N * IC, rng)), w = put(be, randn(OC * IC, rng)),
       bias = put(be, randn(OC, rng));
  auto out_b = filled(be, N * OC, kNaN), out = filled(be, N * OC, kNaN);
  be.matmul_forward_rows(out_b.data(), inp.data(), w.data(), bias.data(), N, IC, OC);
  be.matmul_forward_rows(out.data(), inp.data(), w.data(), nullptr, N, IC, OC);
  return {out_b.download(), out.download()};
}

const MatShape kRowsShapes[] = {{1, 1, 1},       {1, 7, 5},        {5, 17, 9},      {64, 100, 130},
                                {64, 768, 2304}, {130, 1024, 513}, {3, 4096, 1000}, {257, 768, 96}};

TEST(CudaMatmulRows, Fp32MatchesCpuInEitherPrecision) {
  uint32_t seed = 25;
  for (const auto& s : kRowsShapes) {
    const std::string tag = shape_tag({{"R", s.N}, {"IC", s.IC}, {"OC", s.OC}});
    compare([&](Backend& be) { return matmul_rows_all(be, s, seed); }, cuda(), kFp32Rel,
            {"rows+bias", "rows"}, tag);
    const Outputs fp32 = matmul_rows_all(cuda(), s, seed),
                  bf16 = matmul_rows_all(cuda_bf16(), s, seed);
    for (size_t i = 0; i < fp32.size(); i++)
      expect_bits_equal(bf16[i], fp32[i], "rows on the bf16 backend" + tag);
    seed++;
  }
}

// 64 rows at once, 7 of them in a shuffled order (each at another index), and every ninth alone
// from a buffer one float off: each row's outputs the same bits every way.
TEST(CudaMatmulRows, BatchInvariant) {
  std::mt19937 rng(26);
  for (const auto& [IC, OC] :
       {std::pair<int64_t, int64_t>{100, 130}, {768, 2304}, {1001, 33}, {4096, 1000}}) {
    const int64_t N = 64;
    const std::string tag = shape_tag({{"IC", IC}, {"OC", OC}});
    const Vec inp = randn(N * IC, rng);
    Backend& be = cuda();
    auto d_inp = put(be, inp), w = put(be, randn(OC * IC, rng)), bias = put(be, randn(OC, rng));
    auto all = filled(be, N * OC, kNaN);
    be.matmul_forward_rows(all.data(), d_inp.data(), w.data(), bias.data(), N, IC, OC);
    const Vec want = all.download();
    auto row = [&](int64_t r) { return Vec(want.begin() + r * OC, want.begin() + (r + 1) * OC); };
    const std::vector<int64_t> picked = shuffled_rows(N, 7, rng);
    const Vec seven = gather_rows(inp, picked, IC);
    auto d_seven = put(be, seven), out7 = filled(be, 7 * OC, kNaN);
    be.matmul_forward_rows(out7.data(), d_seven.data(), w.data(), bias.data(), 7, IC, OC);
    const Vec got7 = out7.download();
    for (int64_t i = 0; i < 7; i++)
      expect_bits_equal(
          Vec(got7.begin() + i * OC, got7.begin() + (i + 1) * OC), row(picked[i]),
          "row " + std::to_string(picked[i]) + " at index " + std::to_string(i) + " of 7" + tag);
    for (int64_t r = 0; r < N; r += 9) {
      Vec shifted(IC + 1, 0.0f);
      std::copy_n(&inp[r * IC], IC, shifted.begin() + 1);
      auto d_row = put(be, shifted), one = filled(be, OC, kNaN);
      be.matmul_forward_rows(one.data(), d_row.data() + 1, w.data(), bias.data(), 1, IC, OC);
      expect_bits_equal(one.download(), row(r), "row " + std::to_string(r) + " alone" + tag);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm, GELU

TEST(CudaLayerNorm, Fp32MatchesCpu) {
  uint32_t seed = 30;
  for (int64_t N : {1, 5, 129})
    for (int64_t C : {1, 7, 32, 768, 1001}) {
      auto run = [&](Backend& be) -> Outputs {
        std::mt19937 rng(seed);
        const Vec x = randn(N * C, rng, 2.0f, 0.5f), w = randn(C, rng), b = randn(C, rng);
        const Vec dout = randn(N * C, rng), prior_dx = randn(N * C, rng);
        const Vec prior_dw = randn(C, rng), prior_db = randn(C, rng);
        auto dx_in = put(be, x), dw_in = put(be, w), db_in = put(be, b), d_dout = put(be, dout);
        auto out = filled(be, N * C, kNaN), mean = filled(be, N, kNaN), rstd = filled(be, N, kNaN);
        be.layernorm_forward(out.data(), mean.data(), rstd.data(), dx_in.data(), dw_in.data(),
                             db_in.data(), N, C);
        auto dinp = put(be, prior_dx), dw = put(be, prior_dw), db = put(be, prior_db);
        be.layernorm_backward_input(dinp.data(), d_dout.data(), dx_in.data(), dw_in.data(),
                                    mean.data(), rstd.data(), N, C);
        be.layernorm_backward_weight(dw.data(), db.data(), d_dout.data(), dx_in.data(), mean.data(),
                                     rstd.data(), N, C);
        return {out.download(),  mean.download(), rstd.download(),
                dinp.download(), dw.download(),   db.download()};
      };
      compare(run, cuda(), kFp32Rel, {"ln out", "ln mean", "ln rstd", "ln dinp", "ln dw", "ln db"},
              shape_tag({{"N", N}, {"C", C}}));
      seed++;
    }
}

TEST(CudaGelu, Fp32MatchesCpuIncludingEmpty) {
  uint32_t seed = 40;
  for (int64_t n : {0, 1, 7, 1025, 100003}) {
    auto run = [&](Backend& be) -> Outputs {
      std::mt19937 rng(seed);
      const Vec x = randn(n, rng, 3.0f), dout = randn(n, rng);
      auto d_x = put(be, x), d_dout = put(be, dout);
      auto out = filled(be, n, kNaN), dinp = filled(be, n, kNaN);
      be.gelu_forward(out.data(), d_x.data(), n);
      be.gelu_backward(dinp.data(), d_dout.data(), d_x.data(), n);
      return {out.download(), dinp.download()};
    };
    compare(run, cuda(), kFp32Rel, {"gelu forward", "gelu backward"}, shape_tag({{"n", n}}));
    seed++;
  }
}

// ---------------------------------------------------------------------------------------------
// attention: compared on out and dqkv (the caches differ between backends by design)

struct AttShape {
  int64_t B, T, NH, HS;
  float qkv_std;
};
const AttShape kAttShapes[] = {{1, 1, 1, 8, 1.0f},    {2, 17, 3, 16, 1.0f}, {1, 64, 1, 8, 1.0f},
                               {1, 70, 2, 64, 1.0f},  {3, 33, 2, 16, 3.0f}, {2, 129, 4, 64, 1.0f},
                               {1, 300, 2, 64, 1.0f}, {2, 65, 2, 8, 2.0f}};

Outputs attention_all(Backend& be, const AttShape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t B = s.B, T = s.T, NH = s.NH, HS = s.HS, C = NH * HS;
  const Vec qkv = randn(B * T * 3 * C, rng, s.qkv_std), dout = randn(B * T * C, rng);
  EXPECT_GT(be.attention_cache_floats(B, NH, T), 0);
  EXPECT_GE(be.attention_scratch_floats(B, NH, T), 0);
  auto d_qkv = put(be, qkv), d_dout = put(be, dout);
  auto out = filled(be, B * T * C, kNaN);
  auto att = filled(be, be.attention_cache_floats(B, NH, T), kNaN);
  auto datt = filled(be, be.attention_scratch_floats(B, NH, T), kNaN);
  be.attention_forward(out.data(), att.data(), d_qkv.data(), B, T, NH, HS);
  auto dqkv = filled(be, B * T * 3 * C, kNaN);
  be.attention_backward(dqkv.data(), datt.data(), d_dout.data(), out.data(), d_qkv.data(),
                        att.data(), B, T, NH, HS);
  return {out.download(), dqkv.download()};
}

std::string att_tag(const AttShape& s) {
  return shape_tag({{"B", s.B}, {"T", s.T}, {"NH", s.NH}, {"HS", s.HS}});
}

TEST(CudaAttention, Fp32MatchesCpu) {
  uint32_t seed = 50;
  for (const auto& s : kAttShapes) {
    compare([&](Backend& be) { return attention_all(be, s, seed); }, cuda(), kFp32Rel,
            {"attention out", "attention dqkv"}, att_tag(s));
    seed++;
  }
}

TEST(CudaAttention, Bf16WithinBf16Rounding) {
  uint32_t seed = 60;
  for (const auto& s : kAttShapes) {
    const Outputs want = attention_all(cpu(), s, seed), got = attention_all(cuda_bf16(), s, seed);
    expect_norm_close(got[0], want[0], kBf16Rel, "bf16 attention out" + att_tag(s));
    // The backward chains more bf16 products (dO.V^T, dS.K, dS^T.Q, P^T.dO).
    expect_norm_close(got[1], want[1], 2 * kBf16Rel, "bf16 attention dqkv" + att_tag(s));
    seed++;
  }
}

// Serving: B sequences of T positions whose blocks (block_tokens positions each) are scattered
// over a pool in random order, one block no sequence owns naming the tables' unused entries; every
// position stored by one paged_kv_store whose rows take the sequences in shuffled order, then the
// same rows (different sequences at different positions) decoded in one call. Compared on the
// pools and the output; with `alone`, those rows are also decoded one per call, appended as a
// fourth output (the batch invariance of the decode). That nothing past a row's length is read,
// test_cuda_emulation shows with NaN there.
Outputs paged_decode_all(Backend& be, const AttentionShape& s, int64_t block_tokens, float q_std,
                         uint32_t seed, const std::vector<int64_t>& alone = {}) {
  std::mt19937 rng(seed);
  const bool fused = s.NKV == s.NH && s.q_stride == 3 * s.NH * s.HS && s.kv_stride == s.q_stride;
  const int64_t R = s.B * s.T, C = s.NH * s.HS;
  const int64_t blocks_per_sequence = (s.T + block_tokens - 1) / block_tokens;
  const int64_t num_blocks = s.B * blocks_per_sequence + 1, max_blocks = blocks_per_sequence + 1;
  Tokens order(num_blocks);
  for (int64_t i = 0; i < num_blocks; i++) order[i] = static_cast<int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t t = 0; t < s.T; t++) rows.emplace_back(b, t);
  std::shuffle(rows.begin(), rows.end(), rng);
  Tokens slots(R), tables(R * max_blocks, order.back()), lengths(R);
  for (int64_t r = 0; r < R; r++) {
    const auto [b, t] = rows[r];
    for (int64_t i = 0; i < blocks_per_sequence; i++)
      tables[r * max_blocks + i] = order[b * blocks_per_sequence + i];
    slots[r] = static_cast<int32_t>(tables[r * max_blocks + t / block_tokens] * block_tokens +
                                    t % block_tokens);
    lengths[r] = static_cast<int32_t>(t + 1);
  }
  // The rows' q, k and v: GPT-2's fused rows in one buffer, else three strided buffers.
  const Vec q_host = randn(R * s.q_stride, rng, q_std);
  const Vec k_host = fused ? Vec() : randn(R * s.kv_stride, rng);
  const Vec v_host = fused ? Vec() : randn(R * s.kv_stride, rng);
  auto d_q = put(be, q_host), d_k = put(be, k_host), d_v = put(be, v_host);
  const float* q = d_q.data();
  const float* k = fused ? q + C : d_k.data();
  const float* v = fused ? q + 2 * C : d_v.data();
  auto d_slots = put(be, slots), d_tables = put(be, tables), d_lengths = put(be, lengths);
  const int64_t pool = num_blocks * s.NKV * block_tokens * s.HS;
  auto k_pool = filled(be, pool, 0.0f), v_pool = filled(be, pool, 0.0f);
  AttentionShape paged = s;
  paged.B = R;
  paged.T = block_tokens;
  be.paged_kv_store(k_pool.data(), v_pool.data(), k, v, paged, d_slots.data());
  const int64_t positions = max_blocks * block_tokens;
  auto scores = filled(be, be.paged_attention_floats(R, s.NH, positions), kNaN);
  auto out = filled(be, R * C, kNaN);
  be.paged_attention_decode(out.data(), scores.data(), q, k_pool.data(), v_pool.data(), paged,
                            d_tables.data(), max_blocks, d_lengths.data());
  Outputs result = {k_pool.download(), v_pool.download(), out.download()};
  if (alone.empty()) return result;
  AttentionShape one = paged;
  one.B = 1;
  Vec rows_alone;
  for (int64_t r : alone) {
    auto row_out = filled(be, C, kNaN);
    auto row_scores = filled(be, be.paged_attention_floats(1, s.NH, positions), kNaN);
    be.paged_attention_decode(row_out.data(), row_scores.data(), q + r * s.q_stride, k_pool.data(),
                              v_pool.data(), one, d_tables.data() + r * max_blocks, max_blocks,
                              d_lengths.data() + r);
    const Vec got = row_out.download();
    rows_alone.insert(rows_alone.end(), got.begin(), got.end());
  }
  result.push_back(rows_alone);
  return result;
}

TEST(CudaAttention, PagedDecodeMatchesCpu) {
  uint32_t seed = 65;
  for (const auto& a : kAttShapes)
    for (int64_t block_tokens : {1, 16}) {
      compare(
          [&](Backend& be) {
            return paged_decode_all(be, fused_qkv_shape(a.B, a.T, a.NH, a.HS), block_tokens,
                                    a.qkv_std, seed);
          },
          cuda(), kFp32Rel, {"key pool", "value pool", "paged decode out"},
          att_tag(a) + shape_tag({{"block_tokens", block_tokens}}));
      seed++;
    }
}

// Grouped-query attention over separate q, k, v whose rows are 3 floats longer than their heads:
// NH/NKV query heads per kv head, dk and dv summed over each group. The gradients' pad columns
// start at 7 and must stay so on both backends.
struct GqaShape {
  int64_t B, T, NH, NKV, HS;
};
const GqaShape kGqaShapes[] = {
    {2, 70, 4, 2, 64}, {1, 129, 8, 1, 128}, {2, 33, 6, 3, 16}, {1, 300, 4, 2, 64}};

AttentionShape gqa_shape(const GqaShape& g) {
  return {g.B, g.T, g.NH, g.NKV, g.HS, g.NH * g.HS + 3, g.NKV * g.HS + 3};
}

std::string gqa_tag(const GqaShape& g) {
  return shape_tag({{"B", g.B}, {"T", g.T}, {"NH", g.NH}, {"NKV", g.NKV}, {"HS", g.HS}});
}

Outputs gqa_attention_all(Backend& be, const GqaShape& g, uint32_t seed) {
  std::mt19937 rng(seed);
  const AttentionShape s = gqa_shape(g);
  const int64_t nq = s.B * s.T * s.q_stride, nkv = s.B * s.T * s.kv_stride;
  const int64_t n_out = s.B * s.T * s.NH * s.HS;
  auto q = put(be, randn(nq, rng)), k = put(be, randn(nkv, rng)), v = put(be, randn(nkv, rng));
  auto dout = put(be, randn(n_out, rng));
  auto out = filled(be, n_out, kNaN);
  auto att = filled(be, be.attention_cache_floats(s.B, s.NH, s.T), kNaN);
  auto datt = filled(be, be.attention_scratch_floats(s.B, s.NH, s.T), kNaN);
  auto dq = filled(be, nq, 7.0f), dk = filled(be, nkv, 7.0f), dv = filled(be, nkv, 7.0f);
  be.attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s);
  be.attention_backward(dq.data(), dk.data(), dv.data(), datt.data(), dout.data(), out.data(),
                        q.data(), k.data(), v.data(), att.data(), s);
  return {out.download(), dq.download(), dk.download(), dv.download()};
}

TEST(CudaAttention, GroupedQueryMatchesCpu) {
  uint32_t seed = 66;
  for (const auto& g : kGqaShapes) {
    compare([&](Backend& be) { return gqa_attention_all(be, g, seed); }, cuda(), kFp32Rel,
            {"gqa out", "gqa dq", "gqa dk", "gqa dv"}, gqa_tag(g));
    const Outputs want = gqa_attention_all(cpu(), g, seed),
                  got = gqa_attention_all(cuda_bf16(), g, seed);
    expect_norm_close(got[0], want[0], kBf16Rel, "bf16 gqa out" + gqa_tag(g));
    for (size_t i = 1; i < got.size(); i++)
      expect_norm_close(got[i], want[i], 2 * kBf16Rel, "bf16 gqa gradient" + gqa_tag(g));
    seed++;
  }
}

// Paged decode with NKV < NH over separate strided q, k and v rows, blocks of 5 and 16 positions;
// then each of a few rows decoded alone on the GPU gives its bits among all the others.
TEST(CudaAttention, GroupedQueryPagedDecodeMatchesCpu) {
  uint32_t seed = 67;
  for (const auto& g : kGqaShapes)
    for (int64_t block_tokens : {5, 16}) {
      compare(
          [&](Backend& be) { return paged_decode_all(be, gqa_shape(g), block_tokens, 1.0f, seed); },
          cuda(), kFp32Rel, {"gqa key pool", "gqa value pool", "gqa paged decode out"},
          gqa_tag(g) + shape_tag({{"block_tokens", block_tokens}}));
      seed++;
    }
}

TEST(CudaAttention, PagedDecodeIsBatchInvariant) {
  for (const AttentionShape& s :
       {fused_qkv_shape(2, 129, 4, 64), gqa_shape(GqaShape{2, 70, 4, 2, 64}),
        gqa_shape(GqaShape{1, 129, 8, 1, 128})}) {
    const int64_t R = s.B * s.T, C = s.NH * s.HS;
    const std::vector<int64_t> alone = {0, R / 3, R - 1};
    const Outputs o = paged_decode_all(cuda(), s, 16, 1.0f, 68, alone);
    for (size_t i = 0; i < alone.size(); i++)
      expect_bits_equal(Vec(o[3].begin() + i * C, o[3].begin() + (i + 1) * C),
                        Vec(o[2].begin() + alone[i] * C, o[2].begin() + (alone[i] + 1) * C),
                        "row " + std::to_string(alone[i]) + " of " + std::to_string(R) +
                            " decoded alone" + shape_tag({{"NH", s.NH}, {"NKV", s.NKV}}));
  }
}

// ---------------------------------------------------------------------------------------------
// the Llama family's RMSNorm, rotary positions and SwiGLU

Outputs rmsnorm_all(Backend& be, int64_t N, int64_t C, uint32_t seed) {
  std::mt19937 rng(seed);
  const Vec x = randn(N * C, rng, 2.0f, 0.5f), w = randn(C, rng), dout = randn(N * C, rng);
  auto dx_in = put(be, x), dw_in = put(be, w), d_dout = put(be, dout);
  auto out = filled(be, N * C, kNaN), rstd = filled(be, N, kNaN);
  be.rmsnorm_forward(out.data(), rstd.data(), dx_in.data(), dw_in.data(), N, C, 1e-5f);
  auto dinp = put(be, randn(N * C, rng)), dw = put(be, randn(C, rng));
  be.rmsnorm_backward_input(dinp.data(), d_dout.data(), dx_in.data(), dw_in.data(), rstd.data(), N,
                            C);
  be.rmsnorm_backward_weight(dw.data(), d_dout.data(), dx_in.data(), rstd.data(), N, C);
  return {out.download(), rstd.download(), dinp.download(), dw.download()};
}

TEST(CudaRmsNorm, Fp32MatchesCpu) {
  uint32_t seed = 45;
  for (int64_t N : {1, 5, 129, 16387})
    for (int64_t C : {1, 7, 768, 1001}) {
      if (N > 129 && C != 768) continue;
      compare([&](Backend& be) { return rmsnorm_all(be, N, C, seed); }, cuda(), kFp32Rel,
              {"rms out", "rms rstd", "rms dinp", "rms dw"}, shape_tag({{"N", N}, {"C", C}}));
      seed++;
    }
}

TEST(CudaRotary, ForwardAndBackwardMatchCpu) {
  uint32_t seed = 47;
  for (const auto& [B, T, heads, HS, start] : std::vector<std::array<int64_t, 5>>{
           {1, 1, 1, 2, 0}, {2, 17, 4, 64, 0}, {3, 9, 8, 128, 40}}) {
    auto run = [&](Backend& be) -> Outputs {
      std::mt19937 rng(seed);
      const Vec table = randn((start + T) * HS, rng), x = randn(B * T * heads * HS, rng);
      auto d_table = put(be, table), fwd = put(be, x), bwd = put(be, x);
      be.rotary_forward(fwd.data(), d_table.data(), B, T, heads, HS, start);
      be.rotary_backward(bwd.data(), d_table.data(), B, T, heads, HS, start);
      return {fwd.download(), bwd.download()};
    };
    compare(run, cuda(), kFp32Rel, {"rotary forward", "rotary backward"},
            shape_tag({{"B", B}, {"T", T}, {"heads", heads}, {"HS", HS}, {"start", start}}));
    seed++;
  }
}

TEST(CudaSwiGlu, Fp32MatchesCpuIncludingEmpty) {
  uint32_t seed = 48;
  for (int64_t n : {0, 1, 7, 1025, 100003}) {
    auto run = [&](Backend& be) -> Outputs {
      std::mt19937 rng(seed);
      const Vec gate = randn(n, rng, 3.0f), up = randn(n, rng), dout = randn(n, rng);
      auto d_gate = put(be, gate), d_up = put(be, up), d_dout = put(be, dout);
      auto out = filled(be, n, kNaN), dgate = filled(be, n, kNaN), dup = filled(be, n, kNaN);
      be.swiglu_forward(out.data(), d_gate.data(), d_up.data(), n);
      be.swiglu_backward(dgate.data(), dup.data(), d_dout.data(), d_gate.data(), d_up.data(), n);
      return {out.download(), dgate.download(), dup.download()};
    };
    compare(run, cuda(), kFp32Rel, {"swiglu forward", "swiglu dgate", "swiglu dup"},
            shape_tag({{"n", n}}));
    seed++;
  }
}

// ---------------------------------------------------------------------------------------------
// residual stream and biases: single roundings, so bit-identical; column sums to rounding

TEST(CudaElementwise, AccumulateScaleAreExact) {
  uint32_t seed = 70;
  for (int64_t n : {0, 1, 7, 1000, 100003}) {
    auto run = [&](Backend& be) -> Outputs {
      std::mt19937 rng(seed);
      const Vec a = randn(n, rng), b = randn(n, rng), y = randn(n, rng);
      auto da = put(be, a), db = put(be, b), dy = put(be, y);
      be.accumulate(dy.data(), da.data(), n);
      be.scale(db.data(), 0.37f, n);
      return {dy.download(), db.download()};
    };
    const Outputs want = run(cpu()), got = run(cuda());
    const std::string tag = shape_tag({{"n", n}});
    expect_bits_equal(got[0], want[0], "accumulate" + tag);
    expect_bits_equal(got[1], want[1], "scale" + tag);
    seed++;
  }
}

TEST(CudaElementwise, BiasForwardExactBackwardMatches) {
  uint32_t seed = 80;
  for (int64_t N : {1, 7, 1000, 4099})
    for (int64_t C : {1, 3, 768, 1001}) {
      auto run = [&](Backend& be) -> Outputs {
        std::mt19937 rng(seed);
        const Vec x = randn(N * C, rng), bias = randn(C, rng), prior = randn(C, rng);
        auto dx = put(be, x), dbias_in = put(be, bias), dbias = put(be, prior);
        be.add_bias(dx.data(), dbias_in.data(), N, C);
        be.bias_backward(dbias.data(), dx.data(), N, C);
        return {dx.download(), dbias.download()};
      };
      expect_exact_forward_close_backward(run, "add_bias", "bias_backward",
                                          shape_tag({{"N", N}, {"C", C}}));
      seed++;
    }
}

// ---------------------------------------------------------------------------------------------
// embeddings: tokens outside [vocab_start, vocab_start + V_local) look up 0 and get no gradient

TEST(CudaEmbedding, TokenEmbeddingWithTokensOutsideTheShard) {
  uint32_t seed = 90;
  struct Case {
    int64_t N, C, vocab_start, V_local;
  };
  for (const Case& c : {Case{1, 8, 0, 100}, Case{37, 96, 64, 64}, Case{1000, 768, 0, 64},
                        Case{513, 16, 128, 320}}) {
    auto run = [&](Backend& be) -> Outputs {
      std::mt19937 rng(seed);
      const Vec wte = randn(c.V_local * c.C, rng), dout = randn(c.N * c.C, rng);
      const Vec prior = randn(c.V_local * c.C, rng);
      // Below, inside and above this shard's rows; many repeats.
      const Tokens tokens =
          random_tokens(c.N, 0, static_cast<int32_t>(c.vocab_start + c.V_local + 40), rng);
      auto dwte_in = put(be, wte), d_dout = put(be, dout);
      auto dtok = put(be, tokens);
      auto out = filled(be, c.N * c.C, kNaN), dwte = put(be, prior);
      be.embedding_forward(out.data(), dtok.data(), dwte_in.data(), c.N, c.C, c.vocab_start,
                           c.V_local);
      be.embedding_backward(dwte.data(), d_dout.data(), dtok.data(), c.N, c.C, c.vocab_start,
                            c.V_local);
      return {out.download(), dwte.download()};
    };
    expect_exact_forward_close_backward(
        run, "embedding_forward", "embedding_backward",
        shape_tag({{"N", c.N}, {"C", c.C}, {"start", c.vocab_start}, {"V_local", c.V_local}}));
    seed++;
  }
}

TEST(CudaEmbedding, PositionEmbedding) {
  uint32_t seed = 100;
  for (int64_t B : {1, 3})
    for (int64_t T : {1, 17, 70})
      for (int64_t C : {8, 96}) {
        auto run = [&](Backend& be) -> Outputs {
          std::mt19937 rng(seed);
          const Vec x = randn(B * T * C, rng), wpe = randn(T * C, rng), prior = randn(T * C, rng);
          auto dx = put(be, x), dwpe_in = put(be, wpe), dwpe = put(be, prior);
          be.position_embedding_forward(dx.data(), dwpe_in.data(), B, T, C);
          be.position_embedding_backward(dwpe.data(), dx.data(), B, T, C);
          return {dx.download(), dwpe.download()};
        };
        expect_exact_forward_close_backward(run, "position_embedding_forward",
                                            "position_embedding_backward",
                                            shape_tag({{"B", B}, {"T", T}, {"C", C}}));
        seed++;
      }
}

// ---------------------------------------------------------------------------------------------
// vocabulary-parallel cross-entropy: each step fed the CPU's inputs, so each is compared alone

TEST(CudaCrossEntropy, EveryStepWithPaddingAndNonLocalTargets) {
  uint32_t seed = 110;
  struct Case {
    int64_t N, V_local, V_valid, vocab_start;
  };
  for (const Case& c : {Case{1, 64, 64, 0}, Case{7, 64, 50, 0}, Case{33, 128, 100, 64},
                        Case{64, 1000, 999, 0}, Case{5, 64, 0, 128}, Case{129, 384, 257, 384}}) {
    std::mt19937 rng(seed);
    const Vec logits = randn(c.N * c.V_local, rng, 3.0f);
    // Targets: real vocabulary only (never a padding row), local or on another shard.
    Tokens targets(c.N);
    for (auto& t : targets) {
      std::vector<int> where = {0};               // above this shard
      if (c.vocab_start > 0) where.push_back(1);  // below it
      if (c.V_valid > 0) where.push_back(2);      // one of its real rows
      const auto r = static_cast<int64_t>(rng() % 100000);
      switch (where[rng() % where.size()]) {
        case 0:
          t = static_cast<int32_t>(c.vocab_start + c.V_local + r % 50);
          break;
        case 1:
          t = static_cast<int32_t>(r % c.vocab_start);
          break;
        default:
          t = static_cast<int32_t>(c.vocab_start + r % c.V_valid);
          break;
      }
    }
    // What the tp all-reduces would bring (a rank with only padding sees others' statistics).
    Vec gmax_other(c.N, 1.5f);
    const std::string tag = shape_tag(
        {{"N", c.N}, {"V_local", c.V_local}, {"V_valid", c.V_valid}, {"start", c.vocab_start}});
    auto stats = [&](Backend& be, const Vec& row_max_in) -> Outputs {
      auto dl = put(be, logits);
      auto dt = put(be, targets);
      auto mx = filled(be, c.N, kNaN), se = filled(be, c.N, kNaN), tl = filled(be, c.N, kNaN);
      be.xent_row_max(mx.data(), dl.data(), c.N, c.V_local, c.V_valid);
      auto gmax = put(be, row_max_in);
      be.xent_row_sumexp(se.data(), dl.data(), gmax.data(), c.N, c.V_local, c.V_valid);
      be.xent_target_logit(tl.data(), dl.data(), dt.data(), c.N, c.V_local, c.vocab_start);
      return {mx.download(), se.download(), tl.download()};
    };
    // Row max of the local columns, then the global max (this shard's against the others').
    const Vec cpu_max = stats(cpu(), Vec(c.N, 0.0f))[0];
    Vec gmax(c.N);
    for (int64_t n = 0; n < c.N; n++) gmax[n] = std::max(cpu_max[n], gmax_other[n]);
    const Outputs want = stats(cpu(), gmax), got = stats(cuda(), gmax);
    expect_bits_equal(got[0], want[0], "xent_row_max" + tag);
    if (c.V_valid == 0) {
      for (float m : got[0]) EXPECT_EQ(m, -kInf) << "row max of a padding-only shard" << tag;
    }
    expect_match(got[1], want[1], kFp32Rel, "xent_row_sumexp" + tag);
    expect_bits_equal(got[2], want[2], "xent_target_logit" + tag);

    // Loss and backward from the CPU's statistics (a positive sum: the other shards' share).
    Vec gsum = want[1];
    for (auto& s : gsum) s += 0.25f;
    auto finish = [&](Backend& be) -> Outputs {
      auto dl = put(be, logits), mx = put(be, gmax), se = put(be, gsum);
      auto dt = put(be, targets);
      auto tl = put(be, want[2]), losses = filled(be, c.N, kNaN);
      be.xent_loss(losses.data(), mx.data(), se.data(), tl.data(), c.N);
      be.xent_backward(dl.data(), mx.data(), se.data(), dt.data(), c.N, c.V_local, c.V_valid,
                       c.vocab_start, 0.37f);
      return {losses.download(), dl.download()};
    };
    const Outputs want2 = finish(cpu()), got2 = finish(cuda());
    expect_match(got2[0], want2[0], kFp32Rel, "xent_loss" + tag);
    expect_match(got2[1], want2[1], kFp32Rel, "xent_backward" + tag);
    for (int64_t n = 0; n < c.N; n++)
      for (int64_t j = c.V_valid; j < c.V_local; j++)
        ASSERT_EQ(got2[1][n * c.V_local + j], 0.0f) << "padding column " << j << tag;
    seed++;
  }
}

// ---------------------------------------------------------------------------------------------
// reductions

TEST(CudaReductions, SumAndSumSquaresMatchCpu) {
  uint32_t seed = 120;
  EXPECT_EQ(cuda().sum(nullptr, 0), 0.0);
  EXPECT_EQ(cuda().sum_squares(nullptr, 0), 0.0);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{255}, int64_t{257}, int64_t{100003},
                    (int64_t{1} << 24) + 3}) {
    std::mt19937 rng(seed++);
    const Vec x = randn(n, rng, 1.0f, 0.1f);
    double abs_sum = 0.0, sq = 0.0;
    for (float v : x) abs_sum += std::abs(v), sq += static_cast<double>(v) * v;
    auto dc = put(cpu(), x), dg = put(cuda(), x);
    const double want = cpu().sum(dc.data(), n), want_sq = cpu().sum_squares(dc.data(), n);
    const double got = cuda().sum(dg.data(), n), got_sq = cuda().sum_squares(dg.data(), n);
    if (n == 1) {
      EXPECT_EQ(got, want);
      EXPECT_EQ(got_sq, want_sq);
    }
    // Both accumulate in double: only the order differs.
    EXPECT_NEAR(got, want, 1e-10 * abs_sum) << "sum n=" << n;
    EXPECT_NEAR(got_sq, want_sq, 1e-10 * sq) << "sum_squares n=" << n;
  }
}

// ---------------------------------------------------------------------------------------------
// optimizers: several runs, with and without decay, in one call; elements outside runs untouched

const std::vector<ParameterRun> kRuns = {{0, 1000, true},
                                         {1000, 3, false},
                                         {1003, 0, true},
                                         {1003, 4000, true},
                                         {5003, 1000, false},
                                         /* gap [6003, 6103) */ {6103, 3904, true}};
constexpr int64_t kFlat = 10007;

TEST(CudaOptimizers, AdamWRunsMatchCpuOverSeveralSteps) {
  auto run = [&](Backend& be) -> Outputs {
    std::mt19937 rng(130);
    auto p = put(be, randn(kFlat, rng)), m = filled(be, kFlat, 0.0f), v = filled(be, kFlat, 0.0f);
    for (int t = 1; t <= 4; t++) {
      auto g = put(be, randn(kFlat, rng, t == 3 ? 1e-3f : 1.0f));
      const double lr = 3e-3 * t;
      const AdamWStep decayed = make_adamw_step(lr, 0.9, 0.95, 1e-8, 0.1, t);
      const AdamWStep undecayed = make_adamw_step(lr, 0.9, 0.95, 1e-8, 0.0, t);
      be.adamw_update(p.data(), g.data(), m.data(), v.data(), kRuns, decayed, undecayed);
    }
    // No runs: nothing changes.
    auto g = put(be, randn(kFlat, rng));
    be.adamw_update(p.data(), g.data(), m.data(), v.data(), std::span<const ParameterRun>(),
                    make_adamw_step(1.0, 0.9, 0.95, 1e-8, 0.1, 5),
                    make_adamw_step(1.0, 0.9, 0.95, 1e-8, 0.0, 5));
    return {p.download(), m.download(), v.download()};
  };
  const Outputs want = run(cpu()), got = run(cuda());
  const char* names[] = {"adamw param", "adamw exp_avg", "adamw exp_avg_sq"};
  for (size_t k = 0; k < 3; k++) expect_match(got[k], want[k], kFp32Rel, names[k]);
  // The gap between runs keeps its initial values and zero moments on the GPU too.
  std::mt19937 rng(130);
  const Vec initial = randn(kFlat, rng);
  for (int64_t i = 6003; i < 6103; i++) {
    ASSERT_EQ(got[0][i], initial[i]) << "adamw changed element " << i << " outside every run";
    ASSERT_EQ(got[1][i], 0.0f);
    ASSERT_EQ(got[2][i], 0.0f);
  }
  // And the bf16 backend updates in fp32, identically to the fp32 backend.
  const Outputs bf16 = run(cuda_bf16());
  for (size_t k = 0; k < 3; k++) expect_bits_equal(bf16[k], got[k], "adamw on the bf16 backend");
}

TEST(CudaOptimizers, SgdRunsMatchCpuWithAndWithoutMomentum) {
  for (float momentum : {0.9f, 0.0f}) {
    auto run = [&](Backend& be) -> Outputs {
      std::mt19937 rng(140);
      auto p = put(be, randn(kFlat, rng)), buf = filled(be, kFlat, 0.0f);
      float* b = momentum != 0.0f ? buf.data() : nullptr;
      for (int t = 0; t < 3; t++) {
        auto g = put(be, randn(kFlat, rng));
        const float lr = 0.05f * (t + 1);
        be.sgd_update(p.data(), g.data(), b, kRuns, SgdStep{lr, momentum, 0.01f, t == 0},
                      SgdStep{lr, momentum, 0.0f, t == 0});
      }
      return {p.download(), buf.download()};
    };
    compare(run, cuda(), kFp32Rel, {"sgd param", "sgd momentum_buffer"},
            " momentum=" + std::to_string(momentum));
  }
}

// ---------------------------------------------------------------------------------------------
// bf16 backend: everything but the matrix products and attention stays fp32

TEST(CudaBf16Backend, NonMatmulKernelsAreTheFp32Ones) {
  auto run = [&](Backend& be) -> Outputs {
    std::mt19937 rng(150);
    const int64_t N = 77, C = 768;
    auto x = put(be, randn(N * C, rng)), w = put(be, randn(C, rng)), b = put(be, randn(C, rng));
    auto out = filled(be, N * C, kNaN), mean = filled(be, N, kNaN), rstd = filled(be, N, kNaN);
    be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    auto gelu = filled(be, N * C, kNaN);
    be.gelu_forward(gelu.data(), x.data(), N * C);
    auto db = filled(be, C, 0.0f);
    be.bias_backward(db.data(), x.data(), N, C);
    return {out.download(), mean.download(), rstd.download(), gelu.download(), db.download()};
  };
  const Outputs fp32 = run(cuda()), bf16 = run(cuda_bf16());
  for (size_t k = 0; k < fp32.size(); k++)
    expect_bits_equal(bf16[k], fp32[k], "bf16 backend output " + std::to_string(k));
}

// ---------------------------------------------------------------------------------------------
// determinism: the same call twice gives the same bits (own kernels always; cuBLASLt in the
// deterministic mode)

void expect_repeatable(Backend& be, const std::function<Vec(Backend&)>& f,
                       const std::string& what) {
  const Vec a = f(be), b = f(be);
  expect_bits_equal(b, a, what + " on " + be.name() + " run twice");
}

Vec embedding_backward_repeated(Backend& be) {
  std::mt19937 rng(160);
  const int64_t N = 8192, C = 768, V = 64;
  const Tokens tokens = random_tokens(N, 0, 7, rng);  // heavy repeats: 7 distinct rows
  auto dout = put(be, randn(N * C, rng)), dwte = filled(be, V * C, 0.0f);
  auto dt = put(be, tokens);
  be.embedding_backward(dwte.data(), dout.data(), dt.data(), N, C, 0, V);
  auto dwpe = filled(be, 1024 * C, 0.0f);
  be.position_embedding_backward(dwpe.data(), dout.data(), 8, 1024, C);
  Vec r = dwte.download(), p = dwpe.download();
  r.insert(r.end(), p.begin(), p.end());
  return r;
}

Vec attention_backward_once(Backend& be) {
  return attention_all(be, AttShape{2, 257, 4, 64, 1.0f}, 170)[1];
}

// dk and dv summed over groups of 4 query heads.
Vec gqa_attention_backward_once(Backend& be) {
  const Outputs o = gqa_attention_all(be, GqaShape{2, 257, 8, 2, 64}, 175);
  Vec r = o[1];
  for (size_t i = 2; i < o.size(); i++) r.insert(r.end(), o[i].begin(), o[i].end());
  return r;
}

Vec rmsnorm_weight_grad(Backend& be) {
  return rmsnorm_all(be, 16387, 768, 185)[3];
}

Vec column_sums(Backend& be) {
  std::mt19937 rng(180);
  const int64_t N = 16384 + 3, C = 768;
  auto x = put(be, randn(N * C, rng)), db = filled(be, C, 0.0f);
  be.bias_backward(db.data(), x.data(), N, C);
  auto mean = filled(be, N, 0.0f), rstd = filled(be, N, 0.0f), out = filled(be, N * C, 0.0f);
  auto w = put(be, randn(C, rng)), b = put(be, randn(C, rng));
  be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
  auto lw = filled(be, C, 0.0f), lb = filled(be, C, 0.0f);
  be.layernorm_backward_weight(lw.data(), lb.data(), out.data(), x.data(), mean.data(), rstd.data(),
                               N, C);
  Vec r = db.download(), a = lw.download(), c = lb.download();
  r.insert(r.end(), a.begin(), a.end());
  r.insert(r.end(), c.begin(), c.end());
  return r;
}

Vec sums(Backend& be) {
  std::mt19937 rng(190);
  const int64_t n = (int64_t{1} << 22) + 3;
  auto x = put(be, randn(n, rng));
  const double s = be.sum(x.data(), n), s2 = be.sum_squares(x.data(), n);
  Vec r(4);
  std::memcpy(r.data(), &s, sizeof s);
  std::memcpy(r.data() + 2, &s2, sizeof s2);
  return r;
}

// Long reductions over N (dweight = dout^T . inp): where split-K would change the sum order.
Vec matmul_weight_grads(Backend& be) {
  std::mt19937 rng(200);
  Vec r;
  for (const MatShape& s : {MatShape{16384, 64, 64}, MatShape{4096, 768, 2304}}) {
    auto inp = put(be, randn(s.N * s.IC, rng)), dout = put(be, randn(s.N * s.OC, rng));
    auto w = put(be, randn(s.OC * s.IC, rng));
    auto dw = filled(be, s.OC * s.IC, 0.0f), db = filled(be, s.OC, 0.0f);
    be.matmul_backward_weight(dw.data(), db.data(), dout.data(), inp.data(), s.N, s.IC, s.OC);
    auto out = filled(be, s.N * s.OC, 0.0f), dinp = filled(be, s.N * s.IC, 0.0f);
    be.matmul_forward(out.data(), inp.data(), w.data(), nullptr, s.N, s.IC, s.OC);
    be.matmul_backward_input(dinp.data(), dout.data(), w.data(), s.N, s.IC, s.OC, false);
    for (const auto* a : {&dw, &db, &out, &dinp}) {
      const Vec v = a->download();
      r.insert(r.end(), v.begin(), v.end());
    }
  }
  return r;
}

TEST(CudaDeterminism, OwnKernelsRepeatBitForBit) {
  for (Backend* be : {&cuda(), &cuda(Precision::kBf16, true)}) {
    expect_repeatable(*be, embedding_backward_repeated, "embedding and position backward");
    expect_repeatable(*be, attention_backward_once, "attention_backward");
    expect_repeatable(*be, gqa_attention_backward_once, "grouped-query attention_backward");
    expect_repeatable(*be, rmsnorm_weight_grad, "rmsnorm_backward_weight");
    expect_repeatable(*be, column_sums, "bias_backward and layernorm_backward_weight");
    expect_repeatable(*be, sums, "sum and sum_squares");
  }
}

TEST(CudaDeterminism, DeterministicModeMatmulsRepeatBitForBit) {
  expect_repeatable(cuda(Precision::kFp32, true), matmul_weight_grads, "fp32 matmuls");
  expect_repeatable(cuda(Precision::kBf16, true), matmul_weight_grads, "bf16 matmuls");
}

TEST(CudaDeterminism, DeterministicModeIsStillAccurate) {
  const MatShape s{257, 768, 96};
  const Outputs want = matmul_all(cpu(), s, 210),
                got = matmul_all(cuda(Precision::kFp32, true), s, 210);
  for (size_t i = 0; i < want.size(); i++)
    expect_match(got[i], want[i], kFp32Rel, "deterministic " + kMatmulOutputs[i]);
}

}  // namespace
}  // namespace gpt
