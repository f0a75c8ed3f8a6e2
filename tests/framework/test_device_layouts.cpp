// Unit tests of the CUDA backend's host-side logic that needs no GPU: the arena's block
// bookkeeping (BlockAllocator) and the column-major GEMM shapes of the three nn.Linear products
// (gemm_layout.h), checked by a naive column-major GEMM against the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "framework/block_allocator.h"
#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"
#include "framework/gemm_layout.h"

namespace {

using gpt::BlockAllocator;
using gpt::GemmShape;
using Vec = std::vector<float>;

TEST(BlockAllocator, AlignsPlacesFirstFitAndCounts) {
  BlockAllocator a(4096, 256);
  EXPECT_EQ(a.allocate(1), 0u);
  EXPECT_EQ(a.allocate(256), 256u);
  EXPECT_EQ(a.allocate(257), 512u);  // two blocks
  EXPECT_EQ(a.in_use(), 1024u);
  EXPECT_EQ(a.allocate(4096 - 1024 + 1), std::nullopt);  // one byte too many
  EXPECT_EQ(a.allocate(4096 - 1024), 1024u);             // exactly the rest
  EXPECT_EQ(a.in_use(), 4096u);
  EXPECT_EQ(a.peak(), 4096u);
  EXPECT_EQ(a.allocate(1), std::nullopt);
}

TEST(BlockAllocator, FreedNeighboursMergeSoLargeBlocksFitAgain) {
  BlockAllocator a(1024, 256);
  const size_t b0 = *a.allocate(256), b1 = *a.allocate(256), b2 = *a.allocate(256),
               b3 = *a.allocate(256);
  a.release(b1);
  a.release(b3);
  EXPECT_EQ(a.free_pieces(), 2u);
  EXPECT_EQ(a.allocate(512), std::nullopt);  // 512 free, but in two pieces
  a.release(b2);                             // joins both neighbours
  EXPECT_EQ(a.free_pieces(), 1u);
  EXPECT_EQ(a.allocate(768), 256u);
  a.release(b0);
  a.release(256);
  EXPECT_EQ(a.in_use(), 0u);
  EXPECT_EQ(a.free_pieces(), 1u);
  EXPECT_EQ(a.allocate(1024), 0u);
}

TEST(BlockAllocator, RejectsForeignAndDoubleReleases) {
  BlockAllocator a(1024, 256);
  const size_t b = *a.allocate(100);
  EXPECT_THROW(a.release(b + 4), gpt::Error);
  a.release(b);
  EXPECT_THROW(a.release(b), gpt::Error);
  EXPECT_THROW(BlockAllocator(1024, 100), gpt::Error);  // not a power of two
}

TEST(BlockAllocator, RandomTrafficKeepsTheBooksExact) {
  BlockAllocator a(1 << 20, 256);
  std::mt19937 rng(5);
  std::vector<std::pair<size_t, size_t>> live;  // offset, rounded size
  size_t expect_in_use = 0;
  for (int i = 0; i < 5000; ++i) {
    if (live.empty() || rng() % 3 != 0) {
      const size_t bytes = 1 + rng() % 20000;
      const std::optional<size_t> offset = a.allocate(bytes);
      if (!offset) continue;
      for (const auto& [o, s] : live) {  // never overlaps a live block
        ASSERT_TRUE(*offset + a.rounded(bytes) <= o || o + s <= *offset);
      }
      EXPECT_EQ(*offset % 256, 0u);
      live.emplace_back(*offset, a.rounded(bytes));
      expect_in_use += a.rounded(bytes);
    } else {
      const size_t pick = rng() % live.size();
      a.release(live[pick].first);
      expect_in_use -= live[pick].second;
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
    }
    ASSERT_EQ(a.in_use(), expect_in_use);
  }
  for (const auto& [o, s] : live) a.release(o);
  EXPECT_EQ(a.free_pieces(), 1u);
  EXPECT_EQ(a.allocate(1 << 20), 0u);
}

// D (m x n) = op(A) op(B) + beta D, column-major, in double: BLAS's definition.
void column_major_gemm(const GemmShape& s, const Vec& A, const Vec& B, Vec& D, float beta) {
  for (int64_t j = 0; j < s.n; ++j) {
    for (int64_t i = 0; i < s.m; ++i) {
      double acc = 0.0;
      for (int64_t p = 0; p < s.k; ++p) {
        const double a = s.transpose_a ? A[p + i * s.lda] : A[i + p * s.lda];
        const double b = s.transpose_b ? B[j + p * s.ldb] : B[p + j * s.ldb];
        acc += a * b;
      }
      float& d = D[i + j * s.ldd];
      d = static_cast<float>(acc + static_cast<double>(beta) * d);
    }
  }
}

void expect_near_all(const Vec& got, const Vec& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * (1.0 + std::fabs(want[i]))) << what << " at " << i;
}

TEST(GemmLayout, TheThreeLinearProductsMatchTheCpuBackend) {
  gpt::cpu::CpuBackend cpu(1);
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  auto randn = [&](int64_t n) {
    Vec v(static_cast<size_t>(n));
    for (float& x : v) x = normal(rng);
    return v;
  };
  for (auto [N, IC, OC] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {7, 5, 3}, {33, 17, 64}, {4, 96, 19}}) {
    SCOPED_TRACE("N " + std::to_string(N) + " IC " + std::to_string(IC) + " OC " +
                 std::to_string(OC));
    const Vec inp = randn(N * IC), weight = randn(OC * IC), dout = randn(N * OC);
    const GemmShape fwd = gpt::linear_forward_gemm(N, IC, OC);
    EXPECT_EQ(gpt::gemm_a_elements(fwd), OC * IC);
    EXPECT_EQ(gpt::gemm_b_elements(fwd), N * IC);
    Vec out(static_cast<size_t>(N * OC)), want(out.size());
    column_major_gemm(fwd, weight, inp, out, 0.0f);
    cpu.matmul_forward(want.data(), inp.data(), weight.data(), nullptr, N, IC, OC);
    expect_near_all(out, want, "forward");

    const GemmShape bin = gpt::linear_backward_input_gemm(N, IC, OC);
    EXPECT_EQ(gpt::gemm_a_elements(bin), OC * IC);
    EXPECT_EQ(gpt::gemm_b_elements(bin), N * OC);
    Vec dinp(static_cast<size_t>(N * IC), 0.5f), want_dinp = dinp;
    column_major_gemm(bin, weight, dout, dinp, 1.0f);  // the accumulating form
    cpu.matmul_backward_input(want_dinp.data(), dout.data(), weight.data(), N, IC, OC, true);
    expect_near_all(dinp, want_dinp, "backward input");

    const GemmShape bw = gpt::linear_backward_weight_gemm(N, IC, OC);
    EXPECT_EQ(gpt::gemm_a_elements(bw), N * IC);
    EXPECT_EQ(gpt::gemm_b_elements(bw), N * OC);
    Vec dweight(static_cast<size_t>(OC * IC), -0.25f), want_dweight = dweight;
    column_major_gemm(bw, inp, dout, dweight, 1.0f);
    cpu.matmul_backward_weight(want_dweight.data(), nullptr, dout.data(), inp.data(), N, IC, OC);
    expect_near_all(dweight, want_dweight, "backward weight");
  }
}

}  // namespace
