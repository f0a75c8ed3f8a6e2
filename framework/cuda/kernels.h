// Host-side launchers of the CUDA backend's own kernels (the .cu files beside this header, one
// per op family). Every launcher enqueues on `stream`, never synchronizes, never allocates, and
// checks its launch with GPT_CUDA_CHECK_LAUNCH(). Semantics, sizes and argument order are those
// of the same-named Backend functions (framework/backend.h); per-element math comes from
// framework/elementwise.h. Every kernel is deterministic: fixed launch shapes, fixed reduction
// orders, no floating-point atomics, so a run repeats bit for bit on one GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "framework/backend.h"
#include "framework/cuda_scratch.h"
#include "framework/elementwise.h"

namespace gpt::cuda {

// ---- precision conversion (round to nearest even)
void convert_to_bf16(cudaStream_t stream, __nv_bfloat16* out, const float* inp, int64_t n);
// out = the float of each bf16; round_to_bf16: x = the bf16 value nearest it, in place.
void convert_from_bf16(cudaStream_t stream, float* out, const __nv_bfloat16* inp, int64_t n);
void round_to_bf16(cudaStream_t stream, float* x, int64_t n);

// ---- elementwise (elementwise.cu)
void gelu_forward(cudaStream_t stream, float* out, const float* inp, int64_t n);
void gelu_backward(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                   int64_t n);
void accumulate(cudaStream_t stream, float* y, const float* x, int64_t n);
void scale(cudaStream_t stream, float* x, float factor, int64_t n);
void add_bias(cudaStream_t stream, float* out, const float* bias, int64_t N, int64_t C);
void swiglu_forward(cudaStream_t stream, float* out, const float* gate, const float* up, int64_t n);
void swiglu_backward(cudaStream_t stream, float* dgate, float* dup, const float* dout,
                     const float* gate, const float* up, int64_t n);

// ---- column sums (reductions.cu): dcol (C) += sum over the N rows of x (N,C), in a fixed order.
// scratch holds column_sum_scratch_bytes(N, C) bytes.
size_t column_sum_scratch_bytes(int64_t N, int64_t C);
void column_sum_accumulate(cudaStream_t stream, float* dcol, const float* x, int64_t N, int64_t C,
                           void* scratch);
// Its second half, for kernels that write the chunks' partials themselves (RMSNorm's weight
// gradient): dcol (C) += partial (kCudaColumnChunks, C) summed over the chunks in order.
void column_partials_accumulate(cudaStream_t stream, float* dcol, const double* partial, int64_t C);
// ---- whole-buffer sums in double (reductions.cu): *result (device) = sum x / sum x^2.
// scratch holds full_sum_scratch_bytes() bytes.
size_t full_sum_scratch_bytes();
void sum(cudaStream_t stream, double* result, const float* x, int64_t n, void* scratch);
void sum_squares(cudaStream_t stream, double* result, const float* x, int64_t n, void* scratch);

// ---- LayerNorm (norms.cu)
void layernorm_forward(cudaStream_t stream, float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int64_t N, int64_t C);
void layernorm_backward_input(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int64_t N,
                              int64_t C);
// scratch holds layernorm_backward_weight_scratch_bytes(N, C) bytes.
size_t layernorm_backward_weight_scratch_bytes(int64_t N, int64_t C);
void layernorm_backward_weight(cudaStream_t stream, float* dweight, float* dbias, const float* dout,
                               const float* inp, const float* mean, const float* rstd, int64_t N,
                               int64_t C, void* scratch);

// ---- RMSNorm (norms.cu); eps is the model's (Backend::rmsnorm_forward)
void rmsnorm_forward(cudaStream_t stream, float* out, float* rstd, const float* inp,
                     const float* weight, int64_t N, int64_t C, float eps);
void rmsnorm_backward_input(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                            const float* weight, const float* rstd, int64_t N, int64_t C);
// scratch holds rmsnorm_backward_weight_scratch_bytes(N, C) bytes.
size_t rmsnorm_backward_weight_scratch_bytes(int64_t N, int64_t C);
void rmsnorm_backward_weight(cudaStream_t stream, float* dweight, const float* dout,
                             const float* inp, const float* rstd, int64_t N, int64_t C,
                             void* scratch);

// ---- rotary positions, in place (rotary.cu)
void rotary_forward(cudaStream_t stream, float* x, const float* table, int64_t B, int64_t T,
                    int64_t heads, int64_t HS, int64_t start);
void rotary_backward(cudaStream_t stream, float* dx, const float* table, int64_t B, int64_t T,
                     int64_t heads, int64_t HS, int64_t start);

// ---- embeddings (embedding.cu)
void embedding_forward(cudaStream_t stream, float* out, const int32_t* tokens, const float* wte,
                       int64_t N, int64_t C, int64_t vocab_start, int64_t V_local);
// Deterministic without atomics: the rows are sorted by token (a stable sort keeps their order)
// and each token's rows are summed in that order. scratch holds
// embedding_backward_scratch_bytes(N) bytes.
size_t embedding_backward_scratch_bytes(int64_t N);
void embedding_backward(cudaStream_t stream, float* dwte, const float* dout, const int32_t* tokens,
                        int64_t N, int64_t C, int64_t vocab_start, int64_t V_local, void* scratch);
void position_embedding_forward(cudaStream_t stream, float* out, const float* wpe, int64_t B,
                                int64_t T, int64_t C);
void position_embedding_backward(cudaStream_t stream, float* dwpe, const float* dout, int64_t B,
                                 int64_t T, int64_t C);

// ---- vocabulary-parallel cross-entropy pieces (cross_entropy.cu)
void xent_row_max(cudaStream_t stream, float* row_max, const float* logits, int64_t N,
                  int64_t V_local, int64_t V_valid);
void xent_row_sumexp(cudaStream_t stream, float* row_sumexp, const float* logits,
                     const float* row_max, int64_t N, int64_t V_local, int64_t V_valid);
void xent_target_logit(cudaStream_t stream, float* target_logit, const float* logits,
                       const int32_t* targets, int64_t N, int64_t V_local, int64_t vocab_start);
void xent_loss(cudaStream_t stream, float* losses, const float* row_max, const float* row_sumexp,
               const float* target_logit, int64_t N);
void xent_backward(cudaStream_t stream, float* logits, const float* row_max,
                   const float* row_sumexp, const int32_t* targets, int64_t N, int64_t V_local,
                   int64_t V_valid, int64_t vocab_start, float loss_scale);

// ---- optimizers (optimizer.cu): one launch over every run. The backend cuts the runs into
// blocks of at most kUpdateBlockElements elements (one CUDA block each) and uploads the table.
inline constexpr int64_t kUpdateBlockElements = kCudaUpdateBlockElements;
struct UpdateBlock {
  int64_t offset;        // first element, into the flat buffers
  int32_t numel;         // <= kUpdateBlockElements
  int32_t weight_decay;  // 1: use the decayed step
};
static_assert(sizeof(UpdateBlock) == kCudaUpdateBlockBytes);
void adamw_update(cudaStream_t stream, float* param, const float* grad, float* exp_avg,
                  float* exp_avg_sq, const UpdateBlock* blocks, int64_t n_blocks,
                  const AdamWStep& decayed, const AdamWStep& undecayed);
// momentum_buffer is null when momentum is 0.
void sgd_update(cudaStream_t stream, float* param, const float* grad, float* momentum_buffer,
                const UpdateBlock* blocks, int64_t n_blocks, const SgdStep& decayed,
                const SgdStep& undecayed);

// ---- fused causal grouped-query attention (attention.cu), flash-attention style: the T x T
// scores never reach memory. q, k, v and out as Backend::attention_forward (AttentionShape).
// lse (B,NH,T) = per query row log(sum_j exp(s_ij)) of the scaled scores s (the row maximum folded
// in), kept for the backward. With bf16_operands, q, k, v, the probabilities and dout are rounded
// to bfloat16 where they enter a product (what a bf16 tensor-core kernel computes); accumulation
// is float32 either way.
// Throws unless the sizes are >= 0, NKV > 0 divides NH and the strides hold their heads.
void check_attention_shape(const AttentionShape& shape, const char* what);
void attention_forward(cudaStream_t stream, float* out, float* lse, const float* q, const float* k,
                       const float* v, const AttentionShape& shape, bool bf16_operands);
// dq, dk, dv (strided as q, k, v) = the gradient (written, over the heads' columns only; dk and
// dv summed over the group's query heads). delta (B,NH,T) is scratch for rowsum(dout * out).
// Deterministic: dk and dv are summed over the group's query heads and their query tiles by one
// kernel, dq over key tiles by another, each in a fixed order.
void attention_backward(cudaStream_t stream, float* dq, float* dk, float* dv, float* delta,
                        const float* dout, const float* out, const float* q, const float* k,
                        const float* v, const float* lse, const AttentionShape& shape,
                        bool bf16_operands);

// ---- generation and serving: rows computed each alone, so that a row's result never depends on
// the other rows of the call (batch invariance); float32 whatever the precision.
// The product out (R,OC) = inp (R,IC) . weight^T (+ bias) of Backend::matmul_forward_rows
// (matmul_rows.cu): every element one warp's dot product in a fixed order, whatever R.
void matmul_forward_rows(cudaStream_t stream, float* out, const float* inp, const float* weight,
                         const float* bias, int64_t R, int64_t IC, int64_t OC);
// The paged key/value cache (paged_attention.cu): semantics of Backend::paged_kv_store and
// paged_attention_decode (the shape's B is the rows R, its T block_tokens; slots, block_tables and
// lengths in device memory); scores holds R*NH*max_blocks*block_tokens floats. What the CPU
// backend rejects in those device arrays is not seen by the host here: a negative slot stores
// nothing, and a length outside [1, max_blocks * block_tokens] gives its row NaN.
void paged_kv_store(cudaStream_t stream, float* k_pool, float* v_pool, const float* k,
                    const float* v, const AttentionShape& shape, const int32_t* slots);
void paged_attention_decode(cudaStream_t stream, float* out, float* scores, const float* q,
                            const float* k_pool, const float* v_pool, const AttentionShape& shape,
                            const int32_t* block_tables, int64_t max_blocks,
                            const int32_t* lengths);

}  // namespace gpt::cuda
