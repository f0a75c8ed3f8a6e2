// Token and position embeddings on the CPU. The token table is split by vocabulary across tp
// ranks (rows [vocab_start, vocab_start + V_local)); tokens outside it give zero rows, and the tp
// all-reduce after the forward fills them in. The backward splits over channels rather than
// tokens, so repeated tokens never race and the sum order is fixed whatever the thread count.
#include <cstring>

#include "framework/check.h"
#include "framework/cpu/column_blocks.h"
#include "framework/cpu/cpu_backend.h"

namespace gpt::cpu {

namespace {

bool is_local(int32_t token, int64_t vocab_start, int64_t V_local) {
  return token >= vocab_start && token < vocab_start + V_local;
}

// dst[c] += src[c] for c < n: the one addition of every embedding gradient and of the position
// embedding's forward.
void add_row(float* dst, const float* src, int64_t n) {
#pragma omp simd
  for (int64_t c = 0; c < n; c++) dst[c] += src[c];
}

}  // namespace

void CpuBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                                   int64_t C, int64_t vocab_start, int64_t V_local) {
  GPT_CHECK(N >= 0 && C > 0 && V_local >= 0,
            "embedding_forward with N=" << N << " C=" << C << " V_local=" << V_local);
  const size_t row_bytes = sizeof(float) * static_cast<size_t>(C);
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t n = 0; n < N; n++) {
    const int32_t token = tokens[n];
    if (is_local(token, vocab_start, V_local))
      std::memcpy(out + n * C, wte + (token - vocab_start) * C, row_bytes);
    else
      std::memset(out + n * C, 0, row_bytes);
  }
}

void CpuBackend::embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                                    int64_t N, int64_t C, int64_t vocab_start, int64_t V_local) {
  GPT_CHECK(N >= 0 && C > 0 && V_local >= 0,
            "embedding_backward with N=" << N << " C=" << C << " V_local=" << V_local);
  for_each_column_block(C, threads_, [&](int64_t c0, int64_t width) {
    for (int64_t n = 0; n < N; n++) {
      const int32_t token = tokens[n];
      if (is_local(token, vocab_start, V_local))
        add_row(dwte + (token - vocab_start) * C + c0, dout + n * C + c0, width);
    }
  });
}

void CpuBackend::position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T,
                                            int64_t C) {
  GPT_CHECK(B >= 0 && T > 0 && C > 0,
            "position_embedding_forward with B=" << B << " T=" << T << " C=" << C);
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads_)
  for (int64_t b = 0; b < B; b++) {
    for (int64_t t = 0; t < T; t++) add_row(out + (b * T + t) * C, wpe + t * C, C);
  }
}

void CpuBackend::position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                             int64_t C) {
  GPT_CHECK(B >= 0 && T > 0 && C > 0,
            "position_embedding_backward with B=" << B << " T=" << T << " C=" << C);
  // One position per task and the batch summed in order: deterministic, no shared rows.
#pragma omp parallel for schedule(static) num_threads(threads_)
  for (int64_t t = 0; t < T; t++) {
    for (int64_t b = 0; b < B; b++) add_row(dwpe + t * C, dout + (b * T + t) * C, C);
  }
}

}  // namespace gpt::cpu
