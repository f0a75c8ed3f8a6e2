// Causal self-attention on the CPU. Per (batch, head) the products Q.K^T, att.V and the four
// backward products are dnnl_sgemm calls reading q, k and v in place inside qkv (leading dimension
// 3*NH*HS). Rows are processed in blocks so that only the block lower triangle of each T x T
// product is computed: causal masking then saves close to half the FLOPs at T = 256.
// Generation's decode attends one query row per (row, head) over the paged key/value cache with
// plain vectorised loops: a 1 x length product is too small for sgemm's set-up to pay.
// In bf16 precision every product reads bf16 operands, as CUDA's fused kernel does: q, k, v and
// dout are read from rounded copies in the operand buffers, the probabilities are rounded in the
// cache before they multiply V (so the backward also reads them rounded), and the scores'
// gradient is rounded in place before it multiplies K and Q. Decode stays float32, as on CUDA.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "framework/bf16.h"
#include "framework/check.h"
#include "framework/cpu/cpu_backend.h"
#include "framework/cpu/sgemm.h"

namespace gpt::cpu {

namespace {

// Rows per block of the causal products: large enough for sgemm to run near peak, small enough
// that the skipped upper blocks are a real saving.
constexpr int64_t kRowBlock = 64;

// Pointers and strides of one (batch, query head) slice and the (batch, kv head) it reads.
struct HeadView {
  int64_t T, HS;
  int64_t q_stride, kv_stride, o_stride;  // row strides of q (and dq), k and v (and dk, dv), out
  int64_t q_offset;                       // offset of this head's q in q (and dq)
  int64_t kv_offset;                      // offset of its kv head in k and v (and dk, dv)
  int64_t o_offset;                       // offset of this head in out (and dout)
  int64_t a_offset;                       // offset of this head's T x T block in att (and datt)
};

HeadView head_view(int64_t bh, const AttentionShape& s) {
  const int64_t b = bh / s.NH, h = bh % s.NH, g = h / (s.NH / s.NKV);
  return HeadView{s.T,
                  s.HS,
                  s.q_stride,
                  s.kv_stride,
                  s.NH * s.HS,
                  b * s.T * s.q_stride + h * s.HS,
                  b * s.T * s.kv_stride + g * s.HS,
                  b * s.T * s.NH * s.HS + h * s.HS,
                  bh * s.T * s.T};
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

void round_to_bf16_in_place(float* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; i++) x[i] = round_to_bf16(x[i]);
}

void head_forward(float* out, float* att, const float* q_all, const float* k_all,
                  const float* v_all, const HeadView& v, float scale, bool bf16) {
  const float* q = q_all + v.q_offset;
  const float* k = k_all + v.kv_offset;
  const float* val = v_all + v.kv_offset;
  float* a = att + v.a_offset;
  float* o = out + v.o_offset;
  for (int64_t r0 = 0; r0 < v.T; r0 += kRowBlock) {
    const int64_t r1 = std::min(r0 + kRowBlock, v.T), rows = r1 - r0;
    // Scores of rows r0..r1 against keys 0..r1 only: later keys are masked.
    sgemm('N', 'T', rows, r1, v.HS, scale, q + r0 * v.q_stride, v.q_stride, k, v.kv_stride, 0.0f,
          a + r0 * v.T, v.T);
    for (int64_t t = r0; t < r1; t++) {
      causal_softmax_row(a + t * v.T, t, v.T);
      if (bf16) round_to_bf16_in_place(a + t * v.T, t + 1);
    }
    sgemm('N', 'N', rows, v.HS, r1, 1.0f, a + r0 * v.T, v.T, val, v.kv_stride, 0.0f,
          o + r0 * v.o_stride, v.o_stride);
  }
}

// The gradients of one query head; dk and dv of its kv head are written (first head of the group)
// or added to (accumulate_kv: the group's later heads, run after it on the same thread). q, k and
// v are read where `v` says, dq, dk and dv written where `g` says (the same view in float32; in
// bf16 the operands are rounded copies laid out without the gradients' strides).
void head_backward(float* dq_all, float* dk_all, float* dv_all, float* datt, const float* dout,
                   const float* q_all, const float* k_all, const float* v_all, const float* att,
                   const HeadView& v, const HeadView& g, float scale, bool accumulate_kv,
                   bool bf16) {
  const float* q = q_all + v.q_offset;
  const float* k = k_all + v.kv_offset;
  const float* val = v_all + v.kv_offset;
  float* dq = dq_all + g.q_offset;
  float* dk = dk_all + g.kv_offset;
  float* dv = dv_all + g.kv_offset;
  const float kv_beta = accumulate_kv ? 1.0f : 0.0f;
  const float* a = att + v.a_offset;
  float* da = datt + v.a_offset;
  const float* dO = dout + v.o_offset;
  for (int64_t r0 = 0; r0 < v.T; r0 += kRowBlock) {
    const int64_t r1 = std::min(r0 + kRowBlock, v.T), rows = r1 - r0;
    // datt = dout . V^T, then in place the softmax backward datt <- att * (datt - <att, datt>).
    sgemm('N', 'T', rows, r1, v.HS, 1.0f, dO + r0 * v.o_stride, v.o_stride, val, v.kv_stride, 0.0f,
          da + r0 * v.T, v.T);
    for (int64_t t = r0; t < r1; t++) {
      const float* arow = a + t * v.T;
      float* drow = da + t * v.T;
      float dot = 0.0f;
      for (int64_t j = 0; j <= t; j++) dot += arow[j] * drow[j];
      for (int64_t j = 0; j <= t; j++) drow[j] = arow[j] * (drow[j] - dot);
      if (bf16) round_to_bf16_in_place(drow, t + 1);
      for (int64_t j = t + 1; j < v.T; j++) drow[j] = 0.0f;  // read by the dK product below
    }
    // dQ = scale * dscores . K over the causal keys.
    sgemm('N', 'N', rows, v.HS, r1, scale, da + r0 * v.T, v.T, k, v.kv_stride, 0.0f,
          dq + r0 * g.q_stride, g.q_stride);
  }
  // Key/value rows c0..c1 receive gradient only from queries c0..T-1.
  for (int64_t c0 = 0; c0 < v.T; c0 += kRowBlock) {
    const int64_t c1 = std::min(c0 + kRowBlock, v.T), cols = c1 - c0, span = v.T - c0;
    const int64_t corner = c0 * v.T + c0;
    sgemm('T', 'N', cols, v.HS, span, 1.0f, a + corner, v.T, dO + c0 * v.o_stride, v.o_stride,
          kv_beta, dv + c0 * g.kv_stride, g.kv_stride);
    sgemm('T', 'N', cols, v.HS, span, scale, da + corner, v.T, q + c0 * v.q_stride, v.q_stride,
          kv_beta, dk + c0 * g.kv_stride, g.kv_stride);
  }
}

// One (row, query head) over its sequence's cached positions 0..length-1, read block by block
// through its block table: scores, their softmax, then the weighted sum of the values, each in
// position order (so the row's result depends on nothing but its own inputs).
void head_decode_paged(float* out, float* scores, const float* q, const float* k_pool,
                       const float* v_pool, const int32_t* blocks, int64_t head_offset,
                       int64_t block_floats, int64_t block_tokens, int64_t HS, int64_t length,
                       float scale) {
  auto position = [&](const float* pool, int64_t t) {
    return pool + blocks[t / block_tokens] * block_floats + head_offset + (t % block_tokens) * HS;
  };
  for (int64_t t = 0; t < length; t++) {
    const float* key = position(k_pool, t);
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < HS; d++) dot += q[d] * key[d];
    scores[t] = dot * scale;
  }
  causal_softmax_row(scores, length - 1, length);
  for (int64_t d = 0; d < HS; d++) out[d] = 0.0f;
  for (int64_t t = 0; t < length; t++) {
    const float p = scores[t];
    const float* value = position(v_pool, t);
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

namespace {

void check_shape(const AttentionShape& s, const char* what) {
  GPT_CHECK(s.B >= 0 && s.T > 0 && s.NH > 0 && s.NKV > 0 && s.HS > 0 && s.NH % s.NKV == 0 &&
                s.q_stride >= s.NH * s.HS && s.kv_stride >= s.NKV * s.HS,
            what << " with B=" << s.B << " T=" << s.T << " NH=" << s.NH << " NKV=" << s.NKV
                 << " HS=" << s.HS);
}

}  // namespace

void CpuBackend::paged_kv_store(float* k_pool, float* v_pool, const float* k, const float* v,
                                const AttentionShape& s, const int32_t* slots) {
  check_shape(s, "paged_kv_store");
  const int64_t block_floats = s.NKV * s.T * s.HS;
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t r = 0; r < s.B; r++) {
    GPT_CHECK(slots[r] >= 0, "paged_kv_store into slot " << slots[r]);
    const int64_t block = slots[r] / s.T, offset = slots[r] % s.T;
    for (int64_t g = 0; g < s.NKV; g++) {
      const int64_t src = r * s.kv_stride + g * s.HS;
      const int64_t dst = block * block_floats + (g * s.T + offset) * s.HS;
      std::copy(k + src, k + src + s.HS, k_pool + dst);
      std::copy(v + src, v + src + s.HS, v_pool + dst);
    }
  }
}

void CpuBackend::paged_attention_decode(float* out, float* scores, const float* q,
                                        const float* k_pool, const float* v_pool,
                                        const AttentionShape& s, const int32_t* block_tables,
                                        int64_t max_blocks, const int32_t* lengths) {
  check_shape(s, "paged_attention_decode");
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.HS));
  const int64_t C = s.NH * s.HS, group = s.NH / s.NKV, max_positions = max_blocks * s.T;
  const int64_t block_floats = s.NKV * s.T * s.HS;
  for (int64_t r = 0; r < s.B; r++)
    GPT_CHECK(lengths[r] >= 1 && lengths[r] <= max_positions,
              "paged_attention_decode over " << lengths[r] << " positions of a table of "
                                             << max_positions);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t rh = 0; rh < s.B * s.NH; rh++) {
    const int64_t r = rh / s.NH, h = rh % s.NH;
    head_decode_paged(out + r * C + h * s.HS, scores + rh * max_positions,
                      q + r * s.q_stride + h * s.HS, k_pool, v_pool, block_tables + r * max_blocks,
                      (h / group) * s.T * s.HS, block_floats, s.T, s.HS, lengths[r], scale);
  }
}

AttentionOperands CpuBackend::bf16_attention_operands(const float* q, const float* k,
                                                      const float* v, const AttentionShape& s) {
  AttentionOperands r{q, k, v, s};
  if (precision_ != Precision::kBf16) return r;
  const int64_t N = s.B * s.T, QC = s.NH * s.HS, KC = s.NKV * s.HS;
  float* copies = static_cast<float*>(
      operand_a_.get(*this, sizeof(float) * static_cast<size_t>(N * (QC + 2 * KC))));
  r.q = round_rows_to_bf16(copies, q, N, QC, s.q_stride);
  r.k = round_rows_to_bf16(copies + N * QC, k, N, KC, s.kv_stride);
  r.v = round_rows_to_bf16(copies + N * (QC + KC), v, N, KC, s.kv_stride);
  r.shape.q_stride = QC;
  r.shape.kv_stride = KC;
  return r;
}

void CpuBackend::attention_forward(float* out, float* att, const float* q, const float* k,
                                   const float* v, const AttentionShape& s) {
  check_shape(s, "attention_forward");
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.HS));
  const AttentionOperands in = bf16_attention_operands(q, k, v, s);
  const bool bf16 = precision_ == Precision::kBf16;
  for_each_head(s.B * s.NH, threads_, [&](int64_t bh) {
    head_forward(out, att, in.q, in.k, in.v, head_view(bh, in.shape), scale, bf16);
  });
}

void CpuBackend::attention_backward(float* dq, float* dk, float* dv, float* datt, const float* dout,
                                    const float* /*out*/, const float* q, const float* k,
                                    const float* v, const float* att, const AttentionShape& s) {
  check_shape(s, "attention_backward");
  const float scale = 1.0f / std::sqrt(static_cast<float>(s.HS));
  const int64_t group = s.NH / s.NKV;
  const AttentionOperands in = bf16_attention_operands(q, k, v, s);
  const bool bf16 = precision_ == Precision::kBf16;
  dout = bf16_operand(operand_b_, dout, s.B * s.T * s.NH * s.HS);  // packed (B, T, NH * HS)
  // One task per (batch, kv head): its query heads run in order on one thread, the first writing
  // dk and dv and the others adding to them, so no two threads write one kv head.
  for_each_head(s.B * s.NKV, threads_, [&](int64_t bg) {
    const int64_t b = bg / s.NKV, g = bg % s.NKV;
    for (int64_t i = 0; i < group; i++) {
      const int64_t bh = b * s.NH + g * group + i;
      head_backward(dq, dk, dv, datt, dout, in.q, in.k, in.v, att, head_view(bh, in.shape),
                    head_view(bh, s), scale, i > 0, bf16);
    }
  });
}

}  // namespace gpt::cpu
