// Per-element formulas shared by the CPU and CUDA backends (docs/DESIGN.md "Backends"): GELU with
// the tanh approximation, LayerNorm's and RMSNorm's normalisation and gradients, SwiGLU, the
// rotary turn, the AdamW and SGD updates of one element. Written once as inline functions usable on
// host and device, so both backends compute the same math; the row and column reductions around
// them stay in the backends.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define GPT_HOST_DEVICE __host__ __device__
#else
#define GPT_HOST_DEVICE
#endif

namespace gpt {

inline constexpr float kLayerNormEps = 1e-5f;
inline constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluCubic = 0.044715f;

// exp(x) in float without a library call, so loops over it vectorise: x = n ln2 + r with
// |r| <= ln2/2 (ln2 split in two parts for an exact n ln2), e^r from the degree-6 minimax
// polynomial of the Cephes library's expf (about 1 ulp), times 2^n built in the exponent bits.
// Below -87.3 the result is 0 (as exp(-inf) must be); NaN stays NaN.
GPT_HOST_DEVICE inline float fast_expf(float x) {
  const float clamped = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  const float n = floorf(clamped * 1.44269504089f + 0.5f);
  const float r = (clamped - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e_r = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
#if defined(__CUDA_ARCH__)
  const float two_n = __int_as_float(bits);
#else
  const float two_n = __builtin_bit_cast(float, bits);  // std::bit_cast blocks vectorising
#endif
  const float result = x < -87.3f ? 0.0f : e_r * two_n;
  return x != x ? x : result;
}

// tanh(u) = 1 - 2 / (e^{2u} + 1): exact limits +-1, absolute error about 1e-7 (what GELU needs:
// it adds tanh to 1), and no library call.
GPT_HOST_DEVICE inline float fast_tanhf(float u) {
  return 1.0f - 2.0f / (fast_expf(2.0f * u) + 1.0f);
}

// GELU(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (Hendrycks & Gimpel 2016)
GPT_HOST_DEVICE inline float gelu_tanh(float x) {
  float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + fast_tanhf(inner));
}

// d GELU(x) / dx for the tanh form above.
GPT_HOST_DEVICE inline float gelu_tanh_grad(float x) {
  float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  float t = fast_tanhf(inner);
  float sech2 = 1.0f - t * t;
  return 0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

// LayerNorm (biased variance) of one element of a row with statistics mean and rstd =
// 1/sqrt(var + kLayerNormEps): the normalised input xhat = (x - mean) * rstd, and the output
// xhat * weight + bias.
GPT_HOST_DEVICE inline float layernorm_xhat(float x, float mean, float rstd) {
  return (x - mean) * rstd;
}

GPT_HOST_DEVICE inline float layernorm_output(float x, float mean, float rstd, float weight,
                                              float bias) {
  return layernorm_xhat(x, mean, rstd) * weight + bias;
}

// LayerNorm's backward from the output gradient dy of one element: the gradient of xhat,
// dxhat = dy * weight (dweight += dy * xhat and dbias += dy are plain column sums) ...
GPT_HOST_DEVICE inline float layernorm_dxhat(float dy, float weight) {
  return dy * weight;
}

// ... and the input gradient rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), given the
// two means over the row's C elements.
GPT_HOST_DEVICE inline float layernorm_dinp(float dxhat, float xhat, float rstd, float mean_dxhat,
                                            float mean_dxhat_xhat) {
  return rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
}

// RMSNorm (Llama's, in float32): xhat = x * rstd with rstd = 1/sqrt(mean(x^2) + eps), output
// xhat * weight (transformers' LlamaRMSNorm order). The backward's dxhat = dy * weight, and the
// input gradient rstd * (dxhat - xhat * mean(dxhat * xhat)) given that mean over the row.
GPT_HOST_DEVICE inline float rmsnorm_output(float x, float rstd, float weight) {
  return (x * rstd) * weight;
}

GPT_HOST_DEVICE inline float rmsnorm_dinp(float dxhat, float xhat, float rstd,
                                          float mean_dxhat_xhat) {
  return rstd * (dxhat - xhat * mean_dxhat_xhat);
}

// Either norm, for the row loops that serve both: LayerNorm when kCentered, else RMSNorm, whose
// xhat is layernorm_xhat's with mean 0 and which has no bias (nor mean(dxhat) in its gradient).
template <bool kCentered>
GPT_HOST_DEVICE inline float norm_output(float x, float mean, float rstd, float weight,
                                         float bias) {
  if constexpr (kCentered) return layernorm_output(x, mean, rstd, weight, bias);
  return rmsnorm_output(x, rstd, weight);
}

template <bool kCentered>
GPT_HOST_DEVICE inline float norm_dinp(float dxhat, float xhat, float rstd, float mean_dxhat,
                                       float mean_dxhat_xhat) {
  if constexpr (kCentered) return layernorm_dinp(dxhat, xhat, rstd, mean_dxhat, mean_dxhat_xhat);
  return rmsnorm_dinp(dxhat, xhat, rstd, mean_dxhat_xhat);
}

// SiLU(g) = g * sigmoid(g); SwiGLU's output silu(gate) * up and its two gradients.
GPT_HOST_DEVICE inline float sigmoid_of(float x) {
  return 1.0f / (1.0f + fast_expf(-x));
}

GPT_HOST_DEVICE inline float swiglu_output(float gate, float up) {
  return gate * sigmoid_of(gate) * up;
}

// d/dgate of silu(gate) * up times dy: dy * up * s * (1 + gate * (1 - s)), s = sigmoid(gate).
GPT_HOST_DEVICE inline float swiglu_dgate(float dy, float gate, float up) {
  const float s = sigmoid_of(gate);
  return dy * up * s * (1.0f + gate * (1.0f - s));
}

GPT_HOST_DEVICE inline float swiglu_dup(float dy, float gate) {
  return dy * gate * sigmoid_of(gate);
}

// Rotary positions in the rotate-half form: the pair (a, b) = (x[i], x[i + HS/2]) of a head turns
// by the angle whose cosine and sine are c and s: (a c - b s, b c + a s). The backward turns a
// gradient pair by the negative angle: (da c + db s, db c - da s).
GPT_HOST_DEVICE inline void rotary_turn(float& a, float& b, float c, float s) {
  const float a0 = a, b0 = b;
  a = a0 * c - b0 * s;
  b = b0 * c + a0 * s;
}

GPT_HOST_DEVICE inline void rotary_turn_back(float& da, float& db, float c, float s) {
  const float a0 = da, b0 = db;
  da = a0 * c + b0 * s;
  db = b0 * c - a0 * s;
}

// One AdamW step's scalars, derived in double from (lr, betas, eps, wd, step t) the way
// torch.optim.AdamW derives its Python-float scalars, then rounded to float once:
// decay_factor = 1 - lr*wd, step_size = lr / (1 - beta1^t), bias_correction2_sqrt =
// sqrt(1 - beta2^t). Use make_adamw_step.
struct AdamWStep {
  float decay_factor;  // 1 for parameters without weight decay
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float eps;
  float step_size;
  float bias_correction2_sqrt;
};

inline AdamWStep make_adamw_step(double lr, double beta1, double beta2, double eps,
                                 double weight_decay, int64_t t) {
  AdamWStep s{};
  s.decay_factor = static_cast<float>(1.0 - lr * weight_decay);
  s.beta1 = static_cast<float>(beta1);
  s.one_minus_beta1 = static_cast<float>(1.0 - beta1);
  s.beta2 = static_cast<float>(beta2);
  s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
  s.eps = static_cast<float>(eps);
  s.step_size = static_cast<float>(lr / (1.0 - std::pow(beta1, static_cast<double>(t))));
  s.bias_correction2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(beta2, static_cast<double>(t))));
  return s;
}

// torch.optim.AdamW for one element, in torch's operation order: decoupled decay p *= 1 - lr*wd,
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= step_size * m / (sqrt(v)/sqrt(bc2) + eps).
GPT_HOST_DEVICE inline void adamw_element(float& p, float g, float& m, float& v,
                                          const AdamWStep& s) {
  p *= s.decay_factor;
  m = m * s.beta1 + s.one_minus_beta1 * g;
  v = v * s.beta2 + s.one_minus_beta2 * (g * g);
  const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  p -= s.step_size * (m / denom);
}

// Hyper-parameters of one SGD step (torch.optim.SGD, dampening 0, no Nesterov).
struct SgdStep {
  float lr;
  float momentum;
  float weight_decay;  // 0 for parameters without decay
  bool first_step;     // torch initialises the momentum buffer to the first gradient
};

// torch.optim.SGD for one element: g += wd p; buf = g (first step) or momentum*buf + g; p -= lr
// buf.
GPT_HOST_DEVICE inline void sgd_element(float& p, float g, float& buf, const SgdStep& s) {
  g += s.weight_decay * p;
  if (s.momentum != 0.0f) {
    buf = s.first_step ? g : s.momentum * buf + g;
    g = buf;
  }
  p -= s.lr * g;
}

}  // namespace gpt
