// CudaBackend: memory, streams and the dispatch of every operation to its kernel (kernels.h) or
// to cuBLASLt (matmul.cpp); plus the CUDA entry points of backend.h.
#include "framework/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "framework/cuda/cuda_check.h"

namespace gpt {
namespace cuda {
namespace {
// The device must be current before the arena's cudaMalloc, i.e. inside the member initializers.
// 0 bytes asks for 90% of the free memory: the rest is for the CUDA context, cuBLASLt and NCCL.
size_t on_device(int device, size_t bytes) {
  GPT_CUDA_CHECK(cudaSetDevice(device));
  if (bytes > 0) return bytes;
  size_t free_bytes = 0, total_bytes = 0;
  GPT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<size_t>(0.9 * static_cast<double>(free_bytes));
}
}  // namespace

std::string cublas_status_string(cublasStatus_t status) {
  return std::string(cublasLtGetStatusName(status)) + ": " + cublasLtGetStatusString(status);
}

CudaBackend::CudaBackend(const CudaBackendOptions& options)
    : options_(options), arena_(on_device(options.device, options.arena_bytes)) {
  GPT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  GPT_CUBLAS_CHECK(cublasLtCreate(&lt_));
  gemm_workspace_ = allocate(kGemmWorkspaceBytes, MemoryCategory::kWorkspace);
  device_result_ = static_cast<double*>(allocate(sizeof(double), MemoryCategory::kWorkspace));
  GPT_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_result_), sizeof(double)));
}

CudaBackend::~CudaBackend() {
  // No checks: a destructor may run while an error unwinds, and must not throw.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  if (host_result_ != nullptr) cudaFreeHost(host_result_);
  if (lt_ != nullptr) cublasLtDestroy(lt_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaBackend::reserve_scratch(const DeviceScratch& scratch) {
  scratch_.get(*this, static_cast<size_t>(scratch.scratch));
  operand_a_.get(*this, static_cast<size_t>(scratch.operand_a));
  operand_b_.get(*this, static_cast<size_t>(scratch.operand_b));
  update_table_.get(*this, static_cast<size_t>(scratch.update_table));
}

std::string CudaBackend::name() const {
  cudaDeviceProp prop{};
  GPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, options_.device));
  std::ostringstream os;
  os << "cuda:" << options_.device << " (" << prop.name << ", "
     << (options_.precision == Precision::kBf16 ? "bf16" : "fp32")
     << (options_.deterministic ? ", deterministic" : "") << ")";
  return os.str();
}

// ---- memory. Every transfer is stream-ordered on the compute stream; host transfers wait for
// it, because the caller reads or frees its host buffer as soon as the call returns.
void* CudaBackend::raw_allocate(size_t bytes) {
  void* ptr = arena_.allocate(bytes);
  GPT_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
  return ptr;
}

void CudaBackend::raw_deallocate(void* ptr) {
  GPT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  arena_.release(ptr);
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  GPT_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  GPT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  GPT_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, stream_));
  GPT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  GPT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::fill_zero(float* x, int64_t n) {
  if (n > 0) GPT_CUDA_CHECK(cudaMemsetAsync(x, 0, sizeof(float) * static_cast<size_t>(n), stream_));
}

void CudaBackend::synchronize() {
  GPT_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

// ---- LayerNorm, GELU, residual stream
void CudaBackend::layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, int64_t N, int64_t C) {
  cuda::layernorm_forward(stream_, out, mean, rstd, inp, weight, bias, N, C);
}

void CudaBackend::layernorm_backward_input(float* dinp, const float* dout, const float* inp,
                                           const float* weight, const float* mean,
                                           const float* rstd, int64_t N, int64_t C) {
  cuda::layernorm_backward_input(stream_, dinp, dout, inp, weight, mean, rstd, N, C);
}

void CudaBackend::layernorm_backward_weight(float* dweight, float* dbias, const float* dout,
                                            const float* inp, const float* mean, const float* rstd,
                                            int64_t N, int64_t C) {
  void* scratch = scratch_.get(*this, cuda::layernorm_backward_weight_scratch_bytes(N, C));
  cuda::layernorm_backward_weight(stream_, dweight, dbias, dout, inp, mean, rstd, N, C, scratch);
}

void CudaBackend::gelu_forward(float* out, const float* inp, int64_t n) {
  cuda::gelu_forward(stream_, out, inp, n);
}

void CudaBackend::gelu_backward(float* dinp, const float* dout, const float* inp, int64_t n) {
  cuda::gelu_backward(stream_, dinp, dout, inp, n);
}

void CudaBackend::round_to_bf16(float* x, int64_t n) {
  cuda::round_to_bf16(stream_, x, n);
}

void CudaBackend::pack_bf16(uint16_t* out, const float* inp, int64_t n) {
  cuda::convert_to_bf16(stream_, reinterpret_cast<__nv_bfloat16*>(out), inp, n);
}

void CudaBackend::unpack_bf16(float* out, const uint16_t* inp, int64_t n) {
  cuda::convert_from_bf16(stream_, out, reinterpret_cast<const __nv_bfloat16*>(inp), n);
}

void CudaBackend::accumulate(float* y, const float* x, int64_t n) {
  cuda::accumulate(stream_, y, x, n);
}

void CudaBackend::scale(float* x, float factor, int64_t n) {
  cuda::scale(stream_, x, factor, n);
}

void CudaBackend::add_bias(float* out, const float* bias, int64_t N, int64_t C) {
  cuda::add_bias(stream_, out, bias, N, C);
}

void CudaBackend::bias_backward(float* dbias, const float* dout, int64_t N, int64_t C) {
  void* scratch = scratch_.get(*this, cuda::column_sum_scratch_bytes(N, C));
  cuda::column_sum_accumulate(stream_, dbias, dout, N, C, scratch);
}

// ---- attention: the fused kernel; att holds the rows' log-sum-exp, datt rowsum(dout * out)
void CudaBackend::attention_forward(float* out, float* att, const float* q, const float* k,
                                    const float* v, const AttentionShape& s) {
  cuda::attention_forward(stream_, out, att, q, k, v, s, options_.precision == Precision::kBf16);
}

void CudaBackend::attention_backward(float* dq, float* dk, float* dv, float* datt,
                                     const float* dout, const float* out, const float* q,
                                     const float* k, const float* v, const float* att,
                                     const AttentionShape& s) {
  cuda::attention_backward(stream_, dq, dk, dv, datt, dout, out, q, k, v, att, s,
                           options_.precision == Precision::kBf16);
}

// ---- generation and serving: rows each computed alone (always float32). The product is the
// fixed-order kernel of matmul_rows.cu rather than cuBLASLt, whose order depends on the shape.
void CudaBackend::matmul_forward_rows(float* out, const float* inp, const float* weight,
                                      const float* bias, int64_t R, int64_t IC, int64_t OC) {
  cuda::matmul_forward_rows(stream_, out, inp, weight, bias, R, IC, OC);
}

void CudaBackend::paged_kv_store(float* k_pool, float* v_pool, const float* k, const float* v,
                                 const AttentionShape& s, const int32_t* slots) {
  cuda::paged_kv_store(stream_, k_pool, v_pool, k, v, s, slots);
}

void CudaBackend::paged_attention_decode(float* out, float* scores, const float* q,
                                         const float* k_pool, const float* v_pool,
                                         const AttentionShape& s, const int32_t* block_tables,
                                         int64_t max_blocks, const int32_t* lengths) {
  cuda::paged_attention_decode(stream_, out, scores, q, k_pool, v_pool, s, block_tables, max_blocks,
                               lengths);
}

// ---- the Llama family's RMSNorm, rotary positions and SwiGLU
void CudaBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                                  int64_t N, int64_t C, float eps) {
  cuda::rmsnorm_forward(stream_, out, rstd, inp, weight, N, C, eps);
}

void CudaBackend::rmsnorm_backward_input(float* dinp, const float* dout, const float* inp,
                                         const float* weight, const float* rstd, int64_t N,
                                         int64_t C) {
  cuda::rmsnorm_backward_input(stream_, dinp, dout, inp, weight, rstd, N, C);
}

void CudaBackend::rmsnorm_backward_weight(float* dweight, const float* dout, const float* inp,
                                          const float* rstd, int64_t N, int64_t C) {
  void* scratch = scratch_.get(*this, cuda::rmsnorm_backward_weight_scratch_bytes(N, C));
  cuda::rmsnorm_backward_weight(stream_, dweight, dout, inp, rstd, N, C, scratch);
}

void CudaBackend::rotary_forward(float* x, const float* table, int64_t B, int64_t T, int64_t heads,
                                 int64_t HS, int64_t start) {
  cuda::rotary_forward(stream_, x, table, B, T, heads, HS, start);
}

void CudaBackend::rotary_backward(float* dx, const float* table, int64_t B, int64_t T,
                                  int64_t heads, int64_t HS, int64_t start) {
  cuda::rotary_backward(stream_, dx, table, B, T, heads, HS, start);
}

void CudaBackend::swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  cuda::swiglu_forward(stream_, out, gate, up, n);
}

void CudaBackend::swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                                  const float* up, int64_t n) {
  cuda::swiglu_backward(stream_, dgate, dup, dout, gate, up, n);
}

// ---- embeddings
void CudaBackend::embedding_forward(float* out, const int32_t* tokens, const float* wte, int64_t N,
                                    int64_t C, int64_t vocab_start, int64_t V_local) {
  cuda::embedding_forward(stream_, out, tokens, wte, N, C, vocab_start, V_local);
}

void CudaBackend::embedding_backward(float* dwte, const float* dout, const int32_t* tokens,
                                     int64_t N, int64_t C, int64_t vocab_start, int64_t V_local) {
  void* scratch = scratch_.get(*this, cuda::embedding_backward_scratch_bytes(N));
  cuda::embedding_backward(stream_, dwte, dout, tokens, N, C, vocab_start, V_local, scratch);
}

void CudaBackend::position_embedding_forward(float* out, const float* wpe, int64_t B, int64_t T,
                                             int64_t C) {
  cuda::position_embedding_forward(stream_, out, wpe, B, T, C);
}

void CudaBackend::position_embedding_backward(float* dwpe, const float* dout, int64_t B, int64_t T,
                                              int64_t C) {
  cuda::position_embedding_backward(stream_, dwpe, dout, B, T, C);
}

// ---- cross-entropy pieces
void CudaBackend::xent_row_max(float* row_max, const float* logits, int64_t N, int64_t V_local,
                               int64_t V_valid) {
  cuda::xent_row_max(stream_, row_max, logits, N, V_local, V_valid);
}

void CudaBackend::xent_row_sumexp(float* row_sumexp, const float* logits, const float* row_max,
                                  int64_t N, int64_t V_local, int64_t V_valid) {
  cuda::xent_row_sumexp(stream_, row_sumexp, logits, row_max, N, V_local, V_valid);
}

void CudaBackend::xent_target_logit(float* target_logit, const float* logits,
                                    const int32_t* targets, int64_t N, int64_t V_local,
                                    int64_t vocab_start) {
  cuda::xent_target_logit(stream_, target_logit, logits, targets, N, V_local, vocab_start);
}

void CudaBackend::xent_loss(float* losses, const float* row_max, const float* row_sumexp,
                            const float* target_logit, int64_t N) {
  cuda::xent_loss(stream_, losses, row_max, row_sumexp, target_logit, N);
}

void CudaBackend::xent_backward(float* logits, const float* row_max, const float* row_sumexp,
                                const int32_t* targets, int64_t N, int64_t V_local, int64_t V_valid,
                                int64_t vocab_start, float loss_scale) {
  cuda::xent_backward(stream_, logits, row_max, row_sumexp, targets, N, V_local, V_valid,
                      vocab_start, loss_scale);
}

// ---- reductions: the double lands in pinned memory, then the host waits for it
double CudaBackend::reduce_to_host(bool squares, const float* x, int64_t n) {
  void* scratch = scratch_.get(*this, cuda::full_sum_scratch_bytes());
  if (squares) {
    cuda::sum_squares(stream_, device_result_, x, n, scratch);
  } else {
    cuda::sum(stream_, device_result_, x, n, scratch);
  }
  GPT_CUDA_CHECK(cudaMemcpyAsync(host_result_, device_result_, sizeof(double),
                                 cudaMemcpyDeviceToHost, stream_));
  GPT_CUDA_CHECK(cudaStreamSynchronize(stream_));
  return *host_result_;
}

double CudaBackend::sum(const float* x, int64_t n) {
  return reduce_to_host(false, x, n);
}

double CudaBackend::sum_squares(const float* x, int64_t n) {
  return reduce_to_host(true, x, n);
}

// ---- optimizers: the runs become a table of blocks, uploaded once (the runs never change
// within a run of the program), so each step is one launch.
const UpdateBlock* CudaBackend::update_blocks(std::span<const ParameterRun> runs,
                                              int64_t* n_blocks) {
  const bool same = runs.size() == table_runs_.size() &&
                    std::equal(runs.begin(), runs.end(), table_runs_.begin(),
                               [](const ParameterRun& a, const ParameterRun& b) {
                                 return a.offset == b.offset && a.numel == b.numel &&
                                        a.weight_decay == b.weight_decay;
                               });
  if (!same) {
    std::vector<UpdateBlock> blocks;
    for (const ParameterRun& run : runs) {
      for (int64_t start = 0; start < run.numel; start += kUpdateBlockElements) {
        const int64_t numel = std::min(kUpdateBlockElements, run.numel - start);
        blocks.push_back(
            {run.offset + start, static_cast<int32_t>(numel), run.weight_decay ? 1 : 0});
      }
    }
    void* table = update_table_.get(*this, sizeof(UpdateBlock) * (blocks.size() + 1));
    copy_from_host(table, blocks.data(), sizeof(UpdateBlock) * blocks.size());
    table_runs_.assign(runs.begin(), runs.end());
    table_blocks_ = static_cast<int64_t>(blocks.size());
  }
  *n_blocks = table_blocks_;
  return static_cast<const UpdateBlock*>(update_table_.data());
}

void CudaBackend::adamw_update(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                               std::span<const ParameterRun> runs, const AdamWStep& decayed,
                               const AdamWStep& undecayed) {
  int64_t n_blocks = 0;
  const UpdateBlock* blocks = update_blocks(runs, &n_blocks);
  cuda::adamw_update(stream_, param, grad, exp_avg, exp_avg_sq, blocks, n_blocks, decayed,
                     undecayed);
}

void CudaBackend::sgd_update(float* param, const float* grad, float* momentum_buffer,
                             std::span<const ParameterRun> runs, const SgdStep& decayed,
                             const SgdStep& undecayed) {
  GPT_CHECK(momentum_buffer != nullptr || (decayed.momentum == 0.0f && undecayed.momentum == 0.0f),
            "sgd_update with momentum needs a buffer");
  int64_t n_blocks = 0;
  const UpdateBlock* blocks = update_blocks(runs, &n_blocks);
  cuda::sgd_update(stream_, param, grad, momentum_buffer, blocks, n_blocks, decayed, undecayed);
}

}  // namespace cuda

// ---- the CUDA entry points of backend.h
std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options) {
  GPT_INPUT_CHECK(cuda_device_count() > 0, "--device cuda: no CUDA device is visible");
  return std::make_unique<cuda::CudaBackend>(options);
}

int cuda_device_count() {
  int count = 0;
  // No device, or no driver at all (a build machine): both mean "none" to the caller.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error so later calls do not report it
    return 0;
  }
  return count;
}

size_t cuda_free_memory(int device) {
  GPT_CUDA_CHECK(cudaSetDevice(device));
  size_t free_bytes = 0, total_bytes = 0;
  GPT_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

std::string cuda_device_uuid(int device) {
  cudaDeviceProp prop{};
  GPT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  std::string uuid;
  char hex[3];
  for (char byte : prop.uuid.bytes) {
    std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(byte));
    uuid += hex;
  }
  return uuid;
}

}  // namespace gpt
