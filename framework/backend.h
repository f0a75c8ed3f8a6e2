// The kernel interface: every numerical operation a layer or optimizer needs, one virtual call per
// layer-level op (never per element). Two implementations: CpuBackend (framework/cpu/, oneDNN
// matrix products and OpenMP loops) and, later, CudaBackend. All pointers are in the backend's
// memory; sizes follow llm.c (N rows = B*T, C channels, OC/IC out/in features, NH heads of HS).
// Conventions (llm.c): parameter gradients accumulate (+=), activation gradients are written (=)
// unless the function says it accumulates; outputs come first, then inputs, then sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "framework/elementwise.h"

namespace gpt {

enum class DeviceKind { kCpu, kCuda };

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;

  // ---- memory
  virtual void* allocate(size_t bytes) = 0;  // zero-filled
  virtual void deallocate(void* ptr) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(float* x, int64_t n) = 0;
  virtual void synchronize() = 0;  // all issued work has finished

  // ---- matrix products, weights in nn.Linear layout (OC, IC)
  // out (N,OC) = inp (N,IC) . weight^T (+ bias (OC) when bias is not null)
  virtual void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                              int64_t N, int64_t IC, int64_t OC) = 0;
  // dinp (N,IC) = dout (N,OC) . weight (OC,IC); adds to dinp instead when accumulate is true
  virtual void matmul_backward_input(float* dinp, const float* dout, const float* weight, int64_t N,
                                     int64_t IC, int64_t OC, bool accumulate) = 0;
  // dweight (OC,IC) += dout^T . inp;  dbias (OC) += column sums of dout (skipped when null)
  virtual void matmul_backward_weight(float* dweight, float* dbias, const float* dout,
                                      const float* inp, int64_t N, int64_t IC, int64_t OC) = 0;

  // ---- LayerNorm over the last dimension C, eps kLayerNormEps, biased variance
  // out = (inp - mean) * rstd * weight + bias; mean, rstd (N) are kept for the backward
  virtual void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int64_t N, int64_t C) = 0;
  // dinp (N,C) += the input gradient (accumulates: LayerNorm inputs are residual streams)
  virtual void layernorm_backward_input(float* dinp, const float* dout, const float* inp,
                                        const float* weight, const float* mean, const float* rstd,
                                        int64_t N, int64_t C) = 0;
  // dweight (C) += sum_n dout * xhat;  dbias (C) += sum_n dout
  virtual void layernorm_backward_weight(float* dweight, float* dbias, const float* dout,
                                         const float* inp, const float* mean, const float* rstd,
                                         int64_t N, int64_t C) = 0;

  // ---- GELU, tanh approximation (elementwise.h)
  virtual void gelu_forward(float* out, const float* inp, int64_t n) = 0;
  virtual void gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) = 0;

  // ---- causal self-attention, scaled by 1/sqrt(HS)
  // qkv (B,T,3*NH*HS) holds per token [q of heads 0..NH-1 | k of heads | v of heads];
  // att (B,NH,T,T) receives the softmax probabilities (zero above the diagonal), out (B,T,NH*HS).
  virtual void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T,
                                 int64_t NH, int64_t HS) = 0;
  // dqkv (B,T,3*NH*HS) = the gradient; datt (B,NH,T,T) is scratch
  virtual void attention_backward(float* dqkv, float* datt, const float* dout, const float* qkv,
                                  const float* att, int64_t B, int64_t T, int64_t NH,
                                  int64_t HS) = 0;

  // ---- residual stream and biases
  virtual void add(float* out, const float* a, const float* b, int64_t n) = 0;  // out = a + b
  virtual void accumulate(float* y, const float* x, int64_t n) = 0;             // y += x
  virtual void scale(float* x, float factor, int64_t n) = 0;                    // x *= factor
  // out (N,C) += bias (C) on every row; bias_backward: dbias (C) += column sums of dout (N,C)
  virtual void add_bias(float* out, const float* bias, int64_t N, int64_t C) = 0;
  virtual void bias_backward(float* dbias, const float* dout, int64_t N, int64_t C) = 0;

  // ---- embeddings. This rank holds vocabulary rows [vocab_start, vocab_start + V_local).
  // out (N,C) = wte[token - vocab_start] for tokens in that range, 0 for the others
  virtual void embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                                 int64_t C, int64_t vocab_start, int64_t V_local) = 0;
  // dwte (V_local,C) += dout rows of the tokens in range
  virtual void embedding_backward(float* dwte, const float* dout, const int32_t* tokens, int64_t N,
                                  int64_t C, int64_t vocab_start, int64_t V_local) = 0;
  // out (B,T,C) += wpe (T,C) at each position;  dwpe (T,C) += sum over b of dout (B,T,C)
  virtual void position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T,
                                          int64_t C) = 0;
  virtual void position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                           int64_t C) = 0;

  // ---- vocabulary-parallel softmax cross-entropy. logits (N, V_local) hold this rank's columns
  // [vocab_start, vocab_start + V_local); only the first V_valid of them are real vocabulary (the
  // rest are padding and count as -inf). Across tp ranks the caller max-reduces row_max and
  // sum-reduces row_sumexp and target_logit between the calls.
  virtual void xent_row_max(float* row_max, const float* logits, int64_t N, int64_t V_local,
                            int64_t V_valid) = 0;
  // row_sumexp (N) = sum over valid columns of exp(logit - row_max)
  virtual void xent_row_sumexp(float* row_sumexp, const float* logits, const float* row_max,
                               int64_t N, int64_t V_local, int64_t V_valid) = 0;
  // target_logit (N) = logits[n, target - vocab_start] when the target is local, else 0
  virtual void xent_target_logit(float* target_logit, const float* logits, const int32_t* targets,
                                 int64_t N, int64_t V_local, int64_t vocab_start) = 0;
  // losses (N) = log(row_sumexp) + row_max - target_logit
  virtual void xent_loss(float* losses, const float* row_max, const float* row_sumexp,
                         const float* target_logit, int64_t N) = 0;
  // In place: logits become dlogits = loss_scale * (softmax - onehot(target)); padding columns 0.
  virtual void xent_backward(float* logits, const float* row_max, const float* row_sumexp,
                             const int32_t* targets, int64_t N, int64_t V_local, int64_t V_valid,
                             int64_t vocab_start, float loss_scale) = 0;

  // ---- reductions, accumulated in double
  virtual double sum(const float* x, int64_t n) = 0;
  virtual double sum_squares(const float* x, int64_t n) = 0;

  // ---- optimizer updates over n contiguous elements (elementwise.h holds the formulas)
  virtual void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                            int64_t n, const AdamWStep& step) = 0;
  virtual void sgd_update(float* param, const float* grad, float* momentum_buffer, int64_t n,
                          const SgdStep& step) = 0;
};

// The CPU backend with `threads` OpenMP threads (0 = leave OpenMP's default).
std::unique_ptr<Backend> make_cpu_backend(int threads);

}  // namespace gpt
