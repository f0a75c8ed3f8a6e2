// test_cuda_emulation: the CUDA backend's own kernels (framework/cuda/*.cu, unmodified) run on the
// host through the SIMT emulator of emu.h and are compared launcher by launcher with the CPU
// backend. Needs no GPU and no nvcc, so every CI run checks the kernels' indexing, bounds, barriers
// and math.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iomanip>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "emu.h"
#include "framework/cpu/cpu_backend.h"
#include "framework/cuda/grid_stride.cuh"  // the generated copy, whose grid cap is a variable
#include "framework/cuda/kernels.h"

namespace {

namespace gc = gpt::cuda;
using Vec = std::vector<float>;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::mt19937 rng;  // reseeded by every test, so that a test's cases do not depend on the others

Vec uniform(int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

Vec normal(int64_t n, float stddev) {
  std::normal_distribution<float> d(0.0f, stddev);
  Vec v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Device memory of the emulated kernels. The buffer ends where an inaccessible page begins, so a
// kernel reading or writing past its end faults at once. It starts 16-byte aligned or, when
// misaligned, one element past that (sending the launchers to their scalar paths); the bytes
// between it and the edges of its pages hold a pattern that must survive.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const std::vector<T>& init, bool misaligned = false)
      : n_(init.size()), page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    const size_t bytes = n_ * sizeof(T);
    map_bytes_ = (bytes + 32 + page_ - 1) / page_ * page_ + page_;
    map_ = static_cast<char*>(
        mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (map_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    guard_ = map_ + map_bytes_ - page_;
    mprotect(guard_, page_, PROT_NONE);
    const uintptr_t offset = misaligned ? sizeof(T) : 0;
    const uintptr_t start = (reinterpret_cast<uintptr_t>(guard_) - bytes - offset) & ~uintptr_t{15};
    data_ = reinterpret_cast<T*>(start + offset);
    std::memset(map_, kPattern, static_cast<size_t>(guard_ - map_));
    if (bytes > 0) std::memcpy(data_, init.data(), bytes);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    const char* end = reinterpret_cast<const char*>(data_ + n_);
    const char* begin = reinterpret_cast<const char*>(data_);
    bool intact = true;
    for (const char* p = map_; p < begin; p++) intact &= *p == kPattern;
    for (const char* p = end; p < guard_; p++) intact &= *p == kPattern;
    if (!intact) ADD_FAILURE() << "a kernel wrote next to a buffer of " << n_ << " elements";
    munmap(map_, map_bytes_);
  }

  T* get() { return data_; }
  std::vector<T> read() const { return std::vector<T>(data_, data_ + n_); }

 private:
  static constexpr char kPattern = 0x5a;
  size_t n_, page_, map_bytes_ = 0;
  char* map_ = nullptr;
  char* guard_ = nullptr;
  T* data_ = nullptr;
};

using Floats = DeviceBuffer<float>;

// Scratch as the backend hands it out: of the size the launcher asked for, full of garbage.
DeviceBuffer<char> scratch(size_t bytes) {
  return DeviceBuffer<char>(std::vector<char>(bytes, static_cast<char>(0xff)));
}

bool same_bits(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

double norm(const Vec& v) {
  double s = 0.0;
  for (float x : v)
    if (std::isfinite(x)) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// Bit for bit (any NaN matches any NaN).
::testing::AssertionResult Same(const Vec& got, const Vec& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < want.size(); i++)
    if (!same_bits(got[i], want[i]) && bad++ == 0) first = i;
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << want.size() << " differ, first [" << first << "] "
         << std::setprecision(9) << got[first] << " instead of " << want[first];
}

// ||got - want|| <= tol * scale, the scale being ||want|| unless given; NaN and infinities only
// where the reference has the same.
::testing::AssertionResult Close(const Vec& got, const Vec& want, double tol, double scale = -1.0) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  double err = 0.0;
  for (size_t i = 0; i < want.size(); i++) {
    if (same_bits(got[i], want[i])) continue;
    if (!std::isfinite(got[i]) || !std::isfinite(want[i]))
      return ::testing::AssertionFailure()
             << "[" << i << "] is " << got[i] << " instead of " << want[i];
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
  }
  err = std::sqrt(err);
  if (scale < 0.0) scale = norm(want);
  if (err <= tol * scale) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "error norm " << err << " over " << tol << " x " << scale;
}

// What a norm's backward_input added to `before` (N,C), against what the CPU added: it cancels to
// rounding noise for tiny C, so its scale is that of the terms, rstd * dy * w.
::testing::AssertionResult AddedClose(Vec got, Vec want, const Vec& before, const Vec& rstd,
                                      const Vec& dy, const Vec& w) {
  const size_t C = w.size();
  Vec terms(got.size());
  for (size_t i = 0; i < got.size() && i < want.size(); i++) {
    got[i] -= before[i];
    want[i] -= before[i];
    terms[i] = rstd[i / C] * dy[i] * w[i % C];
  }
  return Close(got, want, 1e-5, norm(terms));
}

std::string shape(std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  std::ostringstream s;
  for (const auto& [name, value] : sizes) s << name << "=" << value << " ";
  return s.str();
}

// Caps the grid of the grid-stride kernels, so that their loops go round several times.
class GridCap {
 public:
  explicit GridCap(int64_t blocks) : saved_(gc::kMaxGridBlocks) { gc::kMaxGridBlocks = blocks; }
  ~GridCap() { gc::kMaxGridBlocks = saved_; }

 private:
  int64_t saved_;
};

class CudaEmulation : public ::testing::Test {
 protected:
  void SetUp() override {
    rng.seed(20240601);
    emu::set_order(emu::Order::kForward);
    emu::clear_launches();
  }

  void check_elementwise();
  void check_embeddings(bool all_shapes);

  gpt::cpu::CpuBackend cpu{1};
  gpt::cpu::CpuBackend cpu_bf16{1, gpt::Precision::kBf16};
};

// ---------------------------------------------------------------------------------- elementwise

const std::pair<bool, bool> kAlignments[] = {
    {false, false}, {true, false}, {false, true}, {true, true}};

void CudaEmulation::check_elementwise() {
  for (int64_t n : {0, 1, 2, 3, 4, 5, 7, 8, 255, 256, 257, 1023, 1024, 1027, 4100})
    for (const auto& [mis_out, mis_in] : kAlignments) {
      SCOPED_TRACE(shape({{"n", n}, {"misaligned_out", mis_out}, {"misaligned_in", mis_in}}));
      const Vec a = uniform(n, -5.0f, 5.0f), b = uniform(n, -5.0f, 5.0f);
      const Vec y0 = uniform(n, -2.0f, 2.0f), nan(static_cast<size_t>(n), kNaN);
      {
        // The formula of elementwise.h bit for bit; the CPU's within its FMA contractions.
        Floats out(nan, mis_out), in(a, mis_in);
        gc::gelu_forward(nullptr, out.get(), in.get(), n);
        Vec exact(a.size()), want(a.size());
        for (size_t i = 0; i < a.size(); i++) exact[i] = gpt::gelu_tanh(a[i]);
        cpu.gelu_forward(want.data(), a.data(), n);
        EXPECT_TRUE(Same(out.read(), exact)) << "gelu_forward";
        EXPECT_TRUE(Close(out.read(), want, 1e-6)) << "gelu_forward against the CPU";
        EXPECT_TRUE(Same(in.read(), a)) << "gelu_forward changed its input";
      }
      {
        Floats dinp(nan, mis_out), dout(a, mis_in), inp(b);
        gc::gelu_backward(nullptr, dinp.get(), dout.get(), inp.get(), n);
        Vec exact(a.size()), want(a.size());
        for (size_t i = 0; i < a.size(); i++) exact[i] = gpt::gelu_tanh_grad(b[i]) * a[i];
        cpu.gelu_backward(want.data(), a.data(), b.data(), n);
        EXPECT_TRUE(Same(dinp.read(), exact)) << "gelu_backward";
        // Near GELU's minimum the derivative cancels: errors scale with dout, not the result.
        EXPECT_TRUE(Close(dinp.read(), want, 1e-6, norm(a))) << "gelu_backward against the CPU";
      }
      {
        Floats out(nan, mis_out), gate(a, mis_in), up(b);
        gc::swiglu_forward(nullptr, out.get(), gate.get(), up.get(), n);
        Vec exact(a.size()), want(a.size());
        for (size_t i = 0; i < a.size(); i++) exact[i] = gpt::swiglu_output(a[i], b[i]);
        cpu.swiglu_forward(want.data(), a.data(), b.data(), n);
        EXPECT_TRUE(Same(out.read(), exact)) << "swiglu_forward";
        EXPECT_TRUE(Close(out.read(), want, 1e-6)) << "swiglu_forward against the CPU";
      }
      {
        Floats dgate(nan, mis_out), dup(nan, mis_out), dout(y0, mis_in), gate(a), up(b);
        gc::swiglu_backward(nullptr, dgate.get(), dup.get(), dout.get(), gate.get(), up.get(), n);
        Vec exact_g(a.size()), exact_u(a.size()), want_g(a.size()), want_u(a.size());
        for (size_t i = 0; i < a.size(); i++) {
          exact_g[i] = gpt::swiglu_dgate(y0[i], a[i], b[i]);
          exact_u[i] = gpt::swiglu_dup(y0[i], a[i]);
        }
        cpu.swiglu_backward(want_g.data(), want_u.data(), y0.data(), a.data(), b.data(), n);
        EXPECT_TRUE(Same(dgate.read(), exact_g)) << "swiglu_backward dgate";
        EXPECT_TRUE(Same(dup.read(), exact_u)) << "swiglu_backward dup";
        EXPECT_TRUE(Close(dgate.read(), want_g, 1e-6)) << "swiglu_backward dgate against the CPU";
        EXPECT_TRUE(Close(dup.read(), want_u, 1e-6)) << "swiglu_backward dup against the CPU";
      }
      {
        Floats y(y0, mis_out), x(a, mis_in);
        gc::accumulate(nullptr, y.get(), x.get(), n);
        Vec want = y0;
        cpu.accumulate(want.data(), a.data(), n);
        EXPECT_TRUE(Same(y.read(), want)) << "accumulate";
      }
      {
        Floats x(a, mis_out);
        gc::scale(nullptr, x.get(), 0.37f, n);
        Vec want = a;
        cpu.scale(want.data(), 0.37f, n);
        EXPECT_TRUE(Same(x.read(), want)) << "scale";
      }
      {
        Vec src = a;
        const float special[] = {INFINITY, -0.0f, 1.00390625f, 1.01171875f, 3.4e38f, 1e-40f, kNaN};
        for (size_t i = 0; i < src.size() && i < std::size(special); i++) src[i] = special[i];
        DeviceBuffer<__nv_bfloat16> out(std::vector<__nv_bfloat16>(src.size(), {0x1234}), mis_out);
        Floats in(src, mis_in);
        gc::convert_to_bf16(nullptr, out.get(), in.get(), n);
        const auto got = out.read();
        size_t bad = 0;
        for (size_t i = 0; i < src.size(); i++) {
          uint32_t u;
          std::memcpy(&u, &src[i], sizeof u);
          const uint16_t rounded = static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
          const bool nan_ok = std::isnan(src[i]) && (got[i].bits & 0x7fff) > 0x7f80;
          bad += !nan_ok && got[i].bits != rounded;
        }
        EXPECT_EQ(bad, 0u) << "convert_to_bf16: elements not rounded to nearest even";
        // Back to float, and the in-place rounding of bf16 storage: both as the CPU backend's.
        Floats back(a, mis_in);
        gc::convert_from_bf16(nullptr, back.get(), out.get(), n);
        std::vector<uint16_t> bits(got.size());
        for (size_t i = 0; i < got.size(); i++) bits[i] = got[i].bits;
        Vec want_back(src.size()), want_round = src;
        cpu.unpack_bf16(want_back.data(), bits.data(), n);
        cpu.round_to_bf16(want_round.data(), n);
        EXPECT_TRUE(Same(back.read(), want_back)) << "convert_from_bf16";
        Floats rounded(src, mis_out);
        gc::round_to_bf16(nullptr, rounded.get(), n);
        EXPECT_TRUE(Same(rounded.read(), want_round)) << "round_to_bf16 against the CPU";
      }
    }
  for (int64_t N : {0, 1, 3, 64})
    for (int64_t C : {1, 2, 3, 4, 5, 8, 12, 129, 256})
      for (const auto& [mis_out, mis_bias] : kAlignments) {
        SCOPED_TRACE(shape({{"N", N}, {"C", C}, {"misaligned_out", mis_out}, {"bias", mis_bias}}));
        const Vec out0 = uniform(N * C, -2.0f, 2.0f), bias = uniform(C, -2.0f, 2.0f);
        Floats out(out0, mis_out), db(bias, mis_bias);
        gc::add_bias(nullptr, out.get(), db.get(), N, C);
        Vec want = out0;
        cpu.add_bias(want.data(), bias.data(), N, C);
        EXPECT_TRUE(Same(out.read(), want)) << "add_bias";
      }
}

TEST_F(CudaEmulation, Elementwise) {
  check_elementwise();
}

TEST_F(CudaEmulation, ElementwiseGridStrideLoops) {
  GridCap cap(3);
  check_elementwise();
  unsigned widest = 0;
  for (const auto& l : emu::launches()) widest = std::max(widest, l.grid.x);
  EXPECT_EQ(widest, 3u) << "the grid cap did not apply";
}

// ----------------------------------------------------------------------------------- reductions

TEST_F(CudaEmulation, ColumnSums) {
  for (int64_t N : {0, 1, 2, 127, 128, 129, 255, 257, 1000})
    for (int64_t C : {1, 3, 127, 128, 129, 300}) {
      SCOPED_TRACE(shape({{"N", N}, {"C", C}}));
      const Vec x = uniform(N * C, -2.0f, 2.0f), col0 = uniform(C, -2.0f, 2.0f);
      Floats dcol(col0, C % 2 == 1), dx(x, N % 2 == 1);
      auto work = scratch(gc::column_sum_scratch_bytes(N, C));
      gc::column_sum_accumulate(nullptr, dcol.get(), dx.get(), N, C, work.get());
      Vec want = col0;
      cpu.bias_backward(want.data(), x.data(), N, C);
      EXPECT_TRUE(Close(dcol.read(), want, 1e-6));
    }
}

TEST_F(CudaEmulation, FullSums) {
  for (int64_t n : {0, 1, 2, 255, 256, 257, 131071, 131072, 131073, 300001})
    for (bool squares : {false, true}) {
      SCOPED_TRACE(shape({{"n", n}, {"squares", squares}}));
      const Vec x = uniform(n, -3.0f, 3.0f);
      Floats dx(x, n % 2 == 1);
      auto work = scratch(gc::full_sum_scratch_bytes());
      DeviceBuffer<double> result(std::vector<double>{std::nan("")});
      if (squares) {
        gc::sum_squares(nullptr, result.get(), dx.get(), n, work.get());
      } else {
        gc::sum(nullptr, result.get(), dx.get(), n, work.get());
      }
      const double want = squares ? cpu.sum_squares(x.data(), n) : cpu.sum(x.data(), n);
      double magnitude = 1.0;
      for (float v : x) magnitude += squares ? double{v} * v : std::fabs(double{v});
      EXPECT_NEAR(result.read()[0], want, 1e-13 * magnitude);
    }
}

// ------------------------------------------------------------------------------------ layernorm

TEST_F(CudaEmulation, LayerNorm) {
  for (int64_t N : {0, 1, 2, 7, 8, 9, 17})
    for (int64_t C : {1, 2, 3, 31, 32, 33, 64, 100, 768}) {
      SCOPED_TRACE(shape({{"N", N}, {"C", C}}));
      Vec x = uniform(N * C, -3.0f, 3.0f);
      for (float& v : x) v += 5.0f;  // a mean far from 0
      const Vec w = uniform(C, 0.5f, 1.5f), bias = uniform(C, -0.5f, 0.5f);
      Vec out(x.size()), mean(N), rstd(N);
      cpu.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), bias.data(),
                            N, C);
      {
        Floats dout(Vec(x.size(), kNaN), true), dmean(Vec(N, kNaN)), drstd(Vec(N, kNaN)), dx(x),
            dw(w, true), db(bias);
        gc::layernorm_forward(nullptr, dout.get(), dmean.get(), drstd.get(), dx.get(), dw.get(),
                              db.get(), N, C);
        EXPECT_TRUE(Close(dout.read(), out, 1e-5)) << "layernorm_forward out";
        EXPECT_TRUE(Close(dmean.read(), mean, 1e-6)) << "layernorm_forward mean";
        EXPECT_TRUE(Close(drstd.read(), rstd, 1e-6)) << "layernorm_forward rstd";
      }
      // The backward kernels take the CPU's statistics, so that only the kernel under test differs.
      const Vec dy = uniform(N * C, -1.0f, 1.0f), din0 = uniform(N * C, -1.0f, 1.0f);
      {
        Floats din(din0), ddy(dy, true), dx(x), dw(w), dm(mean), dr(rstd);
        gc::layernorm_backward_input(nullptr, din.get(), ddy.get(), dx.get(), dw.get(), dm.get(),
                                     dr.get(), N, C);
        Vec want = din0;
        cpu.layernorm_backward_input(want.data(), dy.data(), x.data(), w.data(), mean.data(),
                                     rstd.data(), N, C);
        EXPECT_TRUE(AddedClose(din.read(), want, din0, rstd, dy, w)) << "layernorm_backward_input";
      }
      {
        const Vec dw0 = uniform(C, -1.0f, 1.0f), db0 = uniform(C, -1.0f, 1.0f);
        Floats gw(dw0), gb(db0, true), ddy(dy), dx(x, true), dm(mean), dr(rstd);
        auto work = scratch(gc::layernorm_backward_weight_scratch_bytes(N, C));
        gc::layernorm_backward_weight(nullptr, gw.get(), gb.get(), ddy.get(), dx.get(), dm.get(),
                                      dr.get(), N, C, work.get());
        Vec want_w = dw0, want_b = db0;
        cpu.layernorm_backward_weight(want_w.data(), want_b.data(), dy.data(), x.data(),
                                      mean.data(), rstd.data(), N, C);
        EXPECT_TRUE(Close(gw.read(), want_w, 1e-6)) << "layernorm_backward_weight dweight";
        EXPECT_TRUE(Close(gb.read(), want_b, 1e-6)) << "layernorm_backward_weight dbias";
      }
    }
}

// -------------------------------------------------------------------------------------- rmsnorm

TEST_F(CudaEmulation, RmsNorm) {
  for (int64_t N : {0, 1, 7, 9})
    for (int64_t C : {1, 3, 32, 33, 100, 768}) {
      SCOPED_TRACE(shape({{"N", N}, {"C", C}}));
      const float eps = C == 100 ? 1e-6f : 1e-5f;
      const Vec x = uniform(N * C, -3.0f, 3.0f), w = uniform(C, 0.5f, 1.5f);
      Vec out(x.size()), rstd(N);
      cpu.rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
      {
        Floats dout(Vec(x.size(), kNaN), true), drstd(Vec(N, kNaN)), dx(x), dw(w, true);
        gc::rmsnorm_forward(nullptr, dout.get(), drstd.get(), dx.get(), dw.get(), N, C, eps);
        EXPECT_TRUE(Close(dout.read(), out, 1e-6)) << "rmsnorm_forward out";
        EXPECT_TRUE(Close(drstd.read(), rstd, 1e-6)) << "rmsnorm_forward rstd";
      }
      // The backward kernels take the CPU's rstd, so that only the kernel under test differs.
      const Vec dy = uniform(N * C, -1.0f, 1.0f), din0 = uniform(N * C, -1.0f, 1.0f);
      {
        Floats din(din0), ddy(dy, true), dx(x), dw(w), dr(rstd);
        gc::rmsnorm_backward_input(nullptr, din.get(), ddy.get(), dx.get(), dw.get(), dr.get(), N,
                                   C);
        Vec want = din0;
        cpu.rmsnorm_backward_input(want.data(), dy.data(), x.data(), w.data(), rstd.data(), N, C);
        EXPECT_TRUE(AddedClose(din.read(), want, din0, rstd, dy, w)) << "rmsnorm_backward_input";
      }
      {
        const Vec dw0 = uniform(C, -1.0f, 1.0f);
        Floats gw(dw0, true), ddy(dy), dx(x, true), dr(rstd);
        auto work = scratch(gc::rmsnorm_backward_weight_scratch_bytes(N, C));
        gc::rmsnorm_backward_weight(nullptr, gw.get(), ddy.get(), dx.get(), dr.get(), N, C,
                                    work.get());
        Vec want = dw0;
        cpu.rmsnorm_backward_weight(want.data(), dy.data(), x.data(), rstd.data(), N, C);
        EXPECT_TRUE(Close(gw.read(), want, 1e-6)) << "rmsnorm_backward_weight";
      }
    }
}

// --------------------------------------------------------------------------------------- rotary

// In place, forward and backward, against the pair formulas of elementwise.h (bit for bit) and
// the CPU (within its FMA contractions); rows at positions start + t of a longer table.
TEST_F(CudaEmulation, Rotary) {
  struct Shape {
    int64_t B, T, heads, HS, start;
  };
  const Shape shapes[] = {{0, 3, 2, 4, 0}, {1, 1, 1, 2, 0},  {2, 5, 3, 8, 0},
                          {3, 4, 2, 6, 7}, {1, 9, 4, 64, 3}, {2, 3, 1, 128, 250}};
  for (bool capped : {false, true}) {
    GridCap cap(capped ? 3 : gc::kMaxGridBlocks);
    for (const Shape& s : shapes) {
      SCOPED_TRACE(shape({{"B", s.B},
                          {"T", s.T},
                          {"heads", s.heads},
                          {"HS", s.HS},
                          {"start", s.start},
                          {"capped", capped}}));
      const int64_t positions = s.start + s.T + 2, half = s.HS / 2;
      const Vec table = uniform(positions * s.HS, -1.0f, 1.0f);
      const Vec x = normal(s.B * s.T * s.heads * s.HS, 1.0f);
      for (bool backward : {false, true}) {
        Vec exact = x, want = x;
        for (int64_t row = 0; row < s.B * s.T; row++)
          for (int64_t h = 0; h < s.heads; h++)
            for (int64_t i = 0; i < half; i++) {
              const float* cosines = &table[(s.start + row % s.T) * s.HS];
              float& a = exact[(row * s.heads + h) * s.HS + i];
              float& b = exact[(row * s.heads + h) * s.HS + half + i];
              if (backward) {
                gpt::rotary_turn_back(a, b, cosines[i], cosines[half + i]);
              } else {
                gpt::rotary_turn(a, b, cosines[i], cosines[half + i]);
              }
            }
        Floats dx(x, s.HS % 4 != 0), dtable(table);
        if (backward) {
          gc::rotary_backward(nullptr, dx.get(), dtable.get(), s.B, s.T, s.heads, s.HS, s.start);
          cpu.rotary_backward(want.data(), table.data(), s.B, s.T, s.heads, s.HS, s.start);
        } else {
          gc::rotary_forward(nullptr, dx.get(), dtable.get(), s.B, s.T, s.heads, s.HS, s.start);
          cpu.rotary_forward(want.data(), table.data(), s.B, s.T, s.heads, s.HS, s.start);
        }
        EXPECT_TRUE(Same(dx.read(), exact)) << (backward ? "rotary_backward" : "rotary_forward");
        EXPECT_TRUE(Close(dx.read(), want, 1e-6)) << "against the CPU, backward " << backward;
      }
    }
  }
}

// ----------------------------------------------------------------------------------- embeddings

void CudaEmulation::check_embeddings(bool all_shapes) {
  for (int64_t N : {0, 1, 2, 5, 33, 300})
    for (int64_t C : {1, 3, 4, 5, 8, 128, 129, 260})
      for (int64_t V : {0, 1, 2, 3, 7, 16, 50})  // powers of two: the sort's bit count
        for (int64_t vocab_start : {0, 9}) {
          if ((N == 300 && (C > 8 || V == 2)) || (!all_shapes && vocab_start != 0)) continue;
          SCOPED_TRACE(shape({{"N", N}, {"C", C}, {"V_local", V}, {"vocab_start", vocab_start}}));
          // Tokens below, inside and above this rank's rows, repeated ones, and the int32 extremes.
          std::uniform_int_distribution<int> pick(static_cast<int>(vocab_start) - 2,
                                                  static_cast<int>(vocab_start + V) + 3);
          std::vector<int32_t> tokens(static_cast<size_t>(N));
          for (int32_t& t : tokens) t = pick(rng);
          if (N >= 5 && V > 0) {
            tokens[1] = tokens[3] = static_cast<int32_t>(vocab_start);
            tokens[4] = static_cast<int32_t>(vocab_start + V - 1);
          }
          if (N >= 33) {
            tokens[20] = INT32_MAX;
            tokens[21] = INT32_MIN;
            tokens[22] = tokens[30] = tokens[31] = tokens[4];
          }
          const Vec wte = uniform(V * C, -2.0f, 2.0f);
          for (bool misaligned : {false, true}) {
            Floats out(Vec(static_cast<size_t>(N * C), kNaN), misaligned), dw(wte);
            DeviceBuffer<int32_t> dt(tokens);
            gc::embedding_forward(nullptr, out.get(), dt.get(), dw.get(), N, C, vocab_start, V);
            Vec want(out.read().size());
            cpu.embedding_forward(want.data(), tokens.data(), wte.data(), N, C, vocab_start, V);
            EXPECT_TRUE(Same(out.read(), want)) << "embedding_forward, misaligned " << misaligned;
          }
          {
            // Each token's rows added in their order, as on the CPU: exactly the CPU's sums.
            const Vec dwte0 = uniform(V * C, -1.0f, 1.0f), dout = uniform(N * C, -1.0f, 1.0f);
            Floats dwte(dwte0, C % 2 == 1), ddout(dout);
            DeviceBuffer<int32_t> dt(tokens);
            auto work = scratch(gc::embedding_backward_scratch_bytes(N));
            gc::embedding_backward(nullptr, dwte.get(), ddout.get(), dt.get(), N, C, vocab_start, V,
                                   work.get());
            Vec want = dwte0;
            cpu.embedding_backward(want.data(), dout.data(), tokens.data(), N, C, vocab_start, V);
            EXPECT_TRUE(Same(dwte.read(), want)) << "embedding_backward";
          }
        }
  for (int64_t B : {0, 1, 3})
    for (int64_t T : {1, 2, 5})
      for (int64_t C : {1, 3, 4, 8})
        for (bool misaligned : {false, true}) {
          SCOPED_TRACE(shape({{"B", B}, {"T", T}, {"C", C}, {"misaligned", misaligned}}));
          const Vec out0 = uniform(B * T * C, -1.0f, 1.0f), wpe = uniform(T * C, -1.0f, 1.0f);
          {
            Floats out(out0, misaligned), dw(wpe);
            gc::position_embedding_forward(nullptr, out.get(), dw.get(), B, T, C);
            Vec want = out0;
            cpu.position_embedding_forward(want.data(), wpe.data(), B, T, C);
            EXPECT_TRUE(Same(out.read(), want)) << "position_embedding_forward";
          }
          {
            Floats dwpe(wpe), dout(out0, misaligned);
            gc::position_embedding_backward(nullptr, dwpe.get(), dout.get(), B, T, C);
            Vec want = wpe;
            cpu.position_embedding_backward(want.data(), out0.data(), B, T, C);
            EXPECT_TRUE(Same(dwpe.read(), want)) << "position_embedding_backward";
          }
        }
}

TEST_F(CudaEmulation, Embeddings) {
  check_embeddings(true);
}

TEST_F(CudaEmulation, EmbeddingsGridStrideLoops) {
  GridCap cap(2);
  check_embeddings(false);
}

// -------------------------------------------------------------------------------- cross-entropy

TEST_F(CudaEmulation, CrossEntropy) {
  for (int64_t N : {0, 1, 3, 9})
    for (int64_t V_local : {1, 2, 5, 32, 511, 512, 513, 1500})
      for (int64_t vocab_start : {0, 100})
        for (int64_t V_valid :
             std::set<int64_t>{0, 1, std::max<int64_t>(V_local - 3, 1), V_local}) {
          SCOPED_TRACE(shape({{"N", N},
                              {"V_local", V_local},
                              {"V_valid", V_valid},
                              {"vocab_start", vocab_start}}));
          Vec logits = uniform(N * V_local, -8.0f, 8.0f);
          for (int64_t n = 0; n < N; n++)  // padding columns: must not count
            for (int64_t j = V_valid; j < V_local; j++) logits[n * V_local + j] = 1000.0f;
          // Targets local, of another rank (above and below), in the padding, and int32 extremes.
          std::vector<int32_t> targets(static_cast<size_t>(N));
          for (int64_t n = 0; n < N; n++) {
            const int64_t options[] = {
                vocab_start + static_cast<int64_t>(rng() % std::max<int64_t>(V_valid, 1)),
                vocab_start + V_local + 2, vocab_start + V_local - 1, vocab_start - 1};
            targets[n] = static_cast<int32_t>(options[n % 4]);
          }
          if (N >= 9) {
            targets[5] = INT32_MIN;
            targets[7] = INT32_MAX;
          }
          Vec row_max(N), sumexp(N), target_logit(N), loss(N);
          cpu.xent_row_max(row_max.data(), logits.data(), N, V_local, V_valid);
          cpu.xent_row_sumexp(sumexp.data(), logits.data(), row_max.data(), N, V_local, V_valid);
          cpu.xent_target_logit(target_logit.data(), logits.data(), targets.data(), N, V_local,
                                vocab_start);
          cpu.xent_loss(loss.data(), row_max.data(), sumexp.data(), target_logit.data(), N);
          // Each kernel gets the CPU's inputs, so that only the kernel under test differs.
          Floats dl(logits, true), dmax(row_max), dsum(sumexp), dtl(target_logit);
          DeviceBuffer<int32_t> dt(targets);
          {
            Floats got(Vec(N, kNaN));
            gc::xent_row_max(nullptr, got.get(), dl.get(), N, V_local, V_valid);
            EXPECT_TRUE(Same(got.read(), row_max)) << "xent_row_max";
          }
          {
            Floats got(Vec(N, kNaN));
            gc::xent_row_sumexp(nullptr, got.get(), dl.get(), dmax.get(), N, V_local, V_valid);
            EXPECT_TRUE(Close(got.read(), sumexp, 1e-6)) << "xent_row_sumexp";
          }
          {
            Floats got(Vec(N, kNaN));
            gc::xent_target_logit(nullptr, got.get(), dl.get(), dt.get(), N, V_local, vocab_start);
            EXPECT_TRUE(Same(got.read(), target_logit)) << "xent_target_logit";
          }
          {
            Floats got(Vec(N, kNaN));
            gc::xent_loss(nullptr, got.get(), dmax.get(), dsum.get(), dtl.get(), N);
            EXPECT_TRUE(Close(got.read(), loss, 1e-6)) << "xent_loss";
          }
          for (float loss_scale : {1.0f, 0.125f}) {
            Vec want = logits;
            cpu.xent_backward(want.data(), row_max.data(), sumexp.data(), targets.data(), N,
                              V_local, V_valid, vocab_start, loss_scale);
            Floats g(logits, N % 2 == 1);
            gc::xent_backward(nullptr, g.get(), dmax.get(), dsum.get(), dt.get(), N, V_local,
                              V_valid, vocab_start, loss_scale);
            EXPECT_TRUE(Close(g.read(), want, 1e-5)) << "xent_backward, loss scale " << loss_scale;
          }
        }
  // No local columns at all (a rank of a vocabulary split narrower than the grid).
  const int64_t N = 3;
  std::vector<int32_t> targets = {0, 5, -1};
  Floats dl(Vec{}), dmax(Vec(N, kNaN)), dsum(Vec(N, kNaN)), dtl(Vec(N, kNaN));
  DeviceBuffer<int32_t> dt(targets);
  gc::xent_row_max(nullptr, dmax.get(), dl.get(), N, 0, 0);
  gc::xent_row_sumexp(nullptr, dsum.get(), dl.get(), dmax.get(), N, 0, 0);
  gc::xent_target_logit(nullptr, dtl.get(), dl.get(), dt.get(), N, 0, 0);
  gc::xent_backward(nullptr, dl.get(), dmax.get(), dsum.get(), dt.get(), N, 0, 0, 0, 1.0f);
  Vec max(N), sumexp(N), target_logit(N);
  cpu.xent_row_max(max.data(), nullptr, N, 0, 0);
  cpu.xent_row_sumexp(sumexp.data(), nullptr, max.data(), N, 0, 0);
  cpu.xent_target_logit(target_logit.data(), nullptr, targets.data(), N, 0, 0);
  EXPECT_TRUE(Same(dmax.read(), max)) << "xent_row_max, V_local 0";
  EXPECT_TRUE(Same(dsum.read(), sumexp)) << "xent_row_sumexp, V_local 0";
  EXPECT_TRUE(Same(dtl.read(), target_logit)) << "xent_target_logit, V_local 0";
}

// ----------------------------------------------------------------------------------- optimizers

// The table CudaBackend::update_blocks builds and uploads.
std::vector<gc::UpdateBlock> update_table(std::span<const gpt::ParameterRun> runs) {
  std::vector<gc::UpdateBlock> blocks;
  for (const auto& run : runs)
    for (int64_t start = 0; start < run.numel; start += gc::kUpdateBlockElements) {
      const int64_t numel = std::min(gc::kUpdateBlockElements, run.numel - start);
      blocks.push_back({run.offset + start, static_cast<int32_t>(numel), run.weight_decay ? 1 : 0});
    }
  return blocks;
}

TEST_F(CudaEmulation, Optimizers) {
  // Runs of one element, of exactly one block, of one element more, with gaps between them.
  const std::vector<std::vector<gpt::ParameterRun>> layouts = {
      {},
      {{0, 1, true}},
      {{0, 8192, false}},
      {{3, 5, true},
       {10, 8192, false},
       {8300, 8193, true},
       {20000, 1, false},
       {20002, 16385, true},
       {36400, 300, false}},
  };
  const int64_t total = 36800;
  for (size_t li = 0; li < layouts.size(); li++) {
    SCOPED_TRACE("layout " + std::to_string(li));
    const auto& runs = layouts[li];
    const auto table = update_table(runs);
    const auto n_blocks = static_cast<int64_t>(table.size());
    const Vec p0 = uniform(total, -1.0f, 1.0f), m0 = uniform(total, -0.1f, 0.1f),
              v0 = uniform(total, 0.0f, 0.01f);
    {
      Vec p = p0, m = m0, v = v0, ep = p0, em = m0, ev = v0;
      Floats dp(p0), dm(m0), dv(v0);
      DeviceBuffer<gc::UpdateBlock> dtable(table);
      for (int step = 1; step <= 3; step++) {
        const Vec g = uniform(total, -1.0f, 1.0f);
        Floats dg(g);
        const auto decayed = gpt::make_adamw_step(1e-3, 0.9, 0.95, 1e-8, 0.1, step);
        const auto undecayed = gpt::make_adamw_step(1e-3, 0.9, 0.95, 1e-8, 0.0, step);
        gc::adamw_update(nullptr, dp.get(), dg.get(), dm.get(), dv.get(), dtable.get(), n_blocks,
                         decayed, undecayed);
        cpu.adamw_update(p.data(), g.data(), m.data(), v.data(), runs, decayed, undecayed);
        for (const auto& r : runs)
          for (int64_t i = r.offset; i < r.offset + r.numel; i++)
            gpt::adamw_element(ep[i], g[i], em[i], ev[i], r.weight_decay ? decayed : undecayed);
      }
      // The per-element formula bit for bit (gaps keep their values), the CPU within its FMAs.
      EXPECT_TRUE(Same(dp.read(), ep)) << "adamw param";
      EXPECT_TRUE(Same(dm.read(), em)) << "adamw exp_avg";
      EXPECT_TRUE(Same(dv.read(), ev)) << "adamw exp_avg_sq";
      EXPECT_TRUE(Close(dp.read(), p, 1e-6)) << "adamw param against the CPU";
      EXPECT_TRUE(Close(dm.read(), m, 1e-6)) << "adamw exp_avg against the CPU";
      EXPECT_TRUE(Close(dv.read(), v, 1e-6)) << "adamw exp_avg_sq against the CPU";
    }
    for (bool with_buffer : {false, true}) {
      SCOPED_TRACE(with_buffer ? "sgd with momentum" : "sgd without momentum");
      Vec p = p0, buf = m0, ep = p0, ebuf = m0;
      Floats dp(p0), dbuf(m0);
      DeviceBuffer<gc::UpdateBlock> dtable(table);
      for (int step = 1; step <= 3; step++) {
        const Vec g = uniform(total, -1.0f, 1.0f);
        Floats dg(g);
        const float momentum = with_buffer ? 0.9f : 0.0f;
        const gpt::SgdStep decayed{0.05f, momentum, 0.01f, step == 1};
        const gpt::SgdStep undecayed{0.05f, momentum, 0.0f, step == 1};
        gc::sgd_update(nullptr, dp.get(), dg.get(), with_buffer ? dbuf.get() : nullptr,
                       dtable.get(), n_blocks, decayed, undecayed);
        cpu.sgd_update(p.data(), g.data(), with_buffer ? buf.data() : nullptr, runs, decayed,
                       undecayed);
        for (const auto& r : runs)
          for (int64_t i = r.offset; i < r.offset + r.numel; i++) {
            float unused = 0.0f;
            gpt::sgd_element(ep[i], g[i], with_buffer ? ebuf[i] : unused,
                             r.weight_decay ? decayed : undecayed);
          }
      }
      EXPECT_TRUE(Same(dp.read(), ep)) << "sgd param";
      EXPECT_TRUE(Close(dp.read(), p, 1e-6)) << "sgd param against the CPU";
      EXPECT_TRUE(Same(dbuf.read(), with_buffer ? ebuf : m0)) << "sgd momentum buffer";
    }
  }
}

// ------------------------------------------------------------------------------------ attention

// Where q, k and v live: packed in one buffer, each row [q of NH heads | k of NKV | v of NKV |
// pad] (GPT-2's fused c_attn output when NKV = NH and pad = 0), or in three buffers whose rows
// are pad floats longer than their heads.
struct AttentionLayout {
  gpt::AttentionShape s;
  bool packed;

  AttentionLayout(int64_t B, int64_t T, int64_t NH, int64_t NKV, int64_t HS, bool packed_qkv,
                  int64_t pad)
      : s{B, T, NH, NKV, HS, 0, 0}, packed(packed_qkv) {
    s.q_stride = packed ? (NH + 2 * NKV) * HS + pad : NH * HS + pad;
    s.kv_stride = packed ? s.q_stride : NKV * HS + pad;
  }
  int64_t q_floats() const { return s.B * s.T * s.q_stride; }
  int64_t kv_floats() const { return packed ? 0 : s.B * s.T * s.kv_stride; }
  int64_t k_offset() const { return packed ? s.NH * s.HS : 0; }
  int64_t v_offset() const { return packed ? (s.NH + s.NKV) * s.HS : 0; }
  int64_t out_floats() const { return s.B * s.T * s.NH * s.HS; }
  int64_t stat_floats() const { return s.B * s.NH * s.T; }
  std::string tag() const {
    return shape({{"B", s.B},
                  {"T", s.T},
                  {"NH", s.NH},
                  {"NKV", s.NKV},
                  {"HS", s.HS},
                  {"q_stride", s.q_stride},
                  {"kv_stride", s.kv_stride},
                  {"packed", packed}});
  }
};

// q, k and v (packed: all in q) or their gradients.
struct Qkv {
  Vec q, k, v;
};

// Inputs of the layout, queries scaled by q_std (larger: sharper softmax rows). Pads are NaN, so
// that a kernel reading one shows.
Qkv attention_inputs(const AttentionLayout& l, float q_std) {
  Qkv in{normal(l.q_floats(), 1.0f), normal(l.kv_floats(), 1.0f), normal(l.kv_floats(), 1.0f)};
  const int64_t q_end = l.s.NH * l.s.HS, kv_end = l.packed ? q_end + 2 * l.s.NKV * l.s.HS : 0;
  for (int64_t i = 0; i < l.q_floats(); i++) {
    const int64_t col = i % l.s.q_stride;
    if (col < q_end) in.q[i] *= q_std;
    if (col >= std::max(q_end, kv_end)) in.q[i] = kNaN;
  }
  for (int64_t i = 0; i < l.kv_floats(); i++)
    if (i % l.s.kv_stride >= l.s.NKV * l.s.HS) in.k[i] = in.v[i] = kNaN;
  return in;
}

// Gradient buffers full of NaN: the columns no head uses must stay so.
Qkv nan_gradients(const AttentionLayout& l) {
  return {Vec(l.q_floats(), kNaN), Vec(l.kv_floats(), kNaN), Vec(l.kv_floats(), kNaN)};
}

// The q, k and v pointers of a layout's buffers (packed: all three inside q).
template <typename P>
std::array<P*, 3> qkv_pointers(const AttentionLayout& l, P* q, P* k, P* v) {
  if (l.packed) return {q, q + l.k_offset(), q + l.v_offset()};
  return {q, k, v};
}

struct AttentionResult {
  Vec out, lse, delta;
  Qkv grad;
};

AttentionResult cpu_attention(gpt::cpu::CpuBackend& cpu, const AttentionLayout& l, Qkv in,
                              const Vec& dout) {
  const auto& s = l.s;
  AttentionResult r{Vec(l.out_floats()), {}, {}, nan_gradients(l)};
  Vec att(cpu.attention_cache_floats(s.B, s.NH, s.T)),
      datt(cpu.attention_scratch_floats(s.B, s.NH, s.T));
  const auto x = qkv_pointers<const float>(l, in.q.data(), in.k.data(), in.v.data());
  const auto dx = qkv_pointers<float>(l, r.grad.q.data(), r.grad.k.data(), r.grad.v.data());
  cpu.attention_forward(r.out.data(), att.data(), x[0], x[1], x[2], s);
  cpu.attention_backward(dx[0], dx[1], dx[2], datt.data(), dout.data(), r.out.data(), x[0], x[1],
                         x[2], att.data(), s);
  return r;
}

AttentionResult emulated_attention(const AttentionLayout& l, const Qkv& in, const Vec& dout,
                                   bool bf16) {
  const auto n_stat = static_cast<size_t>(l.stat_floats());
  const Qkv nan = nan_gradients(l);
  Floats q(in.q), k(in.k), v(in.v), ddout(dout), out(Vec(l.out_floats(), kNaN)),
      lse(Vec(n_stat, kNaN)), delta(Vec(n_stat, kNaN)), dq(nan.q), dk(nan.k), dv(nan.v);
  const auto x = qkv_pointers<const float>(l, q.get(), k.get(), v.get());
  const auto dx = qkv_pointers<float>(l, dq.get(), dk.get(), dv.get());
  gc::attention_forward(nullptr, out.get(), lse.get(), x[0], x[1], x[2], l.s, bf16);
  gc::attention_backward(nullptr, dx[0], dx[1], dx[2], delta.get(), ddout.get(), out.get(), x[0],
                         x[1], x[2], lse.get(), l.s, bf16);
  return {out.read(), lse.read(), delta.read(), {dq.read(), dk.read(), dv.read()}};
}

// lse and delta against double-precision sums of the same inputs.
void check_attention_statistics(const AttentionLayout& l, const Qkv& in, const Vec& dout,
                                const AttentionResult& got) {
  const auto& s = l.s;
  const int64_t C = s.NH * s.HS, group = s.NH / s.NKV;
  const float* kbase = l.packed ? in.q.data() + l.k_offset() : in.k.data();
  const double scale = 1.0 / std::sqrt(static_cast<double>(static_cast<float>(s.HS)));
  Vec lse(got.lse.size()), delta(got.delta.size());
  for (int64_t b = 0; b < s.B; b++)
    for (int64_t h = 0; h < s.NH; h++)
      for (int64_t i = 0; i < s.T; i++) {
        const float* q = &in.q[(b * s.T + i) * s.q_stride + h * s.HS];
        std::vector<double> scores(static_cast<size_t>(i + 1));
        for (int64_t j = 0; j <= i; j++) {
          const float* k = kbase + (b * s.T + j) * s.kv_stride + h / group * s.HS;
          double dot = 0.0;
          for (int64_t d = 0; d < s.HS; d++) dot += double{q[d]} * k[d];
          scores[j] = dot * scale;
        }
        const double m = *std::max_element(scores.begin(), scores.end());
        double sum = 0.0;
        for (double x : scores) sum += std::exp(x - m);
        double dot = 0.0;
        for (int64_t d = 0; d < s.HS; d++)
          dot += double{dout[(b * s.T + i) * C + h * s.HS + d]} *
                 got.out[(b * s.T + i) * C + h * s.HS + d];
        lse[(b * s.NH + h) * s.T + i] = static_cast<float>(m + std::log(sum));
        delta[(b * s.NH + h) * s.T + i] = static_cast<float>(dot);
      }
  EXPECT_TRUE(Close(got.lse, lse, 1e-5)) << "attention_forward lse";
  EXPECT_TRUE(Close(got.delta, delta, 1e-5)) << "attention_backward delta";
}

// The emulated kernels in fp32 against the CPU to float rounding, with lse and delta; in bf16
// within bf16 rounding of the fp32 CPU, and against the CPU's own bf16 precision (which rounds
// the same operands) closer: 1.4-3.3e-3 by norm on these shapes against 2.4-7.1e-3 from fp32.
// The two differ where the probabilities are rounded (the CPU rounds them normalised, the fused
// kernel before its running rescaling and division), not in dv's operands (1e-7 to 1e-5).
void check_attention(gpt::cpu::CpuBackend& cpu, gpt::cpu::CpuBackend& cpu_bf16,
                     const AttentionLayout& l, float q_std) {
  SCOPED_TRACE(l.tag());
  const Qkv in = attention_inputs(l, q_std);
  const Vec dout = normal(l.out_floats(), 1.0f);
  const AttentionResult want = cpu_attention(cpu, l, in, dout);

  const AttentionResult fp32 = emulated_attention(l, in, dout, false);
  EXPECT_TRUE(Close(fp32.out, want.out, 1e-5)) << "attention_forward out";
  EXPECT_TRUE(Close(fp32.grad.q, want.grad.q, 1e-5)) << "attention_backward dq";
  EXPECT_TRUE(Close(fp32.grad.k, want.grad.k, 1e-5)) << "attention_backward dk";
  EXPECT_TRUE(Close(fp32.grad.v, want.grad.v, 1e-5)) << "attention_backward dv";
  check_attention_statistics(l, in, dout, fp32);

  const AttentionResult bf16 = emulated_attention(l, in, dout, true);
  EXPECT_TRUE(Close(bf16.out, want.out, 2e-2)) << "bf16 attention_forward out";
  EXPECT_TRUE(Close(bf16.grad.q, want.grad.q, 2e-2)) << "bf16 attention_backward dq";
  EXPECT_TRUE(Close(bf16.grad.k, want.grad.k, 2e-2)) << "bf16 attention_backward dk";
  EXPECT_TRUE(Close(bf16.grad.v, want.grad.v, 2e-2)) << "bf16 attention_backward dv";

  const AttentionResult cpu16 = cpu_attention(cpu_bf16, l, in, dout);
  EXPECT_TRUE(Close(bf16.out, cpu16.out, 5e-3)) << "bf16 attention_forward against the CPU's";
  EXPECT_TRUE(Close(bf16.grad.q, cpu16.grad.q, 5e-3)) << "bf16 dq against the CPU's";
  EXPECT_TRUE(Close(bf16.grad.k, cpu16.grad.k, 5e-3)) << "bf16 dk against the CPU's";
  EXPECT_TRUE(Close(bf16.grad.v, cpu16.grad.v, 5e-3)) << "bf16 dv against the CPU's";
}

// GPT-2's fused qkv (NKV = NH, packed, no pad).
TEST_F(CudaEmulation, Attention) {
  struct Shape {
    int64_t B, T, NH, HS;
    float q_std;  // larger: sharper softmax rows
  };
  // Every padded head size of the dispatch (16, 32, 64, 128, 256) and odd ones inside them; T of
  // one row, below, at and past the tile sizes (64 rows, 64 or fewer columns), and long rows.
  const Shape shapes[] = {
      {1, 1, 1, 1, 1.0f},    {1, 1, 1, 64, 1.0f},    {2, 3, 2, 4, 1.0f},     {2, 70, 3, 8, 1.0f},
      {1, 64, 2, 16, 3.0f},  {3, 17, 1, 5, 1.0f},    {2, 9, 3, 1, 1.0f},     {1, 31, 2, 17, 1.0f},
      {2, 65, 2, 32, 1.0f},  {1, 96, 1, 24, 1.0f},   {2, 257, 1, 32, 1.0f},  {1, 513, 1, 16, 2.0f},
      {1, 80, 1, 33, 2.0f},  {1, 129, 1, 48, 3.0f},  {1, 130, 2, 64, 1.0f},  {4, 40, 3, 64, 1.0f},
      {1, 200, 1, 64, 4.0f}, {1, 300, 2, 64, 2.0f},  {1, 1024, 1, 64, 2.0f}, {1, 100, 2, 100, 1.0f},
      {1, 47, 1, 128, 1.0f}, {1, 190, 1, 128, 3.0f}, {1, 33, 2, 200, 2.0f},  {1, 50, 1, 256, 1.0f},
      {1, 150, 1, 256, 1.0f}};
  for (const Shape& s : shapes)
    check_attention(cpu, cpu_bf16, AttentionLayout(s.B, s.T, s.NH, s.NH, s.HS, true, 0), s.q_std);
  // Nothing to compute: no launch, no access.
  emu::clear_launches();
  gc::attention_forward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                        gpt::fused_qkv_shape(0, 5, 2, 8), false);
  gc::attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                         nullptr, nullptr, nullptr, gpt::fused_qkv_shape(3, 0, 2, 8), false);
  EXPECT_TRUE(emu::launches().empty());
}

// Grouped-query: NH/NKV query heads per kv head (dk and dv summed over the group), q, k and v in
// three strided buffers or packed in one with a pad; groups of 2 and 4 and one kv head for all
// (multi-query), head sizes of three dispatch widths, T across the dk/dv kernel's key tiles.
TEST_F(CudaEmulation, AttentionGroupedQuery) {
  struct Shape {
    int64_t B, T, NH, NKV, HS;
    bool packed;
    int64_t pad;
  };
  const Shape shapes[] = {{2, 9, 4, 2, 8, false, 3},  {1, 70, 4, 1, 16, false, 0},
                          {2, 33, 4, 2, 32, true, 5}, {1, 65, 6, 3, 17, false, 1},
                          {1, 40, 4, 1, 64, true, 0}, {1, 20, 2, 1, 128, false, 4}};
  for (const Shape& s : shapes)
    check_attention(cpu, cpu_bf16, AttentionLayout(s.B, s.T, s.NH, s.NKV, s.HS, s.packed, s.pad),
                    1.5f);
  EXPECT_THROW(gc::check_attention_shape(AttentionLayout(1, 4, 4, 3, 8, false, 0).s, "test"),
               std::exception)
      << "NKV must divide NH";
}

// ---------------------------------------------------------------------------- generation, serving

// A paged key/value cache: sequences of the given lengths, their blocks scattered over the pool
// in a random order (never contiguous and ascending by construction, with two blocks no sequence
// owns), and rows (sequence, position), each storing its key and value at the position and
// attending over positions 0..position of its sequence. Table entries past a sequence's blocks
// name the block one past the pool, where the pools' buffers end at an inaccessible page.
struct PagedCache {
  int64_t block_tokens = 0, num_blocks = 0, max_blocks = 0;
  std::vector<std::vector<int32_t>> sequence_blocks;
  std::vector<int32_t> tables, slots, lengths;  // per row
};

PagedCache paged_cache(const std::vector<int64_t>& sequence_lengths,
                       const std::vector<std::pair<int, int64_t>>& rows, int64_t block_tokens) {
  PagedCache c;
  c.block_tokens = block_tokens;
  for (int64_t length : sequence_lengths) {
    const int64_t blocks = (length + block_tokens - 1) / block_tokens;
    c.num_blocks += blocks;
    c.max_blocks = std::max(c.max_blocks, blocks + 1);
  }
  c.num_blocks += 2;
  std::vector<int32_t> order(static_cast<size_t>(c.num_blocks));
  for (size_t i = 0; i < order.size(); i++) order[i] = static_cast<int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  size_t next = 0;
  for (int64_t length : sequence_lengths) {
    std::vector<int32_t> blocks;
    for (int64_t p = 0; p < length; p += block_tokens) blocks.push_back(order[next++]);
    c.sequence_blocks.push_back(blocks);
  }
  for (const auto& [sequence, position] : rows) {
    std::vector<int32_t> table = c.sequence_blocks[static_cast<size_t>(sequence)];
    table.resize(static_cast<size_t>(c.max_blocks), static_cast<int32_t>(c.num_blocks));
    c.tables.insert(c.tables.end(), table.begin(), table.end());
    c.slots.push_back(
        static_cast<int32_t>(table[static_cast<size_t>(position / block_tokens)] * block_tokens +
                             position % block_tokens));
    c.lengths.push_back(static_cast<int32_t>(position + 1));
  }
  return c;
}

// Pools (num_blocks, NKV, block_tokens, HS): random at the sequences' positions, NaN everywhere
// else and at the rows' own slots (which the store must write).
std::pair<Vec, Vec> paged_pools(const PagedCache& c, const gpt::AttentionShape& s,
                                const std::vector<int64_t>& sequence_lengths) {
  const int64_t n = c.num_blocks * s.NKV * c.block_tokens * s.HS;
  Vec k(static_cast<size_t>(n), kNaN), v = k;
  const Vec rk = normal(n, 1.0f), rv = normal(n, 1.0f);
  for (size_t seq = 0; seq < sequence_lengths.size(); seq++)
    for (int64_t p = 0; p < sequence_lengths[seq]; p++)
      for (int64_t g = 0; g < s.NKV; g++) {
        const int64_t block = c.sequence_blocks[seq][static_cast<size_t>(p / c.block_tokens)];
        const int64_t at = ((block * s.NKV + g) * c.block_tokens + p % c.block_tokens) * s.HS;
        std::copy_n(rk.begin() + at, s.HS, k.begin() + at);
        std::copy_n(rv.begin() + at, s.HS, v.begin() + at);
      }
  for (int32_t slot : c.slots)
    for (int64_t g = 0; g < s.NKV; g++) {
      const int64_t at =
          ((slot / c.block_tokens * s.NKV + g) * c.block_tokens + slot % c.block_tokens) * s.HS;
      std::fill_n(k.begin() + at, s.HS, kNaN);
      std::fill_n(v.begin() + at, s.HS, kNaN);
    }
  return {k, v};
}

// Rows of different sequences at different positions (two rows of one sequence in some cases),
// blocks scattered: the store bit for bit, the attention within 1e-5 of the CPU backend's, and
// each row decoded alone with the same bits as among the others. NKV = NH from GPT-2's fused row;
// NKV < NH (grouped and multi-query) from separate strided q, k and v rows or a padded packed row.
TEST_F(CudaEmulation, PagedAttention) {
  struct Case {
    int64_t NH, NKV, HS, block_tokens;
    bool packed;
    int64_t pad;
    std::vector<int64_t> sequences;
    std::vector<std::pair<int, int64_t>> rows;
  };
  const Case cases[] = {{1, 1, 1, 2, true, 0, {1}, {{0, 0}}},
                        {3, 3, 4, 4, true, 0, {5, 9, 1}, {{0, 4}, {1, 8}, {2, 0}}},
                        {2, 2, 64, 16, true, 0, {300, 17}, {{0, 299}, {1, 16}, {0, 150}}},
                        {4, 2, 8, 3, false, 3, {7, 12, 2}, {{0, 6}, {1, 11}, {2, 1}, {1, 3}}},
                        {4, 1, 32, 8, false, 0, {70, 66}, {{1, 65}, {0, 69}}},
                        {6, 3, 5, 1, false, 1, {12, 4}, {{0, 11}, {1, 3}}},
                        {2, 2, 256, 32, true, 0, {40}, {{0, 32}}},
                        {1, 1, 17, 5, true, 0, {200, 3}, {{0, 128}, {1, 2}, {0, 199}}},
                        {4, 2, 16, 16, true, 5, {33, 16}, {{0, 32}, {1, 15}}}};
  for (const Case& k : cases) {
    const int64_t R = static_cast<int64_t>(k.rows.size());
    // The rows' q, k and v: the layout's buffers of B = R, T = 1; the call's T is block_tokens.
    const AttentionLayout rows_layout(R, 1, k.NH, k.NKV, k.HS, k.packed, k.pad);
    AttentionLayout l = rows_layout;
    l.s.T = k.block_tokens;
    SCOPED_TRACE(l.tag());
    const PagedCache c = paged_cache(k.sequences, k.rows, k.block_tokens);
    const auto [k0, v0] = paged_pools(c, l.s, k.sequences);
    const Qkv in = attention_inputs(rows_layout, 1.0f);
    const int64_t positions = c.max_blocks * c.block_tokens;
    Vec kp = k0, vp = v0, out(static_cast<size_t>(R * k.NH * k.HS), kNaN),
        scores(static_cast<size_t>(cpu.paged_attention_floats(R, k.NH, positions)), kNaN);
    const auto x = qkv_pointers<const float>(l, in.q.data(), in.k.data(), in.v.data());
    cpu.paged_kv_store(kp.data(), vp.data(), x[1], x[2], l.s, c.slots.data());
    cpu.paged_attention_decode(out.data(), scores.data(), x[0], kp.data(), vp.data(), l.s,
                               c.tables.data(), c.max_blocks, c.lengths.data());

    Floats d_q(in.q), d_k(in.k), d_v(in.v), k_pool(k0), v_pool(v0), d_out(Vec(out.size(), kNaN)),
        d_scores(Vec(scores.size(), kNaN));
    DeviceBuffer<int32_t> d_slots(c.slots), d_tables(c.tables), d_lengths(c.lengths);
    const auto dx = qkv_pointers<const float>(l, d_q.get(), d_k.get(), d_v.get());
    gc::paged_kv_store(nullptr, k_pool.get(), v_pool.get(), dx[1], dx[2], l.s, d_slots.get());
    EXPECT_TRUE(Same(k_pool.read(), kp)) << "paged_kv_store keys";
    EXPECT_TRUE(Same(v_pool.read(), vp)) << "paged_kv_store values";
    {
      // One block whose grid-stride loop covers every row.
      GridCap cap(1);
      Floats k_once(k0), v_once(v0);
      gc::paged_kv_store(nullptr, k_once.get(), v_once.get(), dx[1], dx[2], l.s, d_slots.get());
      EXPECT_TRUE(Same(k_once.read(), kp)) << "paged_kv_store keys, one block";
      EXPECT_TRUE(Same(v_once.read(), vp)) << "paged_kv_store values, one block";
    }
    gc::paged_attention_decode(nullptr, d_out.get(), d_scores.get(), dx[0], k_pool.get(),
                               v_pool.get(), l.s, d_tables.get(), c.max_blocks, d_lengths.get());
    const Vec got = d_out.read();
    EXPECT_TRUE(Close(got, out, 1e-5)) << "paged_attention_decode";

    // Each row alone (R = 1, its q, table and length), in a scratch of one row's size.
    const int64_t C = k.NH * k.HS;
    for (int64_t r = 0; r < R; r++) {
      gpt::AttentionShape one = l.s;
      one.B = 1;
      Floats row_out(Vec(static_cast<size_t>(C), kNaN)),
          row_scores(Vec(static_cast<size_t>(k.NH * positions), kNaN));
      gc::paged_attention_decode(nullptr, row_out.get(), row_scores.get(), dx[0] + r * l.s.q_stride,
                                 k_pool.get(), v_pool.get(), one, d_tables.get() + r * c.max_blocks,
                                 c.max_blocks, d_lengths.get() + r);
      EXPECT_TRUE(Same(row_out.read(), Vec(got.begin() + r * C, got.begin() + (r + 1) * C)))
          << "row " << r << " decoded alone";
    }
  }
}

// What the CPU backend rejects in the device arrays the host cannot read: a negative slot stores
// nothing, a length of 0 or past the table gives its row NaN, and the other rows are unaffected.
TEST_F(CudaEmulation, PagedAttentionBadDeviceEntries) {
  AttentionLayout l(3, 1, 2, 2, 8, false, 0);  // the rows' q, k and v (T = 1)
  const Qkv in = attention_inputs(l, 1.0f);
  l.s.T = 4;  // block_tokens
  const PagedCache c = paged_cache({6, 3, 2}, {{0, 5}, {1, 2}, {2, 1}}, 4);
  const auto [k0, v0] = paged_pools(c, l.s, {6, 3, 2});
  std::vector<int32_t> slots = c.slots, lengths = c.lengths;
  slots[0] = -1;
  lengths[0] = 0;
  lengths[2] = static_cast<int32_t>(c.max_blocks * 4 + 1);
  const int64_t positions = c.max_blocks * 4;
  Floats d_q(in.q), d_k(in.k), d_v(in.v), k_pool(k0), v_pool(v0), out(Vec(3 * 16, 1.0f)),
      scores(Vec(static_cast<size_t>(cpu.paged_attention_floats(3, 2, positions)), kNaN));
  DeviceBuffer<int32_t> d_slots(slots), d_tables(c.tables), d_lengths(lengths);
  gc::paged_kv_store(nullptr, k_pool.get(), v_pool.get(), d_k.get(), d_v.get(), l.s, d_slots.get());
  // The CPU stores rows 1 and 2 only.
  Vec want_k = k0, want_v = v0;
  gpt::AttentionShape two = l.s;
  two.B = 2;
  cpu.paged_kv_store(want_k.data(), want_v.data(), in.k.data() + l.s.kv_stride,
                     in.v.data() + l.s.kv_stride, two, c.slots.data() + 1);
  EXPECT_TRUE(Same(k_pool.read(), want_k)) << "keys after a negative slot";
  EXPECT_TRUE(Same(v_pool.read(), want_v)) << "values after a negative slot";
  gc::paged_attention_decode(nullptr, out.get(), scores.get(), d_q.get(), k_pool.get(),
                             v_pool.get(), l.s, d_tables.get(), c.max_blocks, d_lengths.get());
  const Vec got = out.read();
  for (int i = 0; i < 16; i++) {
    EXPECT_TRUE(std::isnan(got[i])) << "length 0, [" << i << "]";
    EXPECT_TRUE(std::isfinite(got[16 + i]) && got[16 + i] != 1.0f) << "a valid row, [" << i << "]";
    EXPECT_TRUE(std::isnan(got[32 + i])) << "length past the table, [" << i << "]";
  }
}

// The rows' product against the CPU backend's (another fixed order: within 1e-5), with and without
// bias, R across the warps' passes of 4 rows and the 64-row chunks of the grid's y, a grid shrunk
// to one block; and each row's bits the same computed alone (R = 1, from a misaligned buffer) as
// among the others: the kernel's own batch invariance.
TEST_F(CudaEmulation, MatmulForwardRows) {
  struct Shape {
    int64_t R, IC, OC;
  };
  const Shape shapes[] = {{1, 1, 1},  {1, 7, 5},     {3, 17, 9},  {5, 131, 33},  {5, 320, 8},
                          {7, 33, 3}, {64, 100, 13}, {70, 64, 9}, {2, 1000, 17}, {130, 5, 2}};
  for (const Shape& s : shapes)
    for (bool with_bias : {true, false})
      for (bool one_block : {false, true}) {
        SCOPED_TRACE(shape({{"R", s.R},
                            {"IC", s.IC},
                            {"OC", s.OC},
                            {"bias", with_bias},
                            {"one_block", one_block}}));
        const Vec inp = uniform(s.R * s.IC, -1.0f, 1.0f), w = uniform(s.OC * s.IC, -1.0f, 1.0f),
                  bias = uniform(s.OC, -1.0f, 1.0f);
        Vec want(static_cast<size_t>(s.R * s.OC));
        cpu.matmul_forward_rows(want.data(), inp.data(), w.data(),
                                with_bias ? bias.data() : nullptr, s.R, s.IC, s.OC);
        std::optional<GridCap> cap;
        if (one_block) cap.emplace(1);
        Floats d_inp(inp), d_w(w), d_bias(bias), d_out(Vec(want.size(), kNaN));
        const float* b = with_bias ? d_bias.get() : nullptr;
        gc::matmul_forward_rows(nullptr, d_out.get(), d_inp.get(), d_w.get(), b, s.R, s.IC, s.OC);
        const Vec got = d_out.read();
        EXPECT_TRUE(Close(got, want, 1e-5)) << "matmul_forward_rows";
        for (int64_t r : {int64_t{0}, s.R / 2, s.R - 1}) {
          Floats row(Vec(inp.begin() + r * s.IC, inp.begin() + (r + 1) * s.IC), true),
              row_out(Vec(static_cast<size_t>(s.OC), kNaN));
          gc::matmul_forward_rows(nullptr, row_out.get(), row.get(), d_w.get(), b, 1, s.IC, s.OC);
          EXPECT_TRUE(
              Same(row_out.read(), Vec(got.begin() + r * s.OC, got.begin() + (r + 1) * s.OC)))
              << "row " << r << " alone";
        }
      }
  // No rows: no launch, no access.
  emu::clear_launches();
  gc::matmul_forward_rows(nullptr, nullptr, nullptr, nullptr, nullptr, 0, 5, 3);
  EXPECT_TRUE(emu::launches().empty());
}

// ------------------------------------------------------------------------- thread orders, limits

// Every thread and block order gives the same bits: no kernel reads what another thread of its
// block writes without a barrier between, and none depends on the order of blocks.
TEST_F(CudaEmulation, ResultsIndependentOfThreadOrder) {
  const Vec x = uniform(9 * 100, -3.0f, 3.0f), w = uniform(100, 0.5f, 1.5f);
  const Vec logits = uniform(3 * 700, -8.0f, 8.0f), wide = uniform(300001, -1.0f, 1.0f);
  // Grouped-query, so that the dk/dv kernel's loop over a group's heads is in the check.
  const AttentionLayout layout(2, 70, 4, 2, 64, false, 0);
  const Qkv qkv = attention_inputs(layout, 1.0f);
  const Vec dout = normal(layout.out_floats(), 1.0f);
  std::vector<int32_t> tokens(300);
  for (size_t i = 0; i < tokens.size(); i++) tokens[i] = static_cast<int32_t>(i * 7 % 13);
  // Serving's kernels: the rows' product, and paged attention with 3 query heads per kv head.
  const Vec rows_in = uniform(6 * 70, -1.0f, 1.0f), rows_w = uniform(37 * 70, -1.0f, 1.0f);
  AttentionLayout paged(3, 1, 6, 2, 16, false, 0);
  const Qkv paged_rows = attention_inputs(paged, 1.0f);
  paged.s.T = 8;
  const PagedCache cache = paged_cache({150, 9, 40}, {{0, 149}, {1, 8}, {2, 20}}, 8);
  const auto [paged_k, paged_v] = paged_pools(cache, paged.s, {150, 9, 40});
  auto run = [&] {
    std::vector<Vec> r;
    Floats ln(Vec(x.size(), kNaN)), mean(Vec(9, kNaN)), rstd(Vec(9, kNaN)), dx(x), dw(w);
    gc::layernorm_forward(nullptr, ln.get(), mean.get(), rstd.get(), dx.get(), dw.get(), dw.get(),
                          9, 100);
    Floats dlog(logits), rmax(Vec(3, kNaN)), rsum(Vec(3, kNaN));
    gc::xent_row_max(nullptr, rmax.get(), dlog.get(), 3, 700, 650);
    gc::xent_row_sumexp(nullptr, rsum.get(), dlog.get(), rmax.get(), 3, 700, 650);
    Floats dwide(wide);
    auto work = scratch(gc::full_sum_scratch_bytes());
    DeviceBuffer<double> total(std::vector<double>{0.0});
    gc::sum(nullptr, total.get(), dwide.get(), 300001, work.get());
    Floats dwte(Vec(13 * 3, 0.0f)), demb(Vec(300 * 3, 1.5f));
    DeviceBuffer<int32_t> dt(tokens);
    auto sort_work = scratch(gc::embedding_backward_scratch_bytes(300));
    gc::embedding_backward(nullptr, dwte.get(), demb.get(), dt.get(), 300, 3, 0, 13,
                           sort_work.get());
    const auto attention = emulated_attention(layout, qkv, dout, false);
    const auto total_bits = static_cast<float>(total.read()[0]);
    Floats d_rows(rows_in), d_rows_w(rows_w), rows_out(Vec(6 * 37, kNaN));
    gc::matmul_forward_rows(nullptr, rows_out.get(), d_rows.get(), d_rows_w.get(), nullptr, 6, 70,
                            37);
    Floats pq(paged_rows.q), pk(paged_rows.k), pv(paged_rows.v), k_pool(paged_k), v_pool(paged_v),
        paged_out(Vec(3 * 6 * 16, kNaN)),
        paged_scores(Vec(static_cast<size_t>(3 * 6 * cache.max_blocks * 8), kNaN));
    DeviceBuffer<int32_t> slots(cache.slots), tables(cache.tables), lengths(cache.lengths);
    gc::paged_kv_store(nullptr, k_pool.get(), v_pool.get(), pk.get(), pv.get(), paged.s,
                       slots.get());
    gc::paged_attention_decode(nullptr, paged_out.get(), paged_scores.get(), pq.get(), k_pool.get(),
                               v_pool.get(), paged.s, tables.get(), cache.max_blocks,
                               lengths.get());
    r = {ln.read(),        mean.read(),      rstd.read(),     rmax.read(),      rsum.read(),
         {total_bits},     dwte.read(),      attention.out,   attention.lse,    attention.grad.q,
         attention.grad.k, attention.grad.v, rows_out.read(), paged_out.read(), k_pool.read()};
    return r;
  };
  const auto forward = run();
  for (auto order : {emu::Order::kReverse, emu::Order::kRandom}) {
    emu::set_order(order, 7);
    const auto other = run();
    for (size_t i = 0; i < forward.size(); i++)
      EXPECT_TRUE(Same(other[i], forward[i]))
          << "result " << i << " in " << (order == emu::Order::kReverse ? "reverse" : "random")
          << " order";
  }
}

// The emulator itself: each (block, thread) runs once whatever the order, shared memory reads as
// NaN until written in every block, and a butterfly of shuffles sums over the warp.
TEST_F(CudaEmulation, EmulatorSelfCheck) {
  for (auto order : {emu::Order::kForward, emu::Order::kReverse, emu::Order::kRandom}) {
    emu::set_order(order, 3);
    const dim3 grid(3, 2, 2), block(40, 3, 2);
    std::vector<int> visits(3 * 2 * 2 * 40 * 3 * 2, 0);
    Vec early(visits.size(), 0.0f), late(visits.size(), 0.0f), sums(visits.size(), 0.0f);
    emu::launch(grid, block, [&] {
      static auto& shared = emu::shared_storage<float[240]>();
      emu::shared_array(shared, sizeof shared);
      const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
      const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
      const size_t id = b * 240 + t;
      visits[id]++;
      // Unsynchronised, so only the first thread to run is sure to see another's slot unwritten.
      early[id] = shared[(t + 1) % 240];
      shared[t] = static_cast<float>(t);
      __syncthreads();
      late[id] = shared[(t + 1) % 240];
      float v = static_cast<float>(t % 32);
      if (t < 224)  // the last warp is partial (240 threads): it sits out the shuffles
        for (int lane_mask = 16; lane_mask > 0; lane_mask /= 2)
          v += __shfl_xor_sync(0xffffffffu, v, lane_mask);
      sums[id] = v;
    });
    int wrong_visits = 0, seen_poison = 0, wrong_late = 0, wrong_sums = 0;
    for (size_t id = 0; id < visits.size(); id++) {
      const unsigned t = id % 240;
      wrong_visits += visits[id] != 1;
      seen_poison += std::isnan(early[id]);
      wrong_late += late[id] != static_cast<float>((t + 1) % 240);
      wrong_sums += t < 224 && sums[id] != 496.0f;
    }
    EXPECT_EQ(wrong_visits, 0);
    EXPECT_GE(seen_poison, 12) << "every block starts with poisoned shared memory";
    EXPECT_EQ(wrong_late, 0);
    EXPECT_EQ(wrong_sums, 0);
  }
}

}  // namespace
