// The Llama family (Llama 2 and 3, Mistral, Qwen2, Qwen3; transformers' LlamaForCausalLM and its
// kin): pre-RMSNorm blocks, rotary positions (optionally Llama 3.1's scaling), grouped-query
// attention, a SwiGLU MLP, no biases but Qwen2's on q, k and v, Qwen3's RMSNorm over each head's
// q and k, and an untied head unless tie_embeddings. Names are Hugging Face's without "model."
// (layers.L.self_attn.q_proj, ...). Its Hugging Face format is llama_hf.cpp's.
#include <cmath>
#include <string>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "framework/json.h"

namespace gpt {

const HfFormat& llama_hf_format();  // llama_hf.cpp

namespace {

NormSpec rms_norm(const std::string& name, int64_t C, const ModelConfig& m, int64_t heads = 0) {
  return {.name = name, .C = C, .rms = true, .eps = static_cast<float>(m.norm_eps), .heads = heads};
}

const char* rope_scaling_name(RopeScaling type) {
  return type == RopeScaling::kLlama3 ? "llama3" : "none";
}

// A preset from its published config.json (Hugging Face): layers, heads, kv heads, width, MLP
// width, vocabulary, rope theta, RMSNorm eps; seq_len is the trained context capped at 4096.
ModelConfig shape(int64_t layers, int64_t heads, int64_t kv_heads, int64_t width, int64_t ffn,
                  int64_t vocab, double theta, double eps, int64_t seq_len) {
  ModelConfig m;
  m.arch = Arch::kLlama;
  m.n_layer = layers, m.n_head = heads, m.n_kv_head = kv_heads, m.d_model = width;
  m.ffn_hidden = ffn, m.vocab_size = vocab, m.rope_theta = theta, m.norm_eps = eps;
  m.seq_len = seq_len;
  return m;
}

ModelConfig llama3_405b() {  // Llama-3.1-405B, with its rope scaling
  ModelConfig m = shape(126, 128, 8, 16384, 53248, 128256, 500000.0, 1e-5, 4096);
  m.rope_scaling.type = RopeScaling::kLlama3;
  return m;
}

ModelConfig qwen25_7b() {  // Qwen2.5-7B: biases on q, k and v
  ModelConfig m = shape(28, 28, 4, 3584, 18944, 152064, 1000000.0, 1e-6, 4096);
  m.qkv_bias = true;
  return m;
}

ModelConfig qwen3_8b() {  // Qwen3-8B: head_dim 128 and q/k norms
  ModelConfig m = shape(36, 32, 8, 4096, 12288, 151936, 1000000.0, 1e-6, 4096);
  m.head_size = 128, m.qk_norm = true;
  return m;
}

struct Llama {
  static constexpr Arch kArch = Arch::kLlama;
  static constexpr bool kWritesArch = true;
  static constexpr bool kTakesShapeOptions = true;

  static BlockDescription describe(const ModelConfig& m) {
    BlockDescription d;
    d.norm = NormKind::kRmsNorm;
    d.norm_eps = static_cast<float>(m.norm_eps);
    d.positions = PositionKind::kRotary;
    d.mlp = MlpKind::kSwiGlu;
    d.fused_qkv = false;
    d.qk_norm = m.qk_norm;
    d.tied_head = m.tie_embeddings;
    // Two RMSNorms and two residual adds over C, SwiGLU (reads gate and up, writes their
    // product) and the rotation of q and k in place; backward: the norms' and residuals'
    // gradients, SwiGLU's (reads its gradient, gate and up, writes theirs), the rotations back.
    d.traffic = {.forward_c = 10,
                 .forward_c_megatron = 10,
                 .forward_f = 3,
                 .forward_qk = 2,
                 .backward_c = 12,
                 .backward_f = 5,
                 .backward_qk = 2};
    return d;
  }

  static BlockParameters block_parameters(const ModelConfig& m, int64_t layer, int64_t tp) {
    const std::string h = "layers." + std::to_string(layer) + ".";
    const int64_t C = m.d_model, F = m.ffn_dim(), Q = m.q_channels(), KV = m.kv_channels();
    const float residual = residual_projection_init_std(m.n_layer);
    const auto projection = [&](const char* name, int64_t width, int64_t replicas) {
      return LinearSpec{.name = h + "self_attn." + name,
                        .in_features = C,
                        .out_features = width,
                        .bias = m.qkv_bias,
                        .tp_replicas = replicas};
    };
    BlockParameters p{
        .attn_norm = rms_norm(h + "input_layernorm", C, m),
        .qkv = {projection("q_proj", Q, 1), projection("k_proj", KV, m.kv_replicas(tp)),
                projection("v_proj", KV, m.kv_replicas(tp))},
        .attn_out = {.name = h + "self_attn.o_proj",
                     .in_features = Q,
                     .out_features = C,
                     .init_std = residual,
                     .bias = false},
        .qk_norms = {},
        .mlp_norm = rms_norm(h + "post_attention_layernorm", C, m),
        .mlp_in =
            {{.name = h + "mlp.gate_proj", .in_features = C, .out_features = F, .bias = false},
             {.name = h + "mlp.up_proj", .in_features = C, .out_features = F, .bias = false}},
        .mlp_out = {.name = h + "mlp.down_proj",
                    .in_features = F,
                    .out_features = C,
                    .init_std = residual,
                    .bias = false}};
    if (m.qk_norm)
      p.qk_norms = {rms_norm(h + "self_attn.q_norm", m.head_dim(), m, m.n_head / tp),
                    rms_norm(h + "self_attn.k_norm", m.head_dim(), m, m.kv_heads_per_rank(tp))};
    return p;
  }

  static EdgeParameters edge_parameters(const ModelConfig& m) {
    return {.token_embedding = "embed_tokens.weight",
            .untied_head = m.tie_embeddings ? "" : "lm_head.weight",
            .positions = "",
            .init_std = kLinearInitStd,
            .final_norm = rms_norm("norm", m.d_model, m)};
  }

  // Llama's reference rule: two thirds of 4C (the SwiGLU MLP has three matrices), rounded up to a
  // multiple of 256.
  static int64_t default_ffn_dim(const ModelConfig& m) {
    constexpr int64_t kMultiple = 256;
    const int64_t two_thirds = 2 * 4 * m.d_model / 3;
    return (two_thirds + kMultiple - 1) / kMultiple * kMultiple;
  }

  static int64_t num_parameters(const ModelConfig& m, bool) {
    const int64_t C = m.d_model, F = m.ffn_dim(), Q = m.q_channels(), KV = m.kv_channels();
    const int64_t attention = C * Q + 2 * C * KV + Q * C + (m.qkv_bias ? Q + 2 * KV : 0) +
                              (m.qk_norm ? 2 * m.head_dim() : 0);
    const int64_t per_layer = 2 * C + attention + 3 * C * F;
    return m.vocab_size * C * (m.tie_embeddings ? 1 : 2) + m.n_layer * per_layer + C;
  }

  // The input embedding is a lookup and leaves out, unless it is the tied head's product.
  static double flops_per_token(const ModelConfig& m) {
    const int64_t lookup = m.tie_embeddings ? 0 : m.vocab_size * m.d_model;
    return 6.0 * static_cast<double>(num_parameters(m, false) - lookup) +
           12.0 * static_cast<double>(m.n_layer * m.seq_len * m.q_channels());
  }

  static void validate(const ModelConfig& m, const FieldNames& name) {
    const std::string where = name.where();
    GPT_INPUT_CHECK(m.head_size > 0 || m.d_model % m.n_head == 0,
                    where << name("n-head", "n_head") << " " << m.n_head << " does not divide "
                          << name("d-model", "d_model") << " " << m.d_model << " (or give "
                          << name("head-dim", "head_dim") << ")");
    GPT_INPUT_CHECK(m.head_dim() % 2 == 0, where << "the head size " << m.head_dim()
                                                 << " must be even (rotary positions turn pairs)");
    GPT_INPUT_CHECK(m.n_head % m.kv_heads() == 0,
                    where << name("n-kv-head", "n_kv_head") << " " << m.kv_heads()
                          << " does not divide " << name("n-head", "n_head") << " " << m.n_head);
    GPT_INPUT_CHECK(m.q_channels() <= kMaxWidth,
                    where << "n_head * head_dim " << m.q_channels() << " exceeds " << kMaxWidth);
    GPT_INPUT_CHECK(std::isfinite(m.rope_theta) && m.rope_theta > 1.0 && m.rope_theta <= 1e12,
                    where << name("rope-theta", "rope_theta") << " must be in (1, 1e12] (got "
                          << m.rope_theta << ")");
    GPT_INPUT_CHECK(
        std::isfinite(m.norm_eps) && m.norm_eps > 0 && m.norm_eps < 1,
        where << name("norm-eps", "norm_eps") << " must be in (0, 1) (got " << m.norm_eps << ")");
    if (m.rope_scaling.type == RopeScaling::kLlama3) {
      const RopeScalingParams& r = m.rope_scaling;
      GPT_INPUT_CHECK(std::isfinite(r.factor) && r.factor >= 1 && r.factor <= 1e4 &&
                          std::isfinite(r.low_freq_factor) && r.low_freq_factor > 0 &&
                          std::isfinite(r.high_freq_factor) &&
                          r.high_freq_factor > r.low_freq_factor && r.high_freq_factor <= 1e4 &&
                          r.original_max_positions >= 1 && r.original_max_positions <= kMaxSeqLen,
                      where << name("rope-scaling", "rope_scaling")
                            << " llama3 needs factor >= 1, 0 < low_freq_factor < high_freq_factor "
                               "and original_max_position_embeddings >= 1");
    }
  }

  static void validate_tp(const ModelConfig& m, int64_t tp) {
    GPT_INPUT_CHECK(m.kv_heads() % tp == 0 || tp % m.kv_heads() == 0,
                    "--tp " << tp << " and --n-kv-head " << m.kv_heads()
                            << ": one must divide the other (tp ranks split the key/value heads, "
                               "or share each one)");
    GPT_INPUT_CHECK(m.ffn_dim() % tp == 0,
                    "--tp " << tp << " does not divide --ffn-hidden-size " << m.ffn_dim());
  }

  static void write_fields(Json& json, const ModelConfig& m) {
    json["n_kv_head"] = m.kv_heads();
    json["head_dim"] = m.head_dim();
    json["ffn_hidden_size"] = m.ffn_dim();
    json["rope_theta"] = m.rope_theta;
    Json scaling;
    scaling["type"] = rope_scaling_name(m.rope_scaling.type);
    if (m.rope_scaling.type == RopeScaling::kLlama3) {
      scaling["factor"] = m.rope_scaling.factor;
      scaling["low_freq_factor"] = m.rope_scaling.low_freq_factor;
      scaling["high_freq_factor"] = m.rope_scaling.high_freq_factor;
      scaling["original_max_position_embeddings"] = m.rope_scaling.original_max_positions;
    }
    json["rope_scaling"] = scaling;
    json["norm_eps"] = m.norm_eps;
    json["tie_embeddings"] = m.tie_embeddings;
    json["qkv_bias"] = m.qkv_bias;
    json["qk_norm"] = m.qk_norm;
  }

  static void read_fields(const Json& json, const std::string& what, ModelConfig& m) {
    m.n_kv_head = json_field<int64_t>(json, "n_kv_head", what);
    m.head_size = json_field<int64_t>(json, "head_dim", what);
    m.ffn_hidden = json_field<int64_t>(json, "ffn_hidden_size", what);
    m.rope_theta = json_field<double>(json, "rope_theta", what);
    const Json scaling = json_field<Json>(json, "rope_scaling", what);
    const std::string scaling_what = what + ": rope_scaling";
    GPT_INPUT_CHECK(scaling.is_object(), scaling_what << " must be an object");
    const std::string type = json_field<std::string>(scaling, "type", scaling_what);
    if (type == "llama3") {
      m.rope_scaling.type = RopeScaling::kLlama3;
      m.rope_scaling.factor = json_field<double>(scaling, "factor", scaling_what);
      m.rope_scaling.low_freq_factor = json_field<double>(scaling, "low_freq_factor", scaling_what);
      m.rope_scaling.high_freq_factor =
          json_field<double>(scaling, "high_freq_factor", scaling_what);
      m.rope_scaling.original_max_positions =
          json_field<int64_t>(scaling, "original_max_position_embeddings", scaling_what);
    } else {
      GPT_INPUT_CHECK(type == "none", scaling_what << ": type must be none or llama3 (got "
                                                   << quoted_excerpt(type) << ")");
    }
    m.norm_eps = json_field<double>(json, "norm_eps", what);
    m.tie_embeddings = json_field<bool>(json, "tie_embeddings", what);
    m.qkv_bias = json_field<bool>(json, "qkv_bias", what);
    m.qk_norm = json_field<bool>(json, "qk_norm", what);
  }

  static const HfFormat& hf_format() { return llama_hf_format(); }

  static std::span<const ModelPreset> presets() {
    static const ModelPreset kPresets[] = {
        {"llama-tiny", shape(2, 4, 2, 64, 128, 256, 10000.0, 1e-5, 32), true},
        // Meta-Llama-3-8B and -70B
        {"llama3-8b", shape(32, 32, 8, 4096, 14336, 128256, 500000.0, 1e-5, 4096), true},
        {"llama3-70b", shape(80, 64, 8, 8192, 28672, 128256, 500000.0, 1e-5, 4096), true},
        {"llama3-405b", llama3_405b(), true},
        // Mistral-7B-v0.3 (no sliding window)
        {"mistral-7b", shape(32, 32, 8, 4096, 14336, 32768, 1000000.0, 1e-5, 4096), true},
        {"qwen2.5-7b", qwen25_7b(), true},
        {"qwen3-8b", qwen3_8b(), true}};
    return kPresets;
  }
};

}  // namespace

const ModelFamily& llama_family() {
  return family_from<Llama>();
}

}  // namespace gpt
