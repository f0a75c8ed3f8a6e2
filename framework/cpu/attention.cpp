// Causal self-attention on the CPU. Per (batch, head) the products Q.K^T, att.V and the four
// backward products are dnnl_sgemm calls reading q, k and v in place inside qkv (leading dimension
// 3*NH*HS). Rows are processed in blocks so that only the block lower triangle of each T x T
// product is computed: causal masking then saves close to half the FLOPs at T = 256.
// Generation's decode attends one query row per (batch, head) over a key/value cache with plain
// vectorised loops: a 1 x length product is too small for sgemm's set-up to pay.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"
#include "framework/cpu/sgemm.h"

namespace gpt::cpu {

namespace {

// Rows per block of the causal products: large enough for sgemm to run near peak, small enough
// that the skipped upper blocks are a real saving.
constexpr int64_t kRowBlock = 64;

// Pointers and strides of one (batch, head) slice.
struct HeadView {
  int64_t T, HS, C, C3;  // C = NH*HS (row stride of out/dout), C3 = 3*C (row stride of qkv)
  int64_t q_offset;      // offset of this head's q in qkv (and dqkv); k at +C, v at +2C
  int64_t o_offset;      // offset of this head in out (and dout)
  int64_t a_offset;      // offset of this head's T x T block in att (and datt)
};

HeadView head_view(int64_t bh, int64_t T, int64_t NH, int64_t HS) {
  const int64_t b = bh / NH, h = bh % NH, C = NH * HS;
  return HeadView{T, HS, C, 3 * C, b * T * 3 * C + h * HS, b * T * C + h * HS, bh * T * T};
}

// Row t of the scaled scores becomes softmax over columns 0..t; columns after t become 0.
void causal_softmax_row(float* row, int64_t t, int64_t T) {
  float m = row[0];
#pragma omp simd reduction(max : m)
  for (int64_t j = 1; j <= t; j++) m = std::max(m, row[j]);
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j <= t; j++) {
    row[j] = fast_expf(row[j] - m);
    s += row[j];
  }
  const float inv = 1.0f / s;
  for (int64_t j = 0; j <= t; j++) row[j] *= inv;
  for (int64_t j = t + 1; j < T; j++) row[j] = 0.0f;
}

void head_forward(float* out, float* att, const float* qkv, const HeadView& v, float scale) {
  const float* q = qkv + v.q_offset;
  const float* k = q + v.C;
  const float* val = q + 2 * v.C;
  float* a = att + v.a_offset;
  float* o = out + v.o_offset;
  for (int64_t r0 = 0; r0 < v.T; r0 += kRowBlock) {
    const int64_t r1 = std::min(r0 + kRowBlock, v.T), rows = r1 - r0;
    // Scores of rows r0..r1 against keys 0..r1 only: later keys are masked.
    sgemm('N', 'T', rows, r1, v.HS, scale, q + r0 * v.C3, v.C3, k, v.C3, 0.0f, a + r0 * v.T, v.T);
    for (int64_t t = r0; t < r1; t++) causal_softmax_row(a + t * v.T, t, v.T);
    sgemm('N', 'N', rows, v.HS, r1, 1.0f, a + r0 * v.T, v.T, val, v.C3, 0.0f, o + r0 * v.C, v.C);
  }
}

void head_backward(float* dqkv, float* datt, const float* dout, const float* qkv, const float* att,
                   const HeadView& v, float scale) {
  const float* q = qkv + v.q_offset;
  const float* k = q + v.C;
  const float* val = q + 2 * v.C;
  float* dq = dqkv + v.q_offset;
  float* dk = dq + v.C;
  float* dv = dq + 2 * v.C;
  const float* a = att + v.a_offset;
  float* da = datt + v.a_offset;
  const float* dO = dout + v.o_offset;
  for (int64_t r0 = 0; r0 < v.T; r0 += kRowBlock) {
    const int64_t r1 = std::min(r0 + kRowBlock, v.T), rows = r1 - r0;
    // datt = dout . V^T, then in place the softmax backward datt <- att * (datt - <att, datt>).
    sgemm('N', 'T', rows, r1, v.HS, 1.0f, dO + r0 * v.C, v.C, val, v.C3, 0.0f, da + r0 * v.T, v.T);
    for (int64_t t = r0; t < r1; t++) {
      const float* arow = a + t * v.T;
      float* drow = da + t * v.T;
      float dot = 0.0f;
      for (int64_t j = 0; j <= t; j++) dot += arow[j] * drow[j];
      for (int64_t j = 0; j <= t; j++) drow[j] = arow[j] * (drow[j] - dot);
      for (int64_t j = t + 1; j < v.T; j++) drow[j] = 0.0f;  // read by the dK product below
    }
    // dQ = scale * dscores . K over the causal keys.
    sgemm('N', 'N', rows, v.HS, r1, scale, da + r0 * v.T, v.T, k, v.C3, 0.0f, dq + r0 * v.C3, v.C3);
  }
  // Key/value rows c0..c1 receive gradient only from queries c0..T-1.
  for (int64_t c0 = 0; c0 < v.T; c0 += kRowBlock) {
    const int64_t c1 = std::min(c0 + kRowBlock, v.T), cols = c1 - c0, span = v.T - c0;
    const int64_t corner = c0 * v.T + c0;
    sgemm('T', 'N', cols, v.HS, span, 1.0f, a + corner, v.T, dO + c0 * v.C, v.C, 0.0f,
          dv + c0 * v.C3, v.C3);
    sgemm('T', 'N', cols, v.HS, span, scale, da + corner, v.T, q + c0 * v.C3, v.C3, 0.0f,
          dk + c0 * v.C3, v.C3);
  }
}

// One (batch, head) of the decode: scores (length) = scale * q . K^T, their causal softmax (the
// query is the last position, so every cached key counts), out (HS) = p . V.
void head_decode(float* out, float* scores, const float* q, const float* k, const float* v,
                 int64_t HS, int64_t length, float scale) {
  for (int64_t t = 0; t < length; t++) {
    const float* key = k + t * HS;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < HS; d++) dot += q[d] * key[d];
    scores[t] = dot * scale;
  }
  causal_softmax_row(scores, length - 1, length);
  for (int64_t d = 0; d < HS; d++) out[d] = 0.0f;
  for (int64_t t = 0; t < length; t++) {
    const float p = scores[t];
    const float* value = v + t * HS;
#pragma omp simd
    for (int64_t d = 0; d < HS; d++) out[d] += p * value[d];
  }
}

// Calls f(bh) for every (b, h). With a head per thread or more: one head per thread with
// single-threaded sgemm (oneDNN runs sequentially inside a parallel region), since the per-head
// products are too small to split well across threads. With fewer heads: one after another, each
// sgemm using every thread.
template <typename F>
void for_each_head(int64_t heads, int threads, F f) {
  if (heads >= threads) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t bh = 0; bh < heads; bh++) f(bh);
  } else {
    omp_set_num_threads(threads);
    for (int64_t bh = 0; bh < heads; bh++) f(bh);
  }
}

}  // namespace

void CpuBackend::attention_kv_store(float* k_cache, float* v_cache, const float* qkv, int64_t B,
                                    int64_t rows, int64_t NH, int64_t HS, int64_t T_max,
                                    int64_t start) {
  GPT_CHECK(start >= 0 && rows >= 0 && start + rows <= T_max, "attention_kv_store of positions ["
                                                                  << start << ", " << start + rows
                                                                  << ") into a cache of " << T_max);
  const int64_t C = NH * HS;
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads_)
  for (int64_t bh = 0; bh < B * NH; bh++)
    for (int64_t r = 0; r < rows; r++) {
      const int64_t b = bh / NH, h = bh % NH;
      const float* src = qkv + (b * rows + r) * 3 * C + h * HS;
      const int64_t dst = (bh * T_max + start + r) * HS;
      std::copy(src + C, src + C + HS, k_cache + dst);
      std::copy(src + 2 * C, src + 2 * C + HS, v_cache + dst);
    }
}

void CpuBackend::attention_decode(float* out, float* scores, const float* qkv, const float* k_cache,
                                  const float* v_cache, int64_t B, int64_t NH, int64_t HS,
                                  int64_t T_max, int64_t length) {
  GPT_CHECK(length >= 1 && length <= T_max,
            "attention_decode over " << length << " positions of a cache of " << T_max);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  const int64_t C = NH * HS;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t bh = 0; bh < B * NH; bh++) {
    const int64_t b = bh / NH, h = bh % NH, cached = bh * T_max * HS;
    head_decode(out + b * C + h * HS, scores + bh * T_max, qkv + b * 3 * C + h * HS,
                k_cache + cached, v_cache + cached, HS, length, scale);
  }
}

void CpuBackend::attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T,
                                   int64_t NH, int64_t HS) {
  GPT_CHECK(B >= 0 && T > 0 && NH > 0 && HS > 0,
            "attention_forward with B=" << B << " T=" << T << " NH=" << NH << " HS=" << HS);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  for_each_head(B * NH, threads_,
                [&](int64_t bh) { head_forward(out, att, qkv, head_view(bh, T, NH, HS), scale); });
}

void CpuBackend::attention_backward(float* dqkv, float* datt, const float* dout,
                                    const float* /*out*/, const float* qkv, const float* att,
                                    int64_t B, int64_t T, int64_t NH, int64_t HS) {
  GPT_CHECK(B >= 0 && T > 0 && NH > 0 && HS > 0,
            "attention_backward with B=" << B << " T=" << T << " NH=" << NH << " HS=" << HS);
  const float scale = 1.0f / std::sqrt(static_cast<float>(HS));
  for_each_head(B * NH, threads_, [&](int64_t bh) {
    head_backward(dqkv, datt, dout, qkv, att, head_view(bh, T, NH, HS), scale);
  });
}

}  // namespace gpt::cpu
