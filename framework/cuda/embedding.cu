// Token and position embeddings on the CUDA backend. The token backward sorts the rows by token
// (CUB's stable radix sort) and adds each token's rows in their original order: deterministic,
// no atomics, and the same additions in the same order as the CPU.
#include <cub/cub.cuh>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "framework/check.h"
#include "framework/cuda/cuda_check.h"
#include "framework/cuda/grid_stride.cuh"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kBackwardThreads = 128;  // channels per block in the token backward
// Bytes of one of the four sort arrays (keys in/out, rows in/out), padded so each starts aligned.
size_t sort_array_bytes(int64_t N) {
  return static_cast<size_t>(cuda_sort_array_bytes(N));
}

__device__ bool is_local(int64_t local_row, int64_t V_local) {
  return local_row >= 0 && local_row < V_local;
}

// Flat over the n outputs, rows of C elements: floats, or float4 groups (then n and C count
// groups); tokens of other ranks give zero rows (T{} is zero).
template <typename T>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const T* wte, int64_t n,
                                         int64_t C, int64_t vocab_start, int64_t V_local) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const int64_t row = i / C;
    const int64_t c = i - row * C;
    const int64_t local = tokens[row] - vocab_start;
    out[i] = is_local(local, V_local) ? wte[local * C + c] : T{};
  }
}

// Sort keys: the local row of the token, or V_local for other ranks' tokens (sorted last and
// skipped). Values: the row index, which the stable sort keeps ascending within a token.
__global__ void embedding_sort_keys_kernel(uint32_t* keys, int32_t* rows, const int32_t* tokens,
                                           int64_t N, int64_t vocab_start, int64_t V_local) {
  for (int64_t i = first_index(); i < N; i += grid_stride()) {
    const int64_t local = tokens[i] - vocab_start;
    keys[i] = static_cast<uint32_t>(is_local(local, V_local) ? local : V_local);
    rows[i] = static_cast<int32_t>(i);
  }
}

// Block x = sorted position i; only the first position of a run of equal keys works, adding the
// run's rows in sorted (= original) order onto dwte's row, as the CPU does. Threads and grid y
// stride over the channels.
__global__ void embedding_backward_kernel(float* dwte, const float* dout, const uint32_t* keys,
                                          const int32_t* rows, int64_t N, int64_t C,
                                          int64_t V_local) {
  const int64_t i = blockIdx.x;
  const uint32_t key = keys[i];
  if (static_cast<int64_t>(key) >= V_local || (i > 0 && keys[i - 1] == key)) return;
  int64_t end = i + 1;
  while (end < N && keys[end] == key) end++;
  float* dst = dwte + static_cast<int64_t>(key) * C;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.y;
  for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < C;
       c += stride) {
    float acc = dst[c];
    for (int64_t j = i; j < end; j++) acc += dout[static_cast<int64_t>(rows[j]) * C + c];
    dst[c] = acc;
  }
}

// dwpe (T*C) += sum over b of dout (B, T*C), b in order; floats, or float4 groups (then TC counts
// groups).
template <typename T>
__global__ void position_backward_kernel(T* dwpe, const T* dout, int64_t B, int64_t TC) {
  for (int64_t i = first_index(); i < TC; i += grid_stride()) {
    T acc = dwpe[i];
    for (int64_t b = 0; b < B; b++) add_to(acc, dout[b * TC + i]);
    dwpe[i] = acc;
  }
}

}  // namespace

void embedding_forward(cudaStream_t stream, float* out, const int32_t* tokens, const float* wte,
                       int64_t N, int64_t C, int64_t vocab_start, int64_t V_local) {
  GPT_CHECK(N >= 0 && C > 0 && V_local >= 0,
            "embedding_forward with N=" << N << " C=" << C << " V_local=" << V_local);
  const int64_t n = N * C;
  if (n == 0) return;
  if (C % 4 == 0 && is_aligned(out, 16) && is_aligned(wte, 16)) {
    embedding_forward_kernel<float4><<<grid_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), tokens, reinterpret_cast<const float4*>(wte), n / 4, C / 4,
        vocab_start, V_local);
  } else {
    embedding_forward_kernel<float><<<grid_for(n, kThreads), kThreads, 0, stream>>>(
        out, tokens, wte, n, C, vocab_start, V_local);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

// CUB's temporary storage is sized for all 32 key bits: it only grows with the bits sorted, so it
// covers any V_local. The query launches nothing. The scratch is the host formula's bound
// (framework/cuda_scratch.h), so that the memory model knows it; CUB asking for more is a bug of
// that bound, reported here rather than as a write past the scratch.
size_t embedding_backward_scratch_bytes(int64_t N) {
  GPT_CHECK(N >= 0 && N <= INT_MAX, "embedding_backward_scratch_bytes with N=" << N);
  if (N == 0) return 0;
  size_t cub_bytes = 0;
  GPT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, cub_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(N), 0,
      32));
  GPT_CHECK(static_cast<int64_t>(cub_bytes) <= cuda_radix_sort_bound_bytes(N),
            "CUB's radix sort of " << N << " pairs asks for " << cub_bytes
                                   << " bytes, more than the bound of framework/cuda_scratch.h ("
                                   << cuda_radix_sort_bound_bytes(N) << ")");
  return static_cast<size_t>(cuda_embedding_backward_scratch_bytes(N));
}

void embedding_backward(cudaStream_t stream, float* dwte, const float* dout, const int32_t* tokens,
                        int64_t N, int64_t C, int64_t vocab_start, int64_t V_local, void* scratch) {
  GPT_CHECK(N >= 0 && N <= INT_MAX && C > 0 && V_local >= 0 && V_local < UINT32_MAX,
            "embedding_backward with N=" << N << " C=" << C << " V_local=" << V_local);
  if (N == 0 || V_local == 0) return;
  const size_t array_bytes = sort_array_bytes(N);
  char* base = static_cast<char*>(scratch);
  uint32_t* keys_in = reinterpret_cast<uint32_t*>(base);
  uint32_t* keys_out = reinterpret_cast<uint32_t*>(base + array_bytes);
  int32_t* rows_in = reinterpret_cast<int32_t*>(base + 2 * array_bytes);
  int32_t* rows_out = reinterpret_cast<int32_t*>(base + 3 * array_bytes);
  void* cub_temp = base + 4 * array_bytes;
  size_t cub_bytes = embedding_backward_scratch_bytes(N) - 4 * array_bytes;

  embedding_sort_keys_kernel<<<grid_for(N, kThreads), kThreads, 0, stream>>>(
      keys_in, rows_in, tokens, N, vocab_start, V_local);
  GPT_CUDA_CHECK_LAUNCH();
  // Keys lie in [0, V_local]: sort only the bits that can differ.
  int end_bit = 1;
  while ((int64_t{1} << end_bit) <= V_local) end_bit++;
  // CUB checks cub_bytes against what these bits need and fails the call if it is short.
  GPT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(cub_temp, cub_bytes, keys_in, keys_out, rows_in,
                                                 rows_out, static_cast<int>(N), 0, end_bit,
                                                 stream));
  const unsigned channel_blocks = static_cast<unsigned>(
      std::min<int64_t>((C + kBackwardThreads - 1) / kBackwardThreads, 65535));
  embedding_backward_kernel<<<dim3(static_cast<unsigned>(N), channel_blocks), kBackwardThreads, 0,
                              stream>>>(dwte, dout, keys_out, rows_out, N, C, V_local);
  GPT_CUDA_CHECK_LAUNCH();
}

// The same operation as add_bias with rows of T*C: out (B, T*C) += wpe (T*C) on every row.
void position_embedding_forward(cudaStream_t stream, float* out, const float* wpe, int64_t B,
                                int64_t T, int64_t C) {
  GPT_CHECK(B >= 0 && T > 0 && C > 0,
            "position_embedding_forward with B=" << B << " T=" << T << " C=" << C);
  add_bias(stream, out, wpe, B, T * C);
}

void position_embedding_backward(cudaStream_t stream, float* dwpe, const float* dout, int64_t B,
                                 int64_t T, int64_t C) {
  GPT_CHECK(B >= 0 && T > 0 && C > 0,
            "position_embedding_backward with B=" << B << " T=" << T << " C=" << C);
  const int64_t TC = T * C;
  if (B == 0) return;
  if (TC % 4 == 0 && is_aligned(dwpe, 16) && is_aligned(dout, 16)) {
    position_backward_kernel<float4><<<grid_for(TC / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(dwpe), reinterpret_cast<const float4*>(dout), B, TC / 4);
  } else {
    position_backward_kernel<float>
        <<<grid_for(TC, kThreads), kThreads, 0, stream>>>(dwpe, dout, B, TC);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
