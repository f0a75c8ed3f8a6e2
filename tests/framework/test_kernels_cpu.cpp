// Unit tests of the CPU backend's kernels: each against a naive double-precision reference written
// here, each backward against central finite differences of that reference, the vocabulary-
// parallel cross-entropy split over two simulated tp ranks, the optimizer updates against
// torch.optim semantics, and determinism (repeat calls and thread counts give identical bits).
#include <gtest/gtest.h>

#include "framework/check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "framework/bf16.h"
#include "framework/cpu/cpu_backend.h"
#include "framework/device_array.h"
#include "tests/shuffled_rows.h"

namespace {

using gpt::cpu::CpuBackend;
using Vec = std::vector<float>;
using DVec = std::vector<double>;

// ---------------------------------------------------------------------------------------------
// helpers

Vec randn(size_t n, std::mt19937& rng, float stddev = 1.0f, float mean = 0.0f) {
  std::normal_distribution<float> dist(mean, stddev);
  Vec v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

DVec to_double(const Vec& v) {
  return DVec(v.begin(), v.end());
}

double max_abs(const DVec& v) {
  double m = 0.0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

// |got - want| <= rtol * |want| + atol * max|want|: relative where the value is large, scaled to
// the tensor where a cancellation makes it small.
// `floor` bounds the scale from below where the exact values vanish (C = 1 LayerNorm).
void expect_close(const Vec& got, const DVec& want, double rtol, double atol,
                  const std::string& what, double floor = 1e-30) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double scale = std::max(max_abs(want), floor);
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); i++) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= rtol * std::abs(want[i]) + atol * scale)) {
      if (bad < 5)
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << " want " << want[i] << " (err "
                      << err << ", scale " << scale << ")";
      bad++;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off";
}

void expect_bits_equal(const Vec& a, const Vec& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), sizeof(float) * a.size()), 0)
      << what << " differs between runs";
}

// Central differences of f at x, for the indices listed (all when empty), in double.
DVec finite_diff(const std::function<double(const DVec&)>& f, DVec x, double h,
                 const std::vector<size_t>& indices) {
  DVec g(x.size(), 0.0);
  auto one = [&](size_t i) {
    const double xi = x[i];
    x[i] = xi + h;
    const double fp = f(x);
    x[i] = xi - h;
    const double fm = f(x);
    x[i] = xi;
    g[i] = (fp - fm) / (2.0 * h);
  };
  if (indices.empty())
    for (size_t i = 0; i < x.size(); i++) one(i);
  else
    for (size_t i : indices) one(i);
  return g;
}

// A few indices of a tensor of n elements: always the first and last, plus random ones.
std::vector<size_t> sample_indices(size_t n, size_t count, std::mt19937& rng) {
  if (n <= count) {
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; i++) all[i] = i;
    return all;
  }
  std::vector<size_t> idx = {0, n - 1};
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  while (idx.size() < count) idx.push_back(pick(rng));
  return idx;
}

// Compares a kernel gradient with finite differences at the sampled indices only.
void expect_grad_matches(const Vec& got, const DVec& fd, const std::vector<size_t>& idx, double tol,
                         const std::string& what) {
  double scale = 1e-30;
  for (size_t i : idx) scale = std::max(scale, std::abs(fd[i]));
  int bad = 0;
  for (size_t i : idx) {
    const double err = std::abs(static_cast<double>(got[i]) - fd[i]);
    if (!(err <= tol * (std::abs(fd[i]) + scale))) {
      if (bad < 5)
        ADD_FAILURE() << what << "[" << i << "]: kernel " << got[i] << " finite difference "
                      << fd[i];
      bad++;
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

double dot(const DVec& a, const DVec& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); i++) s += a[i] * b[i];
  return s;
}

// ---------------------------------------------------------------------------------------------
// double-precision references

// out (N,OC) = inp (N,IC) . W^T + bias
DVec ref_matmul(const DVec& inp, const DVec& w, const DVec* bias, int64_t N, int64_t IC,
                int64_t OC) {
  DVec out(N * OC);
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < OC; o++) {
      double s = bias ? (*bias)[o] : 0.0;
      for (int64_t i = 0; i < IC; i++) s += inp[n * IC + i] * w[o * IC + i];
      out[n * OC + o] = s;
    }
  return out;
}

struct LnRef {
  DVec out, mean, rstd;
};

LnRef ref_layernorm(const DVec& x, const DVec& w, const DVec& b, int64_t N, int64_t C) {
  LnRef r{DVec(N * C), DVec(N), DVec(N)};
  for (int64_t n = 0; n < N; n++) {
    double m = 0.0;
    for (int64_t c = 0; c < C; c++) m += x[n * C + c];
    m /= C;
    double v = 0.0;
    for (int64_t c = 0; c < C; c++) v += (x[n * C + c] - m) * (x[n * C + c] - m);
    v /= C;
    const double rs = 1.0 / std::sqrt(v + 1e-5);
    for (int64_t c = 0; c < C; c++) r.out[n * C + c] = (x[n * C + c] - m) * rs * w[c] + b[c];
    r.mean[n] = m;
    r.rstd[n] = rs;
  }
  return r;
}

double ref_gelu(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

struct AttRef {
  DVec out, att;
};

AttRef ref_attention(const DVec& qkv, int64_t B, int64_t T, int64_t NH, int64_t HS) {
  const int64_t C = NH * HS;
  AttRef r{DVec(B * T * C, 0.0), DVec(B * NH * T * T, 0.0)};
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < T; t++) {
        const double* q = &qkv[(b * T + t) * 3 * C + h * HS];
        double* a = &r.att[((b * NH + h) * T + t) * T];
        double m = -1e300;
        for (int64_t j = 0; j <= t; j++) {
          const double* k = &qkv[(b * T + j) * 3 * C + C + h * HS];
          double s = 0.0;
          for (int64_t d = 0; d < HS; d++) s += q[d] * k[d];
          a[j] = s * scale;
          m = std::max(m, a[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= t; j++) sum += (a[j] = std::exp(a[j] - m));
        for (int64_t j = 0; j <= t; j++) a[j] /= sum;
        double* o = &r.out[(b * T + t) * C + h * HS];
        for (int64_t j = 0; j <= t; j++) {
          const double* v = &qkv[(b * T + j) * 3 * C + 2 * C + h * HS];
          for (int64_t d = 0; d < HS; d++) o[d] += a[j] * v[d];
        }
      }
  return r;
}

// Analytic gradient of sum(out * dout) with respect to qkv.
DVec ref_attention_backward(const DVec& dout, const DVec& qkv, int64_t B, int64_t T, int64_t NH,
                            int64_t HS) {
  const int64_t C = NH * HS;
  const AttRef f = ref_attention(qkv, B, T, NH, HS);
  DVec dqkv(qkv.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < NH; h++)
      for (int64_t t = 0; t < T; t++) {
        const double* a = &f.att[((b * NH + h) * T + t) * T];
        const double* dO = &dout[(b * T + t) * C + h * HS];
        DVec da(t + 1);
        for (int64_t j = 0; j <= t; j++) {
          const int64_t vj = (b * T + j) * 3 * C + 2 * C + h * HS;
          double s = 0.0;
          for (int64_t d = 0; d < HS; d++) {
            s += dO[d] * qkv[vj + d];
            dqkv[vj + d] += a[j] * dO[d];
          }
          da[j] = s;
        }
        double inner = 0.0;
        for (int64_t j = 0; j <= t; j++) inner += a[j] * da[j];
        const int64_t qi = (b * T + t) * 3 * C + h * HS;
        for (int64_t j = 0; j <= t; j++) {
          const double ds = a[j] * (da[j] - inner) * scale;
          const int64_t kj = (b * T + j) * 3 * C + C + h * HS;
          for (int64_t d = 0; d < HS; d++) {
            dqkv[qi + d] += ds * qkv[kj + d];
            dqkv[kj + d] += ds * qkv[qi + d];
          }
        }
      }
  return dqkv;
}

// Per-row cross-entropy over the first V_valid of V_stride columns.
DVec ref_xent_losses(const DVec& logits, const std::vector<int32_t>& targets, int64_t N,
                     int64_t V_stride, int64_t V_valid) {
  DVec losses(N);
  for (int64_t n = 0; n < N; n++) {
    const double* row = &logits[n * V_stride];
    double m = -1e300;
    for (int64_t j = 0; j < V_valid; j++) m = std::max(m, row[j]);
    double s = 0.0;
    for (int64_t j = 0; j < V_valid; j++) s += std::exp(row[j] - m);
    losses[n] = std::log(s) + m - row[targets[n]];
  }
  return losses;
}

// ---------------------------------------------------------------------------------------------
// memory

TEST(CpuBackendMemory, AllocateIsZeroedAndAligned) {
  CpuBackend be(1);
  EXPECT_EQ(be.kind(), gpt::DeviceKind::kCpu);
  EXPECT_NE(be.name().find("cpu"), std::string::npos);
  EXPECT_EQ(be.threads(), 1);
  EXPECT_EQ(be.allocate(0, gpt::MemoryCategory::kWorkspace), nullptr);  // zero bytes take nothing
  for (size_t bytes : {size_t{1}, size_t{3}, size_t{64}, size_t{1000}, size_t{1 << 20}}) {
    void* p = be.allocate(bytes, gpt::MemoryCategory::kWorkspace);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    const auto* c = static_cast<const unsigned char*>(p);
    EXPECT_TRUE(std::all_of(c, c + bytes, [](unsigned char b) { return b == 0; })) << bytes;
    be.deallocate(p);
  }
}

TEST(CpuBackendMemory, LedgerCountsReservedBytesByCategory) {
  CpuBackend be(1);
  using gpt::MemoryCategory;
  void* w = be.allocate(100, MemoryCategory::kWeights);     // 128 reserved: two cache lines
  void* a = be.allocate(64, MemoryCategory::kActivations);  // exactly one
  EXPECT_EQ(be.memory().live()[MemoryCategory::kWeights], 128);
  EXPECT_EQ(be.memory().live()[MemoryCategory::kActivations], 64);
  EXPECT_EQ(be.memory().live().total(), 192);
  be.deallocate(w);
  void* g = be.allocate(10, MemoryCategory::kGrads);
  EXPECT_EQ(be.memory().live().total(), 128);
  EXPECT_EQ(be.memory().peak()[MemoryCategory::kWeights], 128);  // each category's own peak
  EXPECT_EQ(be.memory().peak_total(), 192);                      // the sum's peak
  be.deallocate(a);
  be.deallocate(g);
  EXPECT_EQ(be.memory().live().total(), 0);
  EXPECT_THROW(be.deallocate(a), gpt::Error);  // released twice
}

TEST(CpuBackendMemory, CopiesAndFill) {
  CpuBackend be(2);
  std::mt19937 rng(1);
  Vec host = randn(1001, rng);
  gpt::DeviceArray<float> a(be, 1001, gpt::MemoryCategory::kWorkspace),
      b(be, 1001, gpt::MemoryCategory::kWorkspace);
  a.upload(host);
  be.copy(b.data(), a.data(), sizeof(float) * 1001);
  expect_bits_equal(b.download(), host, "copy");
  Vec back(1001);
  be.copy_to_host(back.data(), b.data(), sizeof(float) * 1001);
  expect_bits_equal(back, host, "copy_to_host");
  be.fill_zero(b.data() + 1, 999);
  Vec z = b.download();
  EXPECT_EQ(z[0], host[0]);
  EXPECT_EQ(z[1000], host[1000]);
  for (int i = 1; i < 1000; i++) ASSERT_EQ(z[i], 0.0f) << i;
}

TEST(CpuBackendMemory, FactoryHonoursThreadCount) {
  auto be = gpt::make_cpu_backend(2);
  EXPECT_EQ(be->kind(), gpt::DeviceKind::kCpu);
  EXPECT_EQ(static_cast<CpuBackend*>(be.get())->threads(), 2);
}

// ---------------------------------------------------------------------------------------------
// matmul

struct MatShape {
  int64_t N, IC, OC;
};
const MatShape kMatShapes[] = {{1, 1, 1}, {1, 7, 5}, {3, 17, 9}, {37, 64, 23}, {64, 100, 130}};

TEST(CpuMatmul, ForwardMatchesReference) {
  CpuBackend be(2);
  std::mt19937 rng(2);
  for (const auto& s : kMatShapes) {
    Vec inp = randn(s.N * s.IC, rng), w = randn(s.OC * s.IC, rng), bias = randn(s.OC, rng);
    Vec out(s.N * s.OC, std::numeric_limits<float>::quiet_NaN());
    be.matmul_forward(out.data(), inp.data(), w.data(), bias.data(), s.N, s.IC, s.OC);
    DVec db = to_double(bias);
    expect_close(out, ref_matmul(to_double(inp), to_double(w), &db, s.N, s.IC, s.OC), 1e-5, 1e-6,
                 "matmul_forward+bias N=" + std::to_string(s.N));
    Vec out2(s.N * s.OC, std::numeric_limits<float>::quiet_NaN());
    be.matmul_forward(out2.data(), inp.data(), w.data(), nullptr, s.N, s.IC, s.OC);
    expect_close(out2, ref_matmul(to_double(inp), to_double(w), nullptr, s.N, s.IC, s.OC), 1e-5,
                 1e-6, "matmul_forward N=" + std::to_string(s.N));
  }
}

TEST(CpuMatmul, BackwardMatchesReferenceAndAccumulates) {
  CpuBackend be(2);
  std::mt19937 rng(3);
  for (const auto& s : kMatShapes) {
    const int64_t N = s.N, IC = s.IC, OC = s.OC;
    Vec inp = randn(N * IC, rng), w = randn(OC * IC, rng), dout = randn(N * OC, rng);
    DVec di = to_double(inp), dw = to_double(w), dd = to_double(dout);
    DVec want_dinp(N * IC, 0.0), want_dw(OC * IC, 0.0), want_db(OC, 0.0);
    for (int64_t n = 0; n < N; n++)
      for (int64_t o = 0; o < OC; o++) {
        want_db[o] += dd[n * OC + o];
        for (int64_t i = 0; i < IC; i++) {
          want_dinp[n * IC + i] += dd[n * OC + o] * dw[o * IC + i];
          want_dw[o * IC + i] += dd[n * OC + o] * di[n * IC + i];
        }
      }
    const std::string tag = " N=" + std::to_string(N) + " IC=" + std::to_string(IC);
    // Written: NaN garbage in dinp must not leak through.
    Vec dinp(N * IC, std::numeric_limits<float>::quiet_NaN());
    be.matmul_backward_input(dinp.data(), dout.data(), w.data(), N, IC, OC, false);
    expect_close(dinp, want_dinp, 1e-5, 1e-6, "dinp" + tag);
    // Accumulated: adds to what is there.
    Vec prior = randn(N * IC, rng);
    Vec dinp_acc = prior;
    be.matmul_backward_input(dinp_acc.data(), dout.data(), w.data(), N, IC, OC, true);
    DVec want_acc = want_dinp;
    for (size_t i = 0; i < want_acc.size(); i++) want_acc[i] += prior[i];
    expect_close(dinp_acc, want_acc, 1e-5, 1e-6, "dinp accumulate" + tag);
    // Weight gradients always accumulate.
    Vec dweight = randn(OC * IC, rng), dbias = randn(OC, rng);
    DVec want_dw_acc = want_dw, want_db_acc = want_db;
    for (int64_t i = 0; i < OC * IC; i++) want_dw_acc[i] += dweight[i];
    for (int64_t o = 0; o < OC; o++) want_db_acc[o] += dbias[o];
    be.matmul_backward_weight(dweight.data(), dbias.data(), dout.data(), inp.data(), N, IC, OC);
    expect_close(dweight, want_dw_acc, 1e-5, 1e-6, "dweight" + tag);
    expect_close(dbias, want_db_acc, 1e-5, 1e-6, "dbias" + tag);
    // A null bias gradient is skipped.
    Vec dweight2(OC * IC, 0.0f);
    be.matmul_backward_weight(dweight2.data(), nullptr, dout.data(), inp.data(), N, IC, OC);
    expect_close(dweight2, want_dw, 1e-5, 1e-6, "dweight no bias" + tag);
  }
}

TEST(CpuMatmul, GradientMatchesFiniteDifferences) {
  CpuBackend be(1);
  std::mt19937 rng(4);
  const int64_t N = 5, IC = 11, OC = 7;
  Vec inp = randn(N * IC, rng), w = randn(OC * IC, rng), bias = randn(OC, rng);
  Vec g = randn(N * OC, rng);  // L = sum(out * g), so dout = g
  const DVec dg = to_double(g);
  Vec dinp(N * IC), dw(OC * IC, 0.0f), db(OC, 0.0f);
  be.matmul_backward_input(dinp.data(), g.data(), w.data(), N, IC, OC, false);
  be.matmul_backward_weight(dw.data(), db.data(), g.data(), inp.data(), N, IC, OC);
  const DVec di = to_double(inp), dwv = to_double(w), dbv = to_double(bias);
  auto loss_inp = [&](const DVec& x) { return dot(ref_matmul(x, dwv, &dbv, N, IC, OC), dg); };
  auto loss_w = [&](const DVec& x) { return dot(ref_matmul(di, x, &dbv, N, IC, OC), dg); };
  auto loss_b = [&](const DVec& x) { return dot(ref_matmul(di, dwv, &x, N, IC, OC), dg); };
  expect_grad_matches(dinp, finite_diff(loss_inp, di, 1e-3, {}), sample_indices(N * IC, 1000, rng),
                      1e-4, "matmul dinp");
  expect_grad_matches(dw, finite_diff(loss_w, dwv, 1e-3, {}), sample_indices(OC * IC, 1000, rng),
                      1e-4, "matmul dweight");
  expect_grad_matches(db, finite_diff(loss_b, dbv, 1e-3, {}), sample_indices(OC, 1000, rng), 1e-4,
                      "matmul dbias");
}

// bf16 precision: each product is, bit for bit, the float32 backend's product of the operands
// rounded to bf16 (to nearest even; float32 products of bf16 values are exact, so only the
// rounding differs from float32), the bias gradient sums the unrounded gradient, and the
// operands themselves are left untouched.
TEST(CpuMatmul, Bf16RoundsBothOperandsOfEachProduct) {
  CpuBackend bf16(2, gpt::Precision::kBf16), fp32(2);
  EXPECT_EQ(bf16.precision(), gpt::Precision::kBf16);
  std::mt19937 rng(5);
  const auto rounded = [](Vec v) {
    for (float& x : v) x = gpt::round_to_bf16(x);
    return v;
  };
  for (const auto& s : kMatShapes) {
    const Vec inp = randn(s.N * s.IC, rng), w = randn(s.OC * s.IC, rng), b = randn(s.OC, rng),
              dout = randn(s.N * s.OC, rng);
    const Vec inp0 = inp, w0 = w, dout0 = dout;
    const std::string at = " N=" + std::to_string(s.N);
    Vec got(s.N * s.OC), want(s.N * s.OC);
    bf16.matmul_forward(got.data(), inp.data(), w.data(), b.data(), s.N, s.IC, s.OC);
    fp32.matmul_forward(want.data(), rounded(inp).data(), rounded(w).data(), b.data(), s.N, s.IC,
                        s.OC);
    EXPECT_EQ(got, want) << "matmul_forward" << at;
    Vec dinp(s.N * s.IC), dinp_want(s.N * s.IC);
    bf16.matmul_backward_input(dinp.data(), dout.data(), w.data(), s.N, s.IC, s.OC, false);
    fp32.matmul_backward_input(dinp_want.data(), rounded(dout).data(), rounded(w).data(), s.N, s.IC,
                               s.OC, false);
    EXPECT_EQ(dinp, dinp_want) << "matmul_backward_input" << at;
    Vec dw(s.OC * s.IC, 0.5f), dw_want = dw, db(s.OC, 0.25f), db_want = db;
    bf16.matmul_backward_weight(dw.data(), db.data(), dout.data(), inp.data(), s.N, s.IC, s.OC);
    fp32.matmul_backward_weight(dw_want.data(), nullptr, rounded(dout).data(), rounded(inp).data(),
                                s.N, s.IC, s.OC);
    fp32.bias_backward(db_want.data(), dout.data(), s.N, s.OC);
    EXPECT_EQ(dw, dw_want) << "matmul_backward_weight" << at;
    EXPECT_EQ(db, db_want) << "matmul_backward_weight's bias" << at;
    EXPECT_EQ(inp, inp0);
    EXPECT_EQ(w, w0);
    EXPECT_EQ(dout, dout0);
  }
  // Round to nearest even, as the GPU's conversion: ties go to the even neighbour.
  EXPECT_EQ(gpt::round_to_bf16(1.00390625f), 1.0f);        // 1 + 2^-8: a tie, down to even
  EXPECT_EQ(gpt::round_to_bf16(1.01171875f), 1.015625f);   // 1 + 3 * 2^-8: a tie, up to even
  EXPECT_EQ(gpt::round_to_bf16(1.00390637f), 1.0078125f);  // just past the tie
  EXPECT_TRUE(std::isnan(gpt::round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
}

// The rows' product of generation and serving: close to matmul_forward (and the double
// reference), and batch invariant: 64 distinct rows give each row's outputs the same bits
// computed alone (from a buffer one float off the others' alignment), among all 64, and among 7
// of them in a shuffled order where the row sits at another index, at 1 and 2 threads. IC off the
// 16 lanes and long enough that a different summation order would show in the last bit.
TEST(CpuMatmulRows, MatchesMatmulForwardAndIsBatchInvariant) {
  std::mt19937 rng(5);
  const MatShape shapes[] = {{64, 1, 1},     {64, 7, 5},    {64, 17, 9},
                             {64, 100, 130}, {64, 768, 96}, {64, 1001, 33}};
  for (const auto& s : shapes)
    for (bool with_bias : {true, false}) {
      const std::string tag = " IC=" + std::to_string(s.IC) + " OC=" + std::to_string(s.OC) +
                              (with_bias ? " bias" : "");
      const int64_t N = s.N, IC = s.IC, OC = s.OC;
      const Vec inp = randn(N * IC, rng), w = randn(OC * IC, rng), bias_v = randn(OC, rng);
      const float* bias = with_bias ? bias_v.data() : nullptr;
      Vec library(N * OC);
      CpuBackend(2).matmul_forward(library.data(), inp.data(), w.data(), bias, N, IC, OC);
      DVec db = to_double(bias_v);
      const DVec ref =
          ref_matmul(to_double(inp), to_double(w), with_bias ? &db : nullptr, N, IC, OC);
      // Seven of the rows, shuffled, so each sits at another index than among the 64.
      const std::vector<int64_t> picked = gpt::shuffled_rows(N, 7, rng);
      const Vec seven = gpt::gather_rows(inp, picked, IC);

      Vec first_all;
      for (int threads : {1, 2}) {
        CpuBackend be(threads);
        const std::string where = tag + " threads=" + std::to_string(threads);
        Vec all(N * OC, std::numeric_limits<float>::quiet_NaN());
        be.matmul_forward_rows(all.data(), inp.data(), w.data(), bias, N, IC, OC);
        expect_close(all, to_double(library), 1e-5, 1e-6, "rows against matmul_forward" + where);
        expect_close(all, ref, 1e-5, 1e-6, "rows against the reference" + where);
        if (threads == 1) first_all = all;
        expect_bits_equal(all, first_all, "64 rows at 1 and 2 threads" + where);

        Vec out7(7 * OC, std::numeric_limits<float>::quiet_NaN());
        be.matmul_forward_rows(out7.data(), seven.data(), w.data(), bias, 7, IC, OC);
        for (int64_t i = 0; i < 7; i++)
          expect_bits_equal(Vec(&out7[i * OC], &out7[(i + 1) * OC]),
                            Vec(&all[picked[i] * OC], &all[(picked[i] + 1) * OC]),
                            "row " + std::to_string(picked[i]) + " at index " + std::to_string(i) +
                                " of 7 and among 64" + where);
        for (int64_t r = 0; r < N; r += 9) {
          Vec alone(IC + 1), one(OC, std::numeric_limits<float>::quiet_NaN());
          std::copy_n(&inp[r * IC], IC, alone.begin() + 1);
          be.matmul_forward_rows(one.data(), alone.data() + 1, w.data(), bias, 1, IC, OC);
          expect_bits_equal(one, Vec(&all[r * OC], &all[(r + 1) * OC]),
                            "row " + std::to_string(r) + " alone and among 64" + where);
        }
      }
    }
}

// ---------------------------------------------------------------------------------------------
// LayerNorm

struct RowShape {
  int64_t N, C;
};
const RowShape kLnShapes[] = {{1, 1}, {1, 8}, {3, 7}, {5, 64}, {2, 129}, {4, 3000}};

TEST(CpuLayerNorm, ForwardMatchesReference) {
  CpuBackend be(2);
  std::mt19937 rng(5);
  for (const auto& s : kLnShapes) {
    // A large common offset: a one-pass float variance would lose everything here.
    Vec x = randn(s.N * s.C, rng, 1.0f, 300.0f), w = randn(s.C, rng), b = randn(s.C, rng);
    Vec out(s.N * s.C), mean(s.N), rstd(s.N);
    be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), s.N,
                         s.C);
    LnRef r = ref_layernorm(to_double(x), to_double(w), to_double(b), s.N, s.C);
    const std::string tag = " N=" + std::to_string(s.N) + " C=" + std::to_string(s.C);
    expect_close(mean, r.mean, 1e-6, 0.0, "ln mean" + tag);
    // xhat = (x - mean) * rstd at an offset of 300 amplifies float rounding of x itself.
    expect_close(rstd, r.rstd, 1e-5, 0.0, "ln rstd" + tag);
    expect_close(out, r.out, 1e-4, 1e-4, "ln out" + tag);
  }
  // Without the offset the output is accurate to float rounding.
  for (const auto& s : kLnShapes) {
    Vec x = randn(s.N * s.C, rng), w = randn(s.C, rng), b = randn(s.C, rng);
    Vec out(s.N * s.C), mean(s.N), rstd(s.N);
    be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), s.N,
                         s.C);
    LnRef r = ref_layernorm(to_double(x), to_double(w), to_double(b), s.N, s.C);
    expect_close(out, r.out, 1e-5, 1e-6, "ln out centred C=" + std::to_string(s.C));
    expect_close(rstd, r.rstd, 1e-6, 0.0, "ln rstd centred C=" + std::to_string(s.C));
  }
}

TEST(CpuLayerNorm, BackwardMatchesReferenceAndFiniteDifferences) {
  CpuBackend be(2);
  std::mt19937 rng(6);
  for (const auto& s : kLnShapes) {
    const int64_t N = s.N, C = s.C;
    Vec x = randn(N * C, rng, 2.0f, 0.5f), w = randn(C, rng), b = randn(C, rng);
    Vec g = randn(N * C, rng);
    Vec out(N * C), mean(N), rstd(N);
    be.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C);
    Vec prior_dinp = randn(N * C, rng), prior_dw = randn(C, rng), prior_db = randn(C, rng);
    Vec dinp = prior_dinp, dw = prior_dw, db = prior_db;
    be.layernorm_backward_input(dinp.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(),
                                N, C);
    be.layernorm_backward_weight(dw.data(), db.data(), g.data(), x.data(), mean.data(), rstd.data(),
                                 N, C);
    // Remove what was there to get the increments (accumulation is part of the contract).
    for (int64_t i = 0; i < N * C; i++) dinp[i] -= prior_dinp[i];
    for (int64_t c = 0; c < C; c++) dw[c] -= prior_dw[c], db[c] -= prior_db[c];

    // Analytic double reference.
    const DVec dx = to_double(x), dwv = to_double(w), dbv = to_double(b), dg = to_double(g);
    LnRef r = ref_layernorm(dx, dwv, dbv, N, C);
    DVec want_dinp(N * C), want_dw(C, 0.0), want_db(C, 0.0);
    for (int64_t n = 0; n < N; n++) {
      double m1 = 0.0, m2 = 0.0;
      for (int64_t c = 0; c < C; c++) {
        const double xhat = (dx[n * C + c] - r.mean[n]) * r.rstd[n];
        m1 += dg[n * C + c] * dwv[c];
        m2 += dg[n * C + c] * dwv[c] * xhat;
        want_dw[c] += dg[n * C + c] * xhat;
        want_db[c] += dg[n * C + c];
      }
      m1 /= C, m2 /= C;
      for (int64_t c = 0; c < C; c++) {
        const double xhat = (dx[n * C + c] - r.mean[n]) * r.rstd[n];
        want_dinp[n * C + c] = r.rstd[n] * (dg[n * C + c] * dwv[c] - m1 - xhat * m2);
      }
    }
    const std::string tag = " N=" + std::to_string(N) + " C=" + std::to_string(C);
    // The increments went through a float add onto O(1) prior values: 1e-7 absolute rounding.
    // With C = 1 the exact gradient is 0 and what remains is rounding amplified by rstd ~ 316.
    expect_close(dinp, want_dinp, 1e-4, 1e-5, "ln dinp" + tag, C == 1 ? 1.0 : 1e-30);
    expect_close(dw, want_dw, 1e-4, 1e-5, "ln dweight" + tag);
    expect_close(db, want_db, 1e-4, 1e-5, "ln dbias" + tag);

    if (C == 1 || N * C > 2000) continue;  // C=1 is flat; finite differences on small shapes
    auto loss_x = [&](const DVec& v) { return dot(ref_layernorm(v, dwv, dbv, N, C).out, dg); };
    auto loss_w = [&](const DVec& v) { return dot(ref_layernorm(dx, v, dbv, N, C).out, dg); };
    auto loss_b = [&](const DVec& v) { return dot(ref_layernorm(dx, dwv, v, N, C).out, dg); };
    auto idx = sample_indices(N * C, 200, rng);
    expect_grad_matches(dinp, finite_diff(loss_x, dx, 1e-4, idx), idx, 1e-3, "ln fd dinp" + tag);
    auto cidx = sample_indices(C, 200, rng);
    expect_grad_matches(dw, finite_diff(loss_w, dwv, 1e-4, cidx), cidx, 1e-3, "ln fd dw" + tag);
    expect_grad_matches(db, finite_diff(loss_b, dbv, 1e-4, cidx), cidx, 1e-3, "ln fd db" + tag);
  }
}

// ---------------------------------------------------------------------------------------------
// GELU

TEST(CpuGelu, ForwardAndBackward) {
  CpuBackend be(2);
  std::mt19937 rng(7);
  for (int64_t n : {1, 7, 8, 1001, 40000}) {
    Vec x = randn(n, rng, 3.0f), g = randn(n, rng);
    Vec out(n), dinp(n, std::numeric_limits<float>::quiet_NaN());
    be.gelu_forward(out.data(), x.data(), n);
    be.gelu_backward(dinp.data(), g.data(), x.data(), n);
    DVec want(n), want_d(n);
    for (int64_t i = 0; i < n; i++) {
      want[i] = ref_gelu(x[i]);
      const double h = 1e-4;
      want_d[i] = g[i] * (ref_gelu(x[i] + h) - ref_gelu(x[i] - h)) / (2 * h);
    }
    expect_close(out, want, 1e-5, 1e-6, "gelu n=" + std::to_string(n));
    expect_close(dinp, want_d, 1e-4, 1e-5, "gelu fd n=" + std::to_string(n));
  }
}

// ---------------------------------------------------------------------------------------------
// attention

struct AttShape {
  int64_t B, T, NH, HS;
};
const AttShape kAttShapes[] = {{1, 1, 1, 1},  {2, 1, 3, 4},   {2, 5, 3, 7},
                               {1, 17, 2, 5}, {2, 70, 2, 12}, {1, 130, 1, 3}};

std::string att_tag(const AttShape& s) {
  return " B=" + std::to_string(s.B) + " T=" + std::to_string(s.T) + " NH=" + std::to_string(s.NH) +
         " HS=" + std::to_string(s.HS);
}

TEST(CpuAttention, ForwardMatchesReferenceWithCausalZeros) {
  for (int threads : {1, 2}) {
    CpuBackend be(threads);
    std::mt19937 rng(8);
    for (const auto& s : kAttShapes) {
      const int64_t C = s.NH * s.HS;
      Vec qkv = randn(s.B * s.T * 3 * C, rng);
      Vec out(s.B * s.T * C, std::numeric_limits<float>::quiet_NaN());
      Vec att(s.B * s.NH * s.T * s.T, std::numeric_limits<float>::quiet_NaN());
      be.attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.NH, s.HS);
      AttRef r = ref_attention(to_double(qkv), s.B, s.T, s.NH, s.HS);
      expect_close(att, r.att, 1e-5, 1e-6, "att" + att_tag(s));
      expect_close(out, r.out, 1e-5, 1e-6, "attention out" + att_tag(s));
      for (int64_t bh = 0; bh < s.B * s.NH; bh++)
        for (int64_t t = 0; t < s.T; t++)
          for (int64_t j = t + 1; j < s.T; j++)
            ASSERT_EQ(att[(bh * s.T + t) * s.T + j], 0.0f) << "above the diagonal" << att_tag(s);
    }
  }
}

TEST(CpuAttention, FutureTokensDoNotContribute) {
  CpuBackend be(1);
  std::mt19937 rng(9);
  const int64_t B = 1, T = 9, NH = 2, HS = 3, C = NH * HS;
  Vec qkv = randn(B * T * 3 * C, rng);
  Vec out(T * C), att(NH * T * T);
  be.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, HS);
  // Changing the last token changes no earlier output.
  Vec qkv2 = qkv;
  for (int64_t i = 0; i < 3 * C; i++) qkv2[(T - 1) * 3 * C + i] += 5.0f;
  Vec out2(T * C), att2(NH * T * T);
  be.attention_forward(out2.data(), att2.data(), qkv2.data(), B, T, NH, HS);
  for (int64_t i = 0; i < (T - 1) * C; i++) ASSERT_EQ(out[i], out2[i]) << i;
  bool last_changed = false;
  for (int64_t i = (T - 1) * C; i < T * C; i++) last_changed |= out[i] != out2[i];
  EXPECT_TRUE(last_changed);
}

TEST(CpuAttention, BackwardMatchesReferenceAndFiniteDifferences) {
  for (int threads : {1, 2}) {
    CpuBackend be(threads);
    std::mt19937 rng(10);
    for (const auto& s : kAttShapes) {
      const int64_t C = s.NH * s.HS;
      Vec qkv = randn(s.B * s.T * 3 * C, rng), g = randn(s.B * s.T * C, rng);
      Vec out(s.B * s.T * C), att(s.B * s.NH * s.T * s.T);
      be.attention_forward(out.data(), att.data(), qkv.data(), s.B, s.T, s.NH, s.HS);
      // Written, not accumulated, and the scratch may start as garbage.
      Vec dqkv(qkv.size(), std::numeric_limits<float>::quiet_NaN());
      Vec datt(att.size(), std::numeric_limits<float>::quiet_NaN());
      be.attention_backward(dqkv.data(), datt.data(), g.data(), out.data(), qkv.data(), att.data(),
                            s.B, s.T, s.NH, s.HS);
      const DVec dq = to_double(qkv), dg = to_double(g);
      expect_close(dqkv, ref_attention_backward(dg, dq, s.B, s.T, s.NH, s.HS), 1e-4, 1e-5,
                   "dqkv" + att_tag(s));
      if (threads != 1 || s.T > 70) continue;
      auto loss = [&](const DVec& v) {
        return dot(ref_attention(v, s.B, s.T, s.NH, s.HS).out, dg);
      };
      auto idx = sample_indices(qkv.size(), 150, rng);
      expect_grad_matches(dqkv, finite_diff(loss, dq, 1e-4, idx), idx, 1e-3,
                          "attention fd" + att_tag(s));
    }
  }
}

// Serving: the B sequences of a forward, every position stored into a paged cache whose blocks are
// scattered over the pool in random order (rows of all sequences interleaved in one store), then
// decoded as rows of different sequences at different positions in shuffled order, each row
// against the full forward's row. Pools start as NaN, and table entries past a sequence's blocks
// name a spare block never stored, so a read of anything not stored shows. Fused GPT-2 rows
// (NKV = NH) and grouped-query rows in separate strided buffers, blocks of 1, 4 and 16 positions.
struct PagedShape {
  int64_t B, T, NH, NKV, HS, pad;  // pad: NKV < NH rows are pad floats longer than their heads
};

void check_paged_decode(CpuBackend& be, const PagedShape& p, int64_t block_tokens,
                        std::mt19937& rng) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const bool fused = p.NKV == p.NH;
  const gpt::AttentionShape s =
      fused ? gpt::fused_qkv_shape(p.B, p.T, p.NH, p.HS)
            : gpt::AttentionShape{
                  p.B, p.T, p.NH, p.NKV, p.HS, p.NH * p.HS + p.pad, p.NKV * p.HS + p.pad};
  const std::string tag = att_tag({p.B, p.T, p.NH, p.HS}) + " NKV=" + std::to_string(p.NKV) +
                          " block_tokens=" + std::to_string(block_tokens);
  const int64_t N = p.B * p.T, C = p.NH * p.HS;
  const Vec q_all = randn(N * s.q_stride, rng);
  const Vec k_sep = fused ? Vec() : randn(N * s.kv_stride, rng);
  const Vec v_sep = fused ? Vec() : randn(N * s.kv_stride, rng);
  const float* q = q_all.data();
  const float* k = fused ? q + C : k_sep.data();
  const float* v = fused ? q + 2 * C : v_sep.data();
  Vec out(N * C), att(be.attention_cache_floats(p.B, p.NH, p.T));
  be.attention_forward(out.data(), att.data(), q, k, v, s);

  // Each sequence's blocks, from a shuffled pool with one spare block at the end of the order.
  const int64_t blocks_per_sequence = (p.T + block_tokens - 1) / block_tokens;
  const int64_t num_blocks = p.B * blocks_per_sequence + 1, max_blocks = blocks_per_sequence + 2;
  std::vector<int32_t> order(num_blocks);
  for (int64_t i = 0; i < num_blocks; i++) order[i] = static_cast<int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  const int32_t spare = order.back();
  auto block_of = [&](int64_t b, int64_t t) {
    return order[b * blocks_per_sequence + t / block_tokens];
  };
  auto slot_of = [&](int64_t b, int64_t t) {
    return static_cast<int32_t>(block_of(b, t) * block_tokens + t % block_tokens);
  };

  // Every (sequence, position) in a shuffled order: the rows of both the store and the decode.
  std::vector<std::pair<int64_t, int64_t>> rows;
  for (int64_t b = 0; b < p.B; b++)
    for (int64_t t = 0; t < p.T; t++) rows.emplace_back(b, t);
  std::shuffle(rows.begin(), rows.end(), rng);
  const int64_t R = N;
  gpt::AttentionShape paged = s;
  paged.B = R;
  paged.T = block_tokens;
  Vec row_q(R * s.q_stride, nan), row_k(R * s.kv_stride, nan), row_v(R * s.kv_stride, nan);
  std::vector<int32_t> slots(R), tables(R * max_blocks, spare), lengths(R);
  for (int64_t r = 0; r < R; r++) {
    const auto [b, t] = rows[r];
    const int64_t n = b * p.T + t;
    std::copy_n(q + n * s.q_stride, C, &row_q[r * s.q_stride]);
    std::copy_n(k + n * s.kv_stride, p.NKV * p.HS, &row_k[r * s.kv_stride]);
    std::copy_n(v + n * s.kv_stride, p.NKV * p.HS, &row_v[r * s.kv_stride]);
    slots[r] = slot_of(b, t);
    for (int64_t i = 0; i < blocks_per_sequence; i++)
      tables[r * max_blocks + i] = order[b * blocks_per_sequence + i];
    lengths[r] = static_cast<int32_t>(t + 1);
  }
  const int64_t pool = num_blocks * p.NKV * block_tokens * p.HS;
  Vec k_pool(pool, nan), v_pool(pool, nan);
  be.paged_kv_store(k_pool.data(), v_pool.data(), row_k.data(), row_v.data(), paged, slots.data());
  // Every key and value where its block and offset say, bit for bit.
  for (int64_t b = 0; b < p.B; b++)
    for (int64_t t = 0; t < p.T; t++)
      for (int64_t g = 0; g < p.NKV; g++) {
        const int64_t at = ((block_of(b, t) * p.NKV + g) * block_tokens + t % block_tokens) * p.HS;
        const int64_t from = (b * p.T + t) * s.kv_stride + g * p.HS;
        ASSERT_EQ(0, std::memcmp(&k_pool[at], k + from, p.HS * sizeof(float))) << "key" << tag;
        ASSERT_EQ(0, std::memcmp(&v_pool[at], v + from, p.HS * sizeof(float))) << "value" << tag;
      }

  Vec got(R * C, nan), scores(be.paged_attention_floats(R, p.NH, max_blocks * block_tokens), nan);
  be.paged_attention_decode(got.data(), scores.data(), row_q.data(), k_pool.data(), v_pool.data(),
                            paged, tables.data(), max_blocks, lengths.data());
  Vec want(R * C);
  for (int64_t r = 0; r < R; r++)
    std::copy_n(&out[(rows[r].first * p.T + rows[r].second) * C], C, &want[r * C]);
  expect_close(got, to_double(want), 1e-5, 1e-6, "paged decode" + tag);
}

TEST(CpuAttention, PagedDecodeMatchesForward) {
  std::vector<PagedShape> shapes;
  for (const auto& a : kAttShapes) shapes.push_back({a.B, a.T, a.NH, a.NH, a.HS, 0});
  shapes.push_back({2, 37, 4, 2, 8, 3});
  shapes.push_back({3, 20, 3, 1, 5, 1});
  shapes.push_back({1, 70, 6, 3, 16, 0});
  for (int threads : {1, 2}) {
    CpuBackend be(threads);
    std::mt19937 rng(12);
    for (const auto& p : shapes)
      for (int64_t block_tokens : {1, 4, 16}) check_paged_decode(be, p, block_tokens, rng);
  }
}

// ---------------------------------------------------------------------------------------------
// residual and bias kernels

TEST(CpuElementwise, AccumulateScaleBias) {
  CpuBackend be(2);
  std::mt19937 rng(11);
  for (int64_t n : {1, 9, 40001}) {
    Vec a = randn(n, rng), b = randn(n, rng);
    Vec y = a;
    be.accumulate(y.data(), b.data(), n);
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(y[i], a[i] + b[i]);
    be.scale(y.data(), 0.25f, n);
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(y[i], (a[i] + b[i]) * 0.25f);
  }
  for (const auto& s : {RowShape{1, 1}, RowShape{3, 70}, RowShape{1000, 130}}) {
    Vec x = randn(s.N * s.C, rng), bias = randn(s.C, rng), out = x;
    be.add_bias(out.data(), bias.data(), s.N, s.C);
    for (int64_t n = 0; n < s.N; n++)
      for (int64_t c = 0; c < s.C; c++) ASSERT_EQ(out[n * s.C + c], x[n * s.C + c] + bias[c]);
    Vec dbias = bias;
    be.bias_backward(dbias.data(), x.data(), s.N, s.C);
    DVec want(s.C);
    for (int64_t c = 0; c < s.C; c++) {
      want[c] = bias[c];
      for (int64_t n = 0; n < s.N; n++) want[c] += x[n * s.C + c];
    }
    expect_close(dbias, want, 1e-6, 1e-7, "bias_backward C=" + std::to_string(s.C));
  }
}

// ---------------------------------------------------------------------------------------------
// embeddings

TEST(CpuEmbedding, TokenForwardBackwardWithVocabularySplit) {
  CpuBackend be(2);
  std::mt19937 rng(12);
  const int64_t V = 37, C = 70, N = 300;
  Vec wte = randn(V * C, rng);
  std::vector<int32_t> tokens(N);
  std::uniform_int_distribution<int32_t> pick(0, V - 1);
  for (auto& t : tokens) t = pick(rng);
  tokens[1] = tokens[0];  // repeated tokens accumulate
  tokens[2] = tokens[0];
  // Two simulated tp ranks: rows [0, 19) and [19, 37); the sum of their outputs is the lookup.
  const int64_t split = 19;
  Vec out0(N * C, std::numeric_limits<float>::quiet_NaN()), out1 = out0;
  be.embedding_forward(out0.data(), tokens.data(), wte.data(), N, C, 0, split);
  be.embedding_forward(out1.data(), tokens.data(), wte.data() + split * C, N, C, split, V - split);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) {
      const bool first = tokens[n] < split;
      ASSERT_EQ(out0[n * C + c], first ? wte[tokens[n] * C + c] : 0.0f);
      ASSERT_EQ(out1[n * C + c], first ? 0.0f : wte[tokens[n] * C + c]);
    }

  Vec dout = randn(N * C, rng);
  Vec prior = randn(V * C, rng);
  Vec dwte = prior;
  be.embedding_backward(dwte.data(), dout.data(), tokens.data(), N, C, 0, split);
  be.embedding_backward(dwte.data() + split * C, dout.data(), tokens.data(), N, C, split,
                        V - split);
  DVec want = to_double(prior);
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++) want[tokens[n] * C + c] += dout[n * C + c];
  expect_close(dwte, want, 1e-5, 1e-6, "embedding_backward");

  // Finite differences of L = sum(lookup * dout) against the table.
  const DVec dd = to_double(dout);
  auto loss = [&](const DVec& table) {
    double s = 0.0;
    for (int64_t n = 0; n < N; n++)
      for (int64_t c = 0; c < C; c++) s += table[tokens[n] * C + c] * dd[n * C + c];
    return s;
  };
  Vec grad(V * C, 0.0f);
  be.embedding_backward(grad.data(), dout.data(), tokens.data(), N, C, 0, V);
  auto idx = sample_indices(V * C, 300, rng);
  expect_grad_matches(grad, finite_diff(loss, to_double(wte), 1e-3, idx), idx, 1e-4,
                      "embedding fd");
}

TEST(CpuEmbedding, PositionForwardBackward) {
  CpuBackend be(2);
  std::mt19937 rng(13);
  const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {4, 33, 130}};
  for (const auto& shape : shapes) {
    const int64_t B = shape[0], T = shape[1], C = shape[2];
    Vec wpe = randn(T * C, rng), x = randn(B * T * C, rng), out = x;
    be.position_embedding_forward(out.data(), wpe.data(), B, T, C);
    for (int64_t b = 0; b < B; b++)
      for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++)
          ASSERT_EQ(out[(b * T + t) * C + c], x[(b * T + t) * C + c] + wpe[t * C + c]);
    Vec prior = randn(T * C, rng), dwpe = prior;
    be.position_embedding_backward(dwpe.data(), x.data(), B, T, C);
    DVec want = to_double(prior);
    for (int64_t b = 0; b < B; b++)
      for (int64_t i = 0; i < T * C; i++) want[i] += x[b * T * C + i];
    expect_close(dwpe, want, 1e-5, 1e-6, "position_embedding_backward");
    // Finite differences of L = sum((x + wpe) * g) with respect to wpe.
    const DVec dg = to_double(x);
    auto loss = [&](const DVec& p) {
      double s = 0.0;
      for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T * C; i++) s += p[i] * dg[b * T * C + i];
      return s;
    };
    Vec grad(T * C, 0.0f);
    be.position_embedding_backward(grad.data(), x.data(), B, T, C);
    auto idx = sample_indices(T * C, 200, rng);
    expect_grad_matches(grad, finite_diff(loss, to_double(wpe), 1e-3, idx), idx, 1e-4,
                        "position embedding fd");
  }
}

// ---------------------------------------------------------------------------------------------
// cross-entropy

// The composed pieces on one rank's block: losses and in-place dlogits.
struct XentResult {
  Vec losses, dlogits;
};

XentResult xent_unsplit(CpuBackend& be, const Vec& logits, const std::vector<int32_t>& targets,
                        int64_t N, int64_t V_local, int64_t V_valid, float loss_scale) {
  Vec mx(N), se(N), tl(N), losses(N), d = logits;
  be.xent_row_max(mx.data(), logits.data(), N, V_local, V_valid);
  be.xent_row_sumexp(se.data(), logits.data(), mx.data(), N, V_local, V_valid);
  be.xent_target_logit(tl.data(), logits.data(), targets.data(), N, V_local, 0);
  be.xent_loss(losses.data(), mx.data(), se.data(), tl.data(), N);
  be.xent_backward(d.data(), mx.data(), se.data(), targets.data(), N, V_local, V_valid, 0,
                   loss_scale);
  return {losses, d};
}

struct XentCase {
  int64_t N, V, V_padded;
};
const XentCase kXentCases[] = {{1, 1, 2}, {3, 5, 8}, {7, 100, 128}, {16, 515, 640}};

Vec xent_logits(const XentCase& c, std::mt19937& rng) {
  Vec logits = randn(c.N * c.V_padded, rng, 3.0f);
  // Huge padding logits: any leak into the max or the sum would show at once.
  for (int64_t n = 0; n < c.N; n++)
    for (int64_t j = c.V; j < c.V_padded; j++) logits[n * c.V_padded + j] = 1e4f;
  return logits;
}

std::vector<int32_t> xent_targets(const XentCase& c, std::mt19937& rng) {
  std::vector<int32_t> t(c.N);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(c.V - 1));
  for (auto& x : t) x = pick(rng);
  if (c.N > 1) t[c.N - 1] = static_cast<int32_t>(c.V - 1);  // the last valid column
  return t;
}

TEST(CpuCrossEntropy, MatchesReferenceWithPadding) {
  CpuBackend be(2);
  std::mt19937 rng(14);
  const float loss_scale = 0.37f;
  for (const auto& c : kXentCases) {
    Vec logits = xent_logits(c, rng);
    auto targets = xent_targets(c, rng);
    XentResult r = xent_unsplit(be, logits, targets, c.N, c.V_padded, c.V, loss_scale);
    const DVec dl = to_double(logits);
    const std::string tag = " N=" + std::to_string(c.N) + " V=" + std::to_string(c.V);
    expect_close(r.losses, ref_xent_losses(dl, targets, c.N, c.V_padded, c.V), 1e-5, 1e-6,
                 "xent loss" + tag);
    // Analytic dlogits.
    DVec want(c.N * c.V_padded, 0.0);
    for (int64_t n = 0; n < c.N; n++) {
      double m = -1e300, s = 0.0;
      for (int64_t j = 0; j < c.V; j++) m = std::max(m, dl[n * c.V_padded + j]);
      for (int64_t j = 0; j < c.V; j++) s += std::exp(dl[n * c.V_padded + j] - m);
      for (int64_t j = 0; j < c.V; j++)
        want[n * c.V_padded + j] =
            loss_scale * (std::exp(dl[n * c.V_padded + j] - m) / s - (j == targets[n] ? 1 : 0));
    }
    expect_close(r.dlogits, want, 1e-5, 1e-6, "xent dlogits" + tag);
    for (int64_t n = 0; n < c.N; n++)
      for (int64_t j = c.V; j < c.V_padded; j++) ASSERT_EQ(r.dlogits[n * c.V_padded + j], 0.0f);
    // Finite differences of loss_scale * sum of losses.
    auto loss = [&](const DVec& v) {
      DVec l = ref_xent_losses(v, targets, c.N, c.V_padded, c.V);
      double s = 0.0;
      for (double x : l) s += x;
      return loss_scale * s;
    };
    auto idx = sample_indices(logits.size(), 300, rng);
    idx.erase(std::remove_if(idx.begin(), idx.end(),
                             [&](size_t i) { return static_cast<int64_t>(i) % c.V_padded >= c.V; }),
              idx.end());
    expect_grad_matches(r.dlogits, finite_diff(loss, dl, 1e-3, idx), idx, 1e-3, "xent fd" + tag);
  }
}

TEST(CpuCrossEntropy, TwoRankVocabularySplitEqualsUnsplit) {
  CpuBackend be(2);
  std::mt19937 rng(15);
  const float loss_scale = 1.0f / 16.0f;
  for (const auto& c : kXentCases) {
    if (c.V_padded % 2 != 0) continue;
    Vec logits = xent_logits(c, rng);
    auto targets = xent_targets(c, rng);
    XentResult whole = xent_unsplit(be, logits, targets, c.N, c.V_padded, c.V, loss_scale);

    // Rank r holds columns [r*Vl, (r+1)*Vl) as its own contiguous (N, Vl) block.
    const int64_t Vl = c.V_padded / 2;
    Vec block[2], mx[2], se[2], tl[2];
    int64_t valid[2];
    for (int r = 0; r < 2; r++) {
      block[r].resize(c.N * Vl);
      for (int64_t n = 0; n < c.N; n++)
        for (int64_t j = 0; j < Vl; j++) block[r][n * Vl + j] = logits[n * c.V_padded + r * Vl + j];
      valid[r] = std::clamp<int64_t>(c.V - r * Vl, 0, Vl);
      mx[r].resize(c.N), se[r].resize(c.N), tl[r].resize(c.N);
      be.xent_row_max(mx[r].data(), block[r].data(), c.N, Vl, valid[r]);
    }
    Vec gmax(c.N), gsum(c.N), gtl(c.N), losses(c.N);
    for (int64_t n = 0; n < c.N; n++) gmax[n] = std::max(mx[0][n], mx[1][n]);  // all-reduce max
    for (int r = 0; r < 2; r++) {
      be.xent_row_sumexp(se[r].data(), block[r].data(), gmax.data(), c.N, Vl, valid[r]);
      be.xent_target_logit(tl[r].data(), block[r].data(), targets.data(), c.N, Vl, r * Vl);
    }
    for (int64_t n = 0; n < c.N; n++) {  // all-reduce sum
      gsum[n] = se[0][n] + se[1][n];
      gtl[n] = tl[0][n] + tl[1][n];
    }
    be.xent_loss(losses.data(), gmax.data(), gsum.data(), gtl.data(), c.N);
    const std::string tag = " N=" + std::to_string(c.N) + " V=" + std::to_string(c.V);
    expect_close(losses, to_double(whole.losses), 1e-6, 1e-7, "split loss" + tag);
    for (int r = 0; r < 2; r++) {
      be.xent_backward(block[r].data(), gmax.data(), gsum.data(), targets.data(), c.N, Vl, valid[r],
                       r * Vl, loss_scale);
      Vec want_block(c.N * Vl);
      for (int64_t n = 0; n < c.N; n++)
        for (int64_t j = 0; j < Vl; j++)
          want_block[n * Vl + j] = whole.dlogits[n * c.V_padded + r * Vl + j];
      expect_close(block[r], to_double(want_block), 1e-6, 1e-7,
                   "split dlogits rank " + std::to_string(r) + tag);
    }
  }
}

TEST(CpuCrossEntropy, RankWithOnlyPadding) {
  CpuBackend be(1);
  const int64_t N = 3, Vl = 4;
  Vec logits(N * Vl, 7.0f), mx(N), se(N, -1.0f), tl(N, -1.0f);
  std::vector<int32_t> targets = {0, 1, 2};  // all on another rank (vocab_start 8)
  be.xent_row_max(mx.data(), logits.data(), N, Vl, 0);
  for (float m : mx) EXPECT_EQ(m, -std::numeric_limits<float>::infinity());
  Vec gmax = {1.0f, 2.0f, 3.0f};  // what the all-reduce brought from the other ranks
  be.xent_row_sumexp(se.data(), logits.data(), gmax.data(), N, Vl, 0);
  be.xent_target_logit(tl.data(), logits.data(), targets.data(), N, Vl, 8);
  for (int64_t n = 0; n < N; n++) {
    EXPECT_EQ(se[n], 0.0f);
    EXPECT_EQ(tl[n], 0.0f);
  }
  Vec gsum = {1.0f, 1.0f, 1.0f};
  be.xent_backward(logits.data(), gmax.data(), gsum.data(), targets.data(), N, Vl, 0, 8, 1.0f);
  for (float d : logits) EXPECT_EQ(d, 0.0f);
}

// ---------------------------------------------------------------------------------------------
// reductions

TEST(CpuReductions, SumAndSumSquaresAreAccurate) {
  CpuBackend be(2);
  EXPECT_EQ(be.sum(nullptr, 0), 0.0);
  EXPECT_EQ(be.sum_squares(nullptr, 0), 0.0);
  Vec one = {-3.0f};
  EXPECT_EQ(be.sum(one.data(), 1), -3.0);
  EXPECT_EQ(be.sum_squares(one.data(), 1), 9.0);
  // 2^24 + 3 values where float accumulation stalls at 2^24: ones plus a few larger values.
  const int64_t n = (1 << 24) + 3;
  Vec x(n, 1.0f);
  x[5] = 0.5f;
  x[n - 1] = 1e-3f;
  const double want = static_cast<double>(n - 2) + 0.5 + static_cast<double>(1e-3f);
  EXPECT_NEAR(be.sum(x.data(), n), want, 1e-9 * want);
  const double want_sq =
      static_cast<double>(n - 2) + 0.25 + static_cast<double>(1e-3f) * static_cast<double>(1e-3f);
  EXPECT_NEAR(be.sum_squares(x.data(), n), want_sq, 1e-9 * want_sq);
  std::mt19937 rng(16);
  for (int64_t m : {7, 255, 257, 100003}) {
    Vec v = randn(m, rng, 1.0f, 0.1f);
    long double s = 0, s2 = 0;
    for (float f : v) s += f, s2 += static_cast<long double>(f) * f;
    EXPECT_NEAR(be.sum(v.data(), m), static_cast<double>(s), 1e-12 * m);
    EXPECT_NEAR(be.sum_squares(v.data(), m), static_cast<double>(s2), 1e-12 * m);
  }
}

// ---------------------------------------------------------------------------------------------
// optimizers

gpt::AdamWStep adamw_step(float lr, float b1, float b2, float eps, float wd, int t) {
  return gpt::make_adamw_step(lr, b1, b2, eps, wd, t);
}

// The whole buffer as one run with weight decay.
std::vector<gpt::ParameterRun> one_run(int64_t n) {
  return {gpt::ParameterRun{0, n, true}};
}

TEST(CpuOptimizers, AdamWFirstStepByHand) {
  CpuBackend be(1);
  // Step 1: m/bc1 = g and sqrt(v/bc2) = |g|, so p = p0 (1 - lr wd) - lr g / (|g| + eps).
  Vec p = {1.0f, -2.0f}, g = {0.5f, -4.0f}, m = {0.0f, 0.0f}, v = {0.0f, 0.0f};
  const gpt::AdamWStep step = adamw_step(0.1f, 0.9f, 0.999f, 1e-8f, 0.01f, 1);
  be.adamw_update(p.data(), g.data(), m.data(), v.data(), one_run(2), step, step);
  EXPECT_NEAR(p[0], 0.999 - 0.1 * 0.5 / (0.5 + 1e-8), 1e-6);
  EXPECT_NEAR(p[1], -2.0 * 0.999 + 0.1 * 4.0 / (4.0 + 1e-8), 1e-6);
  EXPECT_NEAR(m[0], 0.05, 1e-7);
  EXPECT_NEAR(v[1], (1.0 - static_cast<double>(0.999f)) * 16.0, 1e-8);  // 1 - 0.999f is exact
}

TEST(CpuOptimizers, AdamWThreeStepsMatchTorchSemantics) {
  CpuBackend be(2);
  std::mt19937 rng(17);
  const int64_t n = 1003;
  const float lr = 3e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  Vec p = randn(n, rng), m(n, 0.0f), v(n, 0.0f);
  DVec rp = to_double(p), rm(n, 0.0), rv(n, 0.0);
  for (int t = 1; t <= 3; t++) {
    Vec g = randn(n, rng);
    const gpt::AdamWStep step = adamw_step(lr, b1, b2, eps, wd, t);
    be.adamw_update(p.data(), g.data(), m.data(), v.data(), one_run(n), step, step);
    // torch.optim.AdamW (foreach=False): decay, moments, bias-corrected step.
    const double bc1 = 1.0 - std::pow(static_cast<double>(b1), t);
    const double bc2 = 1.0 - std::pow(static_cast<double>(b2), t);
    for (int64_t i = 0; i < n; i++) {
      rp[i] *= 1.0 - static_cast<double>(lr) * wd;
      rm[i] = b1 * rm[i] + (1.0 - b1) * g[i];
      rv[i] = b2 * rv[i] + (1.0 - b2) * static_cast<double>(g[i]) * g[i];
      rp[i] -= lr / bc1 * rm[i] / (std::sqrt(rv[i]) / std::sqrt(bc2) + eps);
    }
  }
  expect_close(p, rp, 1e-5, 1e-6, "adamw param");
  expect_close(m, rm, 1e-5, 1e-6, "adamw exp_avg");
  expect_close(v, rv, 1e-5, 1e-6, "adamw exp_avg_sq");
}

TEST(CpuOptimizers, SgdThreeStepsByHand) {
  CpuBackend be(1);
  // p0 = 1, g = 0.5 each step, lr 0.1, momentum 0.9, weight decay 0.1 (torch.optim.SGD):
  //   g' = 0.6,     buf = 0.6,                     p = 0.94
  //   g' = 0.594,   buf = 0.54 + 0.594 = 1.134,    p = 0.8266
  //   g' = 0.58266, buf = 1.0206 + 0.58266,        p = 0.8266 - 0.160326 = 0.666274
  Vec p = {1.0f}, g = {0.5f}, buf = {0.0f};
  const double want[3] = {0.94, 0.8266, 0.666274};
  for (int t = 0; t < 3; t++) {
    const gpt::SgdStep step{0.1f, 0.9f, 0.1f, t == 0};
    be.sgd_update(p.data(), g.data(), buf.data(), one_run(1), step, step);
    EXPECT_NEAR(p[0], want[t], 1e-6) << "step " << t + 1;
  }
  EXPECT_NEAR(buf[0], 1.60326, 1e-6);
  // No momentum: plain p -= lr (g + wd p), with or without a buffer.
  Vec q = {2.0f, -1.0f}, gq = {1.0f, 3.0f};
  const gpt::SgdStep plain{0.5f, 0.0f, 0.0f, true};
  be.sgd_update(q.data(), gq.data(), nullptr, one_run(2), plain, plain);
  EXPECT_FLOAT_EQ(q[0], 1.5f);
  EXPECT_FLOAT_EQ(q[1], -2.5f);
}

TEST(CpuOptimizers, SgdMatchesTorchSemanticsOnVectors) {
  CpuBackend be(2);
  std::mt19937 rng(18);
  const int64_t n = 40007;
  Vec p = randn(n, rng), buf(n, 0.0f);
  DVec rp = to_double(p), rb(n, 0.0);
  for (int t = 0; t < 3; t++) {
    Vec g = randn(n, rng);
    const gpt::SgdStep step{0.05f, 0.9f, 0.01f, t == 0};
    be.sgd_update(p.data(), g.data(), buf.data(), one_run(n), step, step);
    for (int64_t i = 0; i < n; i++) {
      const double gi = g[i] + 0.01 * rp[i];
      rb[i] = t == 0 ? gi : 0.9 * rb[i] + gi;
      rp[i] -= 0.05 * rb[i];
    }
  }
  expect_close(p, rp, 1e-5, 1e-6, "sgd param");
  expect_close(buf, rb, 1e-5, 1e-6, "sgd momentum");
}

// ---------------------------------------------------------------------------------------------
// determinism

// Runs every kernel once on fixed inputs and returns all outputs concatenated.
Vec run_all_kernels(CpuBackend& be) {
  std::mt19937 rng(99);
  const int64_t B = 2, T = 70, NH = 3, HS = 10, C = NH * HS, N = B * T, OC = 3 * C, V = 101;
  Vec x = randn(N * C, rng), w = randn(OC * C, rng), bias = randn(OC, rng);
  Vec result;
  auto keep = [&](const Vec& v) { result.insert(result.end(), v.begin(), v.end()); };

  Vec qkv(N * OC), dqkv(N * OC), dx(N * C), dw(OC * C, 0.0f), db(OC, 0.0f);
  be.matmul_forward(qkv.data(), x.data(), w.data(), bias.data(), N, C, OC);
  keep(qkv);
  Vec out(N * C), att(B * NH * T * T), datt(att.size());
  be.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, HS);
  keep(out), keep(att);
  be.attention_backward(dqkv.data(), datt.data(), out.data(), out.data(), qkv.data(), att.data(), B,
                        T, NH, HS);
  keep(dqkv);
  be.matmul_backward_input(dx.data(), dqkv.data(), w.data(), N, C, OC, false);
  be.matmul_backward_weight(dw.data(), db.data(), dqkv.data(), x.data(), N, C, OC);
  keep(dx), keep(dw), keep(db);

  Vec ln(N * C), mean(N), rstd(N), lw = randn(C, rng), lb = randn(C, rng);
  be.layernorm_forward(ln.data(), mean.data(), rstd.data(), x.data(), lw.data(), lb.data(), N, C);
  Vec ldx(N * C, 0.0f), ldw(C, 0.0f), ldb(C, 0.0f);
  be.layernorm_backward_input(ldx.data(), out.data(), x.data(), lw.data(), mean.data(), rstd.data(),
                              N, C);
  be.layernorm_backward_weight(ldw.data(), ldb.data(), out.data(), x.data(), mean.data(),
                               rstd.data(), N, C);
  keep(ln), keep(mean), keep(rstd), keep(ldx), keep(ldw), keep(ldb);

  Vec bb(C, 0.0f);
  be.bias_backward(bb.data(), out.data(), N, C);
  keep(bb);
  std::vector<int32_t> tokens(N);
  for (int64_t n = 0; n < N; n++) tokens[n] = static_cast<int32_t>((n * 7) % 13);
  Vec dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
  be.embedding_backward(dwte.data(), out.data(), tokens.data(), N, C, 0, V);
  be.position_embedding_backward(dwpe.data(), out.data(), B, T, C);
  keep(dwte), keep(dwpe);

  Vec logits = randn(N * V, rng), mx(N), se(N), tl(N), losses(N);
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; n++) targets[n] = static_cast<int32_t>((n * 5) % 90);
  be.xent_row_max(mx.data(), logits.data(), N, V, 90);
  be.xent_row_sumexp(se.data(), logits.data(), mx.data(), N, V, 90);
  be.xent_target_logit(tl.data(), logits.data(), targets.data(), N, V, 0);
  be.xent_loss(losses.data(), mx.data(), se.data(), tl.data(), N);
  be.xent_backward(logits.data(), mx.data(), se.data(), targets.data(), N, V, 90, 0, 0.5f);
  keep(losses), keep(logits);

  Vec big = randn(300001, rng);
  const double s = be.sum(big.data(), 300001), s2 = be.sum_squares(big.data(), 300001);
  Vec sums(4);
  std::memcpy(sums.data(), &s, sizeof s);
  std::memcpy(sums.data() + 2, &s2, sizeof s2);
  keep(sums);
  return result;
}

TEST(CpuDeterminism, RepeatedCallsAreBitIdentical) {
  for (int threads : {1, 2}) {
    CpuBackend be(threads);
    Vec a = run_all_kernels(be);
    Vec b = run_all_kernels(be);
    expect_bits_equal(a, b, "all kernels, " + std::to_string(threads) + " threads");
  }
}

// The column sums, embedding gradients, attention (one head per thread) and reductions fix their
// summation order independently of the thread count.
TEST(CpuDeterminism, ThreadCountIndependentKernels) {
  std::mt19937 rng(100);
  const int64_t N = 333, C = 200, B = 3, T = 111, NH = 2, HS = 9;
  Vec dout = randn(N * C, rng), x = randn(N * C, rng), big = randn(1000003, rng);
  Vec qkv = randn(B * T * 3 * NH * HS, rng), g = randn(B * T * NH * HS, rng);
  std::vector<int32_t> tokens(N);
  for (int64_t n = 0; n < N; n++) tokens[n] = static_cast<int32_t>((n * 3) % 17);
  Vec outs[2];
  for (int k = 0; k < 2; k++) {
    CpuBackend be(k + 1);
    Vec bb(C, 0.0f), mean(N), rstd(N), ln(N * C), lw(C, 1.0f), lb(C, 0.0f), ldw(C, 0.0f),
        ldb(C, 0.0f), dwte(17 * C, 0.0f);
    be.bias_backward(bb.data(), dout.data(), N, C);
    be.layernorm_forward(ln.data(), mean.data(), rstd.data(), x.data(), lw.data(), lb.data(), N, C);
    be.layernorm_backward_weight(ldw.data(), ldb.data(), dout.data(), x.data(), mean.data(),
                                 rstd.data(), N, C);
    be.embedding_backward(dwte.data(), dout.data(), tokens.data(), N, C, 0, 17);
    Vec out(g.size()), att(B * NH * T * T), dqkv(qkv.size()), datt(att.size());
    be.attention_forward(out.data(), att.data(), qkv.data(), B, T, NH, HS);
    be.attention_backward(dqkv.data(), datt.data(), g.data(), out.data(), qkv.data(), att.data(), B,
                          T, NH, HS);
    const double s = be.sum(big.data(), 1000003), s2 = be.sum_squares(big.data(), 1000003);
    Vec sums(4);
    std::memcpy(sums.data(), &s, sizeof s);
    std::memcpy(sums.data() + 2, &s2, sizeof s2);
    for (const Vec* v : {&bb, &ln, &ldw, &ldb, &dwte, &out, &att, &dqkv, &sums})
      outs[k].insert(outs[k].end(), v->begin(), v->end());
  }
  expect_bits_equal(outs[0], outs[1], "1 vs 2 threads");
}

}  // namespace
