// The kernel interface: every numerical operation a layer or optimizer needs, one virtual call per
// layer-level op (never per element). Two implementations: CpuBackend (framework/cpu/, oneDNN
// matrix products and OpenMP loops) and CudaBackend (framework/cuda/, cuBLASLt and own kernels).
// All pointers are in the backend's memory; sizes follow llm.c (N rows = B*T, C channels, OC/IC
// out/in features, NH heads of HS). Conventions (llm.c): parameter gradients accumulate (+=),
// activation gradients are written (=) unless the function says it accumulates; outputs come first,
// then inputs, then sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "framework/cuda_scratch.h"
#include "framework/elementwise.h"
#include "framework/memory_ledger.h"

namespace gpt {

enum class DeviceKind { kCpu, kCuda };

// What the matrix products and attention compute in. kBf16 rounds their operands to bfloat16 and
// accumulates in float32 (on both backends); activations, gradients, master weights and optimizer
// state stay float32 in memory either way.
enum class Precision { kFp32, kBf16 };

// A product's weight operand: the float32 values and, under bf16 precision, their persistent
// 16-bit compute copy (ParameterStore keeps one per parameter, refreshed once per step; null
// where there is none, and then the product rounds a copy of the values itself). Implicit from
// a plain float pointer, so a caller without a compute copy passes its weights as they are.
struct WeightOperand {
  const float* values = nullptr;
  const uint16_t* bf16 = nullptr;
  WeightOperand(const float* weight_values, const uint16_t* compute_copy = nullptr)  // NOLINT
      : values(weight_values), bf16(compute_copy) {}
};

// Consecutive parameters with the same weight decay flag: elements [offset, offset + numel) of
// the flat buffers. One optimizer update covers a list of runs (one launch on CUDA).
struct ParameterRun {
  int64_t offset = 0;
  int64_t numel = 0;
  bool weight_decay = false;
};

// The sizes of the attention cache and scratch (Backend::attention_forward / _backward) for each
// backend kind, free so that the memory model sizes them without a backend: the softmax
// probabilities (B,NH,T,T) and their gradient on the CPU; on CUDA, whose fused kernel never forms
// the T x T matrix, the rows' log-sum-exp (B,NH,T) and rowsum(dout * out) (B,NH,T).
int64_t attention_cache_floats(DeviceKind kind, int64_t B, int64_t NH, int64_t T);
int64_t attention_scratch_floats(DeviceKind kind, int64_t B, int64_t NH, int64_t T);
// Whether the attention cache grows with T*T: what selective recomputation drops.
inline bool attention_cache_is_quadratic(DeviceKind kind) {
  return kind == DeviceKind::kCpu;
}
// The CUDA backend's fixed workspace: the cuBLASLt workspace (what Hopper kernels want) and one
// reduction result, each in its own arena block.
inline constexpr size_t kCudaGemmWorkspaceBytes = size_t{32} << 20;

// One grouped-query attention call (Backend::attention_*): B sequences of T positions, NH query
// heads and NKV key/value heads of HS floats (NKV divides NH; query head h reads kv head
// h / (NH / NKV)); rows of q are q_stride floats apart, rows of k and v kv_stride.
struct AttentionShape {
  int64_t B = 0, T = 0, NH = 0, NKV = 0, HS = 0;
  int64_t q_stride = 0, kv_stride = 0;
};
// GPT-2's fused [q | k | v] rows of 3*NH*HS floats.
inline AttentionShape fused_qkv_shape(int64_t B, int64_t T, int64_t NH, int64_t HS) {
  return {B, T, NH, NH, HS, 3 * NH * HS, 3 * NH * HS};
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;
  virtual Precision precision() const { return Precision::kFp32; }

  // ---- memory. Every buffer is taken here with the category it counts in (memory_ledger.h);
  // the ledger records each block as reserved, rounded up to allocation_granularity(). Zero bytes
  // take nothing and return null.
  void* allocate(size_t bytes, MemoryCategory category);  // zero-filled
  void deallocate(void* ptr);                             // null is ignored
  const MemoryLedger& memory() const { return memory_; }
  virtual size_t allocation_granularity() const = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill_zero(float* x, int64_t n) = 0;
  virtual void synchronize() = 0;  // all issued work has finished
  // Whether ptr points into this backend's device memory (never on the CPU backend): host
  // buffers handed to a communicator take the MPI path.
  virtual bool is_device_memory(const void* /*ptr*/) const { return false; }
  // Takes the per-call scratch a run will ask for (the memory model's prediction) up front, so
  // that no buffer grows mid-run; the CPU backend's scratch is the layers' own.
  virtual void reserve_scratch(const DeviceScratch& /*scratch*/) {}

  // ---- matrix products, weights in nn.Linear layout (OC, IC); under bf16 precision the weight
  // is read from its compute copy when it has one (WeightOperand)
  // out (N,OC) = inp (N,IC) . weight^T (+ bias (OC) when bias is not null)
  virtual void matmul_forward(float* out, const float* inp, WeightOperand weight, const float* bias,
                              int64_t N, int64_t IC, int64_t OC) = 0;
  // dinp (N,IC) = dout (N,OC) . weight (OC,IC); adds to dinp instead when accumulate is true
  virtual void matmul_backward_input(float* dinp, const float* dout, WeightOperand weight,
                                     int64_t N, int64_t IC, int64_t OC, bool accumulate) = 0;
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

  // ---- causal self-attention, scaled by 1/sqrt(HS), grouped-query (AttentionShape). q (B,T,
  // q_stride) holds per token the NH query heads, k and v (B,T,kv_stride) the NKV key and value
  // heads, each head HS contiguous floats; out (B,T,NH*HS). att is the backend's attention cache
  // of attention_cache_floats() floats: the softmax probabilities (B,NH,T,T) on the CPU, the rows'
  // log-sum-exp (B,NH,T) in CUDA's fused kernel, which never forms the T x T matrix. GPT-2's
  // fused c_attn output (B,T,3*NH*HS) = [q | k | v] is the case NKV = NH, q_stride = kv_stride =
  // 3*NH*HS, with k and v at offsets NH*HS and 2*NH*HS: the qkv overloads below.
  int64_t attention_cache_floats(int64_t B, int64_t NH, int64_t T) const {
    return gpt::attention_cache_floats(kind(), B, NH, T);
  }
  virtual void attention_forward(float* out, float* att, const float* q, const float* k,
                                 const float* v, const AttentionShape& s) = 0;
  void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t NH,
                         int64_t HS) {
    const int64_t C = NH * HS;
    attention_forward(out, att, qkv, qkv + C, qkv + 2 * C, fused_qkv_shape(B, T, NH, HS));
  }
  // dq, dk, dv (strided as q, k and v) = the gradient, written over the columns the heads use
  // (dk and dv sum over the NH/NKV query heads of a group); out is the forward's output; datt is
  // scratch of attention_scratch_floats() floats.
  int64_t attention_scratch_floats(int64_t B, int64_t NH, int64_t T) const {
    return gpt::attention_scratch_floats(kind(), B, NH, T);
  }
  virtual void attention_backward(float* dq, float* dk, float* dv, float* datt, const float* dout,
                                  const float* out, const float* q, const float* k, const float* v,
                                  const float* att, const AttentionShape& s) = 0;
  void attention_backward(float* dqkv, float* datt, const float* dout, const float* out,
                          const float* qkv, const float* att, int64_t B, int64_t T, int64_t NH,
                          int64_t HS) {
    const int64_t C = NH * HS;
    attention_backward(dqkv, dqkv + C, dqkv + 2 * C, datt, dout, out, qkv, qkv + C, qkv + 2 * C,
                       att, fused_qkv_shape(B, T, NH, HS));
  }

  // ---- generation and serving: token rows of any sequences at any positions, each computed
  // alone, so that a row's result never depends on which other rows share the call (batch
  // invariance: a request's tokens are the same however the server batches it).
  // out (R,OC) = inp (R,IC) . weight^T (+ bias when not null), each output element summed in one
  // fixed order whatever R is (matmul_forward's library products choose their blocking by shape).
  virtual void matmul_forward_rows(float* out, const float* inp, const float* weight,
                                   const float* bias, int64_t R, int64_t IC, int64_t OC) = 0;
  // The paged key/value cache: pools k_pool and v_pool (num_blocks, NKV, block_tokens, HS), each
  // block holding block_tokens positions of every kv head of this rank; a sequence's position p
  // lives in block block_table[p / block_tokens] at offset p % block_tokens. The shape's B is the
  // number of rows R, its T is block_tokens. slots, block_tables and lengths are in backend memory.
  // Row r's key and value (k and v: R rows of kv_stride) go to pool position slots[r] (block *
  // block_tokens + offset).
  virtual void paged_kv_store(float* k_pool, float* v_pool, const float* k, const float* v,
                              const AttentionShape& s, const int32_t* slots) = 0;
  // out (R,NH*HS) = causal attention of row r's query (q: R rows of q_stride) over positions
  // 0..lengths[r]-1 of its sequence (its own among them), whose blocks are block_tables[r *
  // max_blocks ...], scaled by 1/sqrt(HS): what attention_forward gives for that row. scores is
  // scratch of paged_attention_floats() floats.
  int64_t paged_attention_floats(int64_t R, int64_t NH, int64_t max_positions) const {
    return R * NH * max_positions;
  }
  virtual void paged_attention_decode(float* out, float* scores, const float* q,
                                      const float* k_pool, const float* v_pool,
                                      const AttentionShape& s, const int32_t* block_tables,
                                      int64_t max_blocks, const int32_t* lengths) = 0;

  // ---- the Llama family's elementwise layers (elementwise.h holds the per-element formulas)
  // RMSNorm over the last dimension C: out = inp * rstd * weight, rstd (N) = 1/sqrt(mean(inp^2)
  // + eps), kept for the backward.
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                               int64_t N, int64_t C, float eps) = 0;
  // dinp (N,C) += the input gradient (accumulates, as LayerNorm's)
  virtual void rmsnorm_backward_input(float* dinp, const float* dout, const float* inp,
                                      const float* weight, const float* rstd, int64_t N,
                                      int64_t C) = 0;
  // dweight (C) += sum_n dout * inp * rstd
  virtual void rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                                       const float* rstd, int64_t N, int64_t C) = 0;
  // Rotary positions, in place on x (B,T,heads*HS): the row of (b, t) is at position start + t,
  // and each head's pairs (i, i + HS/2) turn by that position's angles. table (positions, HS)
  // holds per position [cos of the HS/2 angles | sin of them] (rotary_table in layers/). The
  // backward turns a gradient back (by the negative angles), in place too.
  virtual void rotary_forward(float* x, const float* table, int64_t B, int64_t T, int64_t heads,
                              int64_t HS, int64_t start) = 0;
  virtual void rotary_backward(float* dx, const float* table, int64_t B, int64_t T, int64_t heads,
                               int64_t HS, int64_t start) = 0;
  // SwiGLU: out (n) = silu(gate) * up; the backward writes dgate and dup (n) from dout.
  virtual void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) = 0;
  virtual void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                               const float* up, int64_t n) = 0;

  // ---- bf16 storage (Precision::kBf16): the residual stream and its gradient hold bf16 values,
  // so a pipeline message carries them as their 16-bit bits (framework/bf16.h's rounding, to
  // nearest even). round_to_bf16: x becomes the bf16 value nearest it, in place.
  virtual void round_to_bf16(float* x, int64_t n) = 0;
  virtual void pack_bf16(uint16_t* out, const float* inp, int64_t n) = 0;    // float -> bf16 bits
  virtual void unpack_bf16(float* out, const uint16_t* inp, int64_t n) = 0;  // bits -> float

  // ---- residual stream and biases
  virtual void accumulate(float* y, const float* x, int64_t n) = 0;  // y += x
  virtual void scale(float* x, float factor, int64_t n) = 0;         // x *= factor
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

  // ---- optimizer updates of the elements in `runs` of the flat buffers (elementwise.h holds the
  // formulas): runs with weight_decay use `decayed`, the others `undecayed`. One call per step.
  virtual void adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                            std::span<const ParameterRun> runs, const AdamWStep& decayed,
                            const AdamWStep& undecayed) = 0;
  // momentum_buffer may be null when momentum is 0.
  virtual void sgd_update(float* param, const float* grad, float* momentum_buffer,
                          std::span<const ParameterRun> runs, const SgdStep& decayed,
                          const SgdStep& undecayed) = 0;

 protected:
  // The backend's own allocator, behind allocate/deallocate (bytes > 0, pointers non-null).
  virtual void* raw_allocate(size_t bytes) = 0;  // zero-filled
  virtual void raw_deallocate(void* ptr) = 0;

 private:
  MemoryLedger memory_;
};

// The CPU backend with `threads` OpenMP threads (0 = leave OpenMP's default).
std::unique_ptr<Backend> make_cpu_backend(int threads, Precision precision = Precision::kFp32);

// The CUDA backend (framework/cuda/), for builds with GPT_WITH_CUDA; elsewhere these report that
// the build has no CUDA. One rank drives one device.
struct CudaBackendOptions {
  int device = 0;
  Precision precision = Precision::kBf16;
  bool deterministic = false;  // fixed cuBLASLt algorithms without split-K reductions
  size_t arena_bytes = 0;      // device memory reserved at start-up; 0 = 90% of what is free
};
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);
// Devices this process sees (0 when the build has no CUDA or the driver finds none).
int cuda_device_count();
// Bytes of device memory free on `device` now.
size_t cuda_free_memory(int device);
// A stable identity of `device` (its UUID), to tell whether two ranks share one GPU.
std::string cuda_device_uuid(int device);

}  // namespace gpt
