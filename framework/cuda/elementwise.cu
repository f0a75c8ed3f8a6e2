// Flat elementwise kernels of the CUDA backend: bf16 conversion both ways and rounding, GELU and
// SwiGLU forward and backward, accumulate, scale, add_bias. float4 accesses when the size and
// pointers allow, else scalar.
#include <algorithm>
#include <cstdint>

#include "framework/cuda/cuda_check.h"
#include "framework/cuda/grid_stride.cuh"
#include "framework/cuda/kernels.h"

namespace gpt::cuda {

namespace {

constexpr int kThreads = 256;

struct GeluForward {
  __device__ float operator()(float x) const { return gelu_tanh(x); }
};
struct Scale {
  float factor;
  __device__ float operator()(float x) const { return x * factor; }
};
struct GeluBackward {  // (dout, inp), the CPU's product order
  __device__ float operator()(float dout, float inp) const { return gelu_tanh_grad(inp) * dout; }
};
struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct RoundToBf16 {
  __device__ float operator()(float x) const { return __bfloat162float(__float2bfloat16_rn(x)); }
};
struct SwiGluForward {  // (gate, up)
  __device__ float operator()(float gate, float up) const { return swiglu_output(gate, up); }
};

// SwiGLU's two gradients of one element, and of four (the float4 path).
__device__ inline void swiglu_grads(float& dgate, float& dup, float dy, float gate, float up) {
  dgate = swiglu_dgate(dy, gate, up);
  dup = swiglu_dup(dy, gate);
}
__device__ inline void swiglu_grads(float4& dgate, float4& dup, float4 dy, float4 gate, float4 up) {
  swiglu_grads(dgate.x, dup.x, dy.x, gate.x, up.x);
  swiglu_grads(dgate.y, dup.y, dy.y, gate.y, up.y);
  swiglu_grads(dgate.z, dup.z, dy.z, gate.z, up.z);
  swiglu_grads(dgate.w, dup.w, dy.w, gate.w, up.w);
}

// out may alias inp (scale runs in place): each element is read and written by one thread.
template <typename Op>
__global__ void unary_kernel(float* out, const float* inp, int64_t n, Op op) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = op(inp[i]);
}

template <typename Op>
__global__ void unary_kernel4(float4* out, const float4* inp, int64_t n4, Op op) {
  for (int64_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 v = inp[i];
    out[i] = make_float4(op(v.x), op(v.y), op(v.z), op(v.w));
  }
}

template <typename Op>
__global__ void binary_kernel(float* out, const float* a, const float* b, int64_t n, Op op) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = op(a[i], b[i]);
}

template <typename Op>
__global__ void binary_kernel4(float4* out, const float4* a, const float4* b, int64_t n4, Op op) {
  for (int64_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 u = a[i];
    const float4 v = b[i];
    out[i] = make_float4(op(u.x, v.x), op(u.y, v.y), op(u.z, v.z), op(u.w, v.w));
  }
}

template <typename Op>
void launch_unary(cudaStream_t stream, float* out, const float* inp, int64_t n, Op op) {
  if (n <= 0) return;
  if (n % 4 == 0 && is_aligned(out, 16) && is_aligned(inp, 16)) {
    unary_kernel4<<<grid_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), reinterpret_cast<const float4*>(inp), n / 4, op);
  } else {
    unary_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, inp, n, op);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

template <typename Op>
void launch_binary(cudaStream_t stream, float* out, const float* a, const float* b, int64_t n,
                   Op op) {
  if (n <= 0) return;
  if (n % 4 == 0 && is_aligned(out, 16) && is_aligned(a, 16) && is_aligned(b, 16)) {
    binary_kernel4<<<grid_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), reinterpret_cast<const float4*>(a),
        reinterpret_cast<const float4*>(b), n / 4, op);
  } else {
    binary_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, a, b, n, op);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

// T: float, or float4 (then n counts groups).
template <typename T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* dout, const T* gate, const T* up,
                                       int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    T dg, du;
    swiglu_grads(dg, du, dout[i], gate[i], up[i]);
    dgate[i] = dg;
    dup[i] = du;
  }
}

__global__ void convert_to_bf16_kernel(__nv_bfloat16* out, const float* inp, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = __float2bfloat16_rn(inp[i]);
}

// Four floats in, two bf16 pairs out (4-byte stores).
__global__ void convert_to_bf16_kernel4(__nv_bfloat162* out, const float4* inp, int64_t n4) {
  for (int64_t i = first_index(); i < n4; i += grid_stride()) {
    const float4 v = inp[i];
    out[2 * i] = __floats2bfloat162_rn(v.x, v.y);
    out[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
  }
}

__global__ void convert_from_bf16_kernel(float* out, const __nv_bfloat16* inp, int64_t n) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) out[i] = __bfloat162float(inp[i]);
}

// out (N,C) += bias (C), flat over the n = N*C elements: floats, or float4 groups (then n and C
// count groups).
template <typename T>
__global__ void add_bias_kernel(T* out, const T* bias, int64_t n, int64_t C) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    T v = out[i];
    add_to(v, bias[i % C]);
    out[i] = v;
  }
}

}  // namespace

void convert_to_bf16(cudaStream_t stream, __nv_bfloat16* out, const float* inp, int64_t n) {
  if (n <= 0) return;
  if (n % 4 == 0 && is_aligned(out, 4) && is_aligned(inp, 16)) {
    convert_to_bf16_kernel4<<<grid_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<__nv_bfloat162*>(out), reinterpret_cast<const float4*>(inp), n / 4);
  } else {
    convert_to_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, inp, n);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

void convert_from_bf16(cudaStream_t stream, float* out, const __nv_bfloat16* inp, int64_t n) {
  if (n <= 0) return;
  convert_from_bf16_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, inp, n);
  GPT_CUDA_CHECK_LAUNCH();
}

void round_to_bf16(cudaStream_t stream, float* x, int64_t n) {
  launch_unary(stream, x, x, n, RoundToBf16{});
}

void gelu_forward(cudaStream_t stream, float* out, const float* inp, int64_t n) {
  launch_unary(stream, out, inp, n, GeluForward{});
}

// Written, not accumulated, as on the CPU.
void gelu_backward(cudaStream_t stream, float* dinp, const float* dout, const float* inp,
                   int64_t n) {
  launch_binary(stream, dinp, dout, inp, n, GeluBackward{});
}

void swiglu_forward(cudaStream_t stream, float* out, const float* gate, const float* up,
                    int64_t n) {
  launch_binary(stream, out, gate, up, n, SwiGluForward{});
}

// Written, not accumulated, as on the CPU: gate and up have no other consumer.
void swiglu_backward(cudaStream_t stream, float* dgate, float* dup, const float* dout,
                     const float* gate, const float* up, int64_t n) {
  if (n <= 0) return;
  if (n % 4 == 0 && is_aligned(dgate, 16) && is_aligned(dup, 16) && is_aligned(dout, 16) &&
      is_aligned(gate, 16) && is_aligned(up, 16)) {
    swiglu_backward_kernel<float4><<<grid_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(dgate), reinterpret_cast<float4*>(dup),
        reinterpret_cast<const float4*>(dout), reinterpret_cast<const float4*>(gate),
        reinterpret_cast<const float4*>(up), n / 4);
  } else {
    swiglu_backward_kernel<float>
        <<<grid_for(n, kThreads), kThreads, 0, stream>>>(dgate, dup, dout, gate, up, n);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

void accumulate(cudaStream_t stream, float* y, const float* x, int64_t n) {
  launch_binary(stream, y, y, x, n, Add{});
}

void scale(cudaStream_t stream, float* x, float factor, int64_t n) {
  launch_unary(stream, x, x, n, Scale{factor});
}

void add_bias(cudaStream_t stream, float* out, const float* bias, int64_t N, int64_t C) {
  const int64_t n = N * C;
  if (n <= 0) return;
  // C % 4 == 0 keeps every float4 of a row inside one row and its bias aligned.
  if (C % 4 == 0 && is_aligned(out, 16) && is_aligned(bias, 16)) {
    add_bias_kernel<float4><<<grid_for(n / 4, kThreads), kThreads, 0, stream>>>(
        reinterpret_cast<float4*>(out), reinterpret_cast<const float4*>(bias), n / 4, C / 4);
  } else {
    add_bias_kernel<float><<<grid_for(n, kThreads), kThreads, 0, stream>>>(out, bias, n, C);
  }
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
