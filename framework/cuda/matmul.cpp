// CudaBackend's matrix products through cuBLASLt, in the column-major shapes of gemm_layout.h.
// Float32 accumulation always; in bf16 precision both operands are first rounded to bfloat16
// into arena scratch, except a weight with a compute copy (WeightOperand), which the product
// reads where it lies; D stays float32.
#include <algorithm>
#include <cstdint>

#include "framework/cuda/cuda_backend.h"
#include "framework/cuda/cuda_check.h"

namespace gpt::cuda {
namespace {

// The largest power of two (up to 256) dividing the address: cuBLASLt must be told, or it may
// choose a kernel that assumes 16-byte vector loads on a parameter at an odd float offset.
int alignment_of(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  int alignment = 256;
  while (alignment > 4 && address % static_cast<uintptr_t>(alignment) != 0) alignment /= 2;
  return alignment;
}

}  // namespace

void CudaBackend::matmul_forward(float* out, const float* inp, WeightOperand weight,
                                 const float* bias, int64_t N, int64_t IC, int64_t OC) {
  gemm(linear_forward_gemm(N, IC, OC), weight.values, inp, out, 0.0f, bias, weight.bf16);
}

void CudaBackend::matmul_backward_input(float* dinp, const float* dout, WeightOperand weight,
                                        int64_t N, int64_t IC, int64_t OC, bool accumulate) {
  gemm(linear_backward_input_gemm(N, IC, OC), weight.values, dout, dinp, accumulate ? 1.0f : 0.0f,
       nullptr, weight.bf16);
}

void CudaBackend::matmul_backward_weight(float* dweight, float* dbias, const float* dout,
                                         const float* inp, int64_t N, int64_t IC, int64_t OC) {
  gemm(linear_backward_weight_gemm(N, IC, OC), inp, dout, dweight, 1.0f, nullptr);
  if (dbias != nullptr) bias_backward(dbias, dout, N, OC);
}

CudaBackend::GemmPlan::~GemmPlan() {
  // No checks: plans are destroyed with the backend, possibly while an error unwinds.
  if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
  if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
  if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
  if (op != nullptr) cublasLtMatmulDescDestroy(op);
}

namespace {

// The preference of one heuristic query, destroyed on every path out.
struct Preference {
  cublasLtMatmulPreference_t handle = nullptr;
  ~Preference() {
    if (handle != nullptr) cublasLtMatmulPreferenceDestroy(handle);
  }
};

}  // namespace

const CudaBackend::GemmPlan* CudaBackend::plan_for(const GemmShape& s, const float* bias,
                                                   const void* A, const void* B, const void* D) {
  const int align_a = alignment_of(A), align_b = alignment_of(B), align_d = alignment_of(D);
  const int align_bias = bias != nullptr ? alignment_of(bias) : 0;
  const GemmKey key{s.transpose_a, s.transpose_b,   s.m,     s.n,     s.k,     s.lda,     s.ldb,
                    s.ldd,         bias != nullptr, align_a, align_b, align_d, align_bias};
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second.get();

  auto plan = std::make_unique<GemmPlan>();
  const cudaDataType_t operand_type =
      options_.precision == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_32F;
  GPT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = s.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = s.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  GPT_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)));
  GPT_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)));
  if (bias != nullptr) {
    // This call's pointer for the heuristic; each later call sets its own (same alignment).
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                    &epilogue, sizeof(epilogue)));
    GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof(bias)));
  }
  // Stored shapes: op_a(A) is m x k, op_b(B) is k x n.
  const auto rows_a = static_cast<uint64_t>(s.transpose_a ? s.k : s.m);
  const auto cols_a = static_cast<uint64_t>(s.transpose_a ? s.m : s.k);
  const auto rows_b = static_cast<uint64_t>(s.transpose_b ? s.n : s.k);
  const auto cols_b = static_cast<uint64_t>(s.transpose_b ? s.k : s.n);
  GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->a, operand_type, rows_a, cols_a, s.lda));
  GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->b, operand_type, rows_b, cols_b, s.ldb));
  GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->d, CUDA_R_32F, static_cast<uint64_t>(s.m),
                                              static_cast<uint64_t>(s.n), s.ldd));

  Preference preference;
  GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference.handle));
  const uint64_t workspace = kGemmWorkspaceBytes;
  GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  const uint32_t alignments[4] = {static_cast<uint32_t>(align_a), static_cast<uint32_t>(align_b),
                                  static_cast<uint32_t>(align_d), static_cast<uint32_t>(align_d)};
  const cublasLtMatmulPreferenceAttributes_t alignment_attributes[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i) {
    GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference.handle, alignment_attributes[i], &alignments[i], sizeof(alignments[i])));
  }
  if (options_.deterministic) {
    // Split-K kernels that add their partial products in place may do so in any order.
    const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        preference.handle, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction,
        sizeof(no_reduction)));
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found_count = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt_, plan->op, plan->a, plan->b, plan->d, plan->d,
                                     preference.handle, 1, &result, &found_count);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || found_count == 0) plan.reset();
  if (plan) {
    GPT_CUBLAS_CHECK(status);
    plan->algorithm = result.algo;
  }
  return plans_.emplace(key, std::move(plan)).first->second.get();
}

void CudaBackend::gemm(const GemmShape& s, const float* A, const float* B, float* D, float beta,
                       const float* bias, const uint16_t* a_bf16) {
  if (s.m == 0 || s.n == 0) return;
  if (s.k == 0) {  // an empty sum: D = beta D (+ bias)
    if (beta == 0.0f) fill_zero(D, s.m * s.n);
    if (bias != nullptr) add_bias(D, bias, s.n, s.m);
    return;
  }
  const void* a = A;
  const void* b = B;
  if (options_.precision == Precision::kBf16) {
    const int64_t b_elements = gemm_b_elements(s);
    if (a_bf16 != nullptr) {  // a weight's compute copy: read as it is
      a = a_bf16;
    } else {
      const int64_t a_elements = gemm_a_elements(s);
      auto* a16 = static_cast<__nv_bfloat16*>(
          operand_a_.get(*this, sizeof(__nv_bfloat16) * static_cast<size_t>(a_elements)));
      convert_to_bf16(stream_, a16, A, a_elements);
      a = a16;
    }
    auto* b16 = static_cast<__nv_bfloat16*>(
        operand_b_.get(*this, sizeof(__nv_bfloat16) * static_cast<size_t>(b_elements)));
    convert_to_bf16(stream_, b16, B, b_elements);
    b = b16;
  }
  const GemmPlan* plan = plan_for(s, bias, a, b, D);
  const bool fused_bias = plan != nullptr && bias != nullptr;
  if (plan == nullptr && bias != nullptr) {
    // No kernel fuses the bias at this shape and alignment: the plain product, then our kernel.
    plan = plan_for(s, nullptr, a, b, D);
  }
  GPT_CHECK(plan != nullptr, "cuBLASLt has no algorithm for a " << s.m << " x " << s.n << " x "
                                                                << s.k << " product");
  if (fused_bias) {
    GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                    &bias, sizeof(bias)));
  }
  const float alpha = 1.0f;
  GPT_CUBLAS_CHECK(cublasLtMatmul(lt_, plan->op, &alpha, a, plan->a, b, plan->b, &beta, D, plan->d,
                                  D, plan->d, &plan->algorithm, gemm_workspace_,
                                  kGemmWorkspaceBytes, stream_));
  if (bias != nullptr && !fused_bias) add_bias(D, bias, s.n, s.m);
}

}  // namespace gpt::cuda
