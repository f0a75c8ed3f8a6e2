// Per-element formulas shared by the CPU and CUDA backends (DESIGN.md "Backends"): GELU with the
// tanh approximation, LayerNorm's epsilon, the AdamW and SGD updates of one element. Written once
// as inline functions usable on host and device, so both backends compute the same math.
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

// GELU(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (Hendrycks & Gimpel 2016)
GPT_HOST_DEVICE inline float gelu_tanh(float x) {
  float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}

// d GELU(x) / dx for the tanh form above.
GPT_HOST_DEVICE inline float gelu_tanh_grad(float x) {
  float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  float t = tanhf(inner);
  float sech2 = 1.0f - t * t;
  return 0.5f * (1.0f + t) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
}

// Hyper-parameters of one AdamW step, with the bias corrections of step t (1-based) precomputed
// as in torch.optim.AdamW: bias_correction1 = 1 - beta1^t, bias_correction2 = 1 - beta2^t.
struct AdamWStep {
  float lr;
  float beta1;
  float beta2;
  float eps;
  float weight_decay;  // 0 for parameters without decay
  float bias_correction1;
  float bias_correction2;
};

// torch.optim.AdamW for one element, in torch's operation order: decoupled decay p *= 1 - lr*wd,
// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps).
GPT_HOST_DEVICE inline void adamw_element(float& p, float g, float& m, float& v, const AdamWStep& s) {
  p *= 1.0f - s.lr * s.weight_decay;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  float step_size = s.lr / s.bias_correction1;
  float denom = sqrtf(v) / sqrtf(s.bias_correction2) + s.eps;
  p -= step_size * (m / denom);
}

// Hyper-parameters of one SGD step (torch.optim.SGD, dampening 0, no Nesterov).
struct SgdStep {
  float lr;
  float momentum;
  float weight_decay;  // 0 for parameters without decay
  bool first_step;     // torch initialises the momentum buffer to the first gradient
};

// torch.optim.SGD for one element: g += wd p; buf = g (first step) or momentum*buf + g; p -= lr buf.
GPT_HOST_DEVICE inline void sgd_element(float& p, float g, float& buf, const SgdStep& s) {
  g += s.weight_decay * p;
  if (s.momentum != 0.0f) {
    buf = s.first_step ? g : s.momentum * buf + g;
    g = buf;
  }
  p -= s.lr * g;
}

}  // namespace gpt
