// GPT-2 (Radford et al. 2019), exactly: pre-LayerNorm blocks, learned positions, a GELU (tanh)
// MLP of width 4C, biases on every linear and norm, one fused c_attn, the head tied to wte.
// Names are GPT-2's checkpoint names (h.L.attn.c_attn, ...). Its Hugging Face format is
// gpt2_hf.cpp's, its llm.c file framework/io/llmc_weights.h's.
#include <string>

#include "framework/check.h"
#include "framework/families/model_family.h"

namespace gpt {

const HfFormat& gpt2_hf_format();  // gpt2_hf.cpp

namespace {

NormSpec norm(const std::string& name, int64_t C) {
  return {.name = name, .C = C, .rms = false, .eps = 1e-5f, .heads = 0};
}

struct Gpt2 {
  static constexpr Arch kArch = Arch::kGpt2;
  static constexpr bool kWritesArch = false;
  static constexpr bool kTakesShapeOptions = false;

  static BlockDescription describe(const ModelConfig&) {
    BlockDescription d;
    d.norm = NormKind::kLayerNorm;
    d.positions = PositionKind::kLearned;
    d.mlp = MlpKind::kGelu;
    d.fused_qkv = true;
    d.tied_head = true;
    // LayerNorms, bias adds, GELU and residual adds (in Megatron the two fused
    // bias-dropout-adds); backward: the norms' and residuals' gradients, GELU's backward and the
    // bias sums.
    d.traffic = {.forward_c = 14,
                 .forward_c_megatron = 11,
                 .forward_f = 2,
                 .forward_qk = 0,
                 .backward_c = 12,
                 .backward_f = 4,
                 .backward_qk = 2};
    return d;
  }

  static BlockParameters block_parameters(const ModelConfig& m, int64_t layer, int64_t) {
    const std::string h = "h." + std::to_string(layer) + ".";
    const int64_t C = m.d_model, F = 4 * C;
    const float residual = residual_projection_init_std(m.n_layer);
    return {
        .attn_norm = norm(h + "ln_1", C),
        .qkv = {{.name = h + "attn.c_attn", .in_features = C, .out_features = 3 * C, .groups = 3}},
        .attn_out = {.name = h + "attn.c_proj",
                     .in_features = C,
                     .out_features = C,
                     .init_std = residual},
        .qk_norms = {},
        .mlp_norm = norm(h + "ln_2", C),
        .mlp_in = {{.name = h + "mlp.c_fc", .in_features = C, .out_features = F}},
        .mlp_out = {
            .name = h + "mlp.c_proj", .in_features = F, .out_features = C, .init_std = residual}};
  }

  static EdgeParameters edge_parameters(const ModelConfig& m) {
    return {.token_embedding = "wte",
            .untied_head = "",
            .positions = "wpe",
            .init_std = kLinearInitStd,
            .final_norm = norm("ln_f", m.d_model)};
  }

  static int64_t default_ffn_dim(const ModelConfig& m) { return 4 * m.d_model; }

  static int64_t num_parameters(const ModelConfig& m, bool include_positions) {
    const int64_t C = m.d_model, F = m.ffn_dim();
    const int64_t per_layer =
        2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (F * C + F) + (C * F + C);
    int64_t n = m.vocab_size * C + m.n_layer * per_layer + 2 * C;
    if (include_positions) n += m.seq_len * C;
    return n;
  }

  // As published: every parameter but wpe (wte counts once, as the head's product).
  static double flops_per_token(const ModelConfig& m) {
    return 6.0 * static_cast<double>(num_parameters(m, false)) +
           12.0 * static_cast<double>(m.n_layer * m.seq_len * m.q_channels());
  }

  static void validate(const ModelConfig& m, const FieldNames& name) {
    // GPT-2's shape has none of the Llama family's options: one given is a mistake, not a no-op.
    const ModelConfig defaults{};
    const auto gpt2_only = [&](bool is_default, const char* option, const char* key) {
      GPT_INPUT_CHECK(is_default, name.where() << name(option, key) << " is for --arch llama only");
    };
    gpt2_only(m.n_kv_head == 0, "n-kv-head", "n_kv_head");
    gpt2_only(m.head_size == 0, "head-dim", "head_dim");
    gpt2_only(m.ffn_hidden == 0, "ffn-hidden-size", "ffn_hidden_size");
    gpt2_only(m.rope_theta == defaults.rope_theta, "rope-theta", "rope_theta");
    gpt2_only(m.rope_scaling.type == RopeScaling::kNone, "rope-scaling", "rope_scaling");
    gpt2_only(m.norm_eps == defaults.norm_eps, "norm-eps", "norm_eps");
    gpt2_only(!m.tie_embeddings, "tie-embeddings", "tie_embeddings");
    gpt2_only(!m.qkv_bias, "qkv-bias", "qkv_bias");
    gpt2_only(!m.qk_norm, "qk-norm", "qk_norm");
    GPT_INPUT_CHECK(m.d_model % m.n_head == 0, name.where() << name("n-head", "n_head") << " "
                                                            << m.n_head << " does not divide "
                                                            << name("d-model", "d_model") << " "
                                                            << m.d_model);
  }

  static void validate_tp(const ModelConfig& m, int64_t tp) {
    GPT_INPUT_CHECK(m.d_model % tp == 0,
                    "--tp " << tp << " does not divide --d-model " << m.d_model);
  }

  // GPT-2's checkpoints hold the five plain fields only, as they always have.
  static void write_fields(nlohmann::ordered_json&, const ModelConfig&) {}
  static void read_fields(const nlohmann::ordered_json&, const std::string&, ModelConfig&) {}

  static ModelConfig shape(int64_t layers, int64_t heads, int64_t width, int64_t seq_len) {
    ModelConfig m;
    m.n_layer = layers, m.n_head = heads, m.d_model = width, m.seq_len = seq_len;
    return m;
  }

  // GPT-2's published sizes, and two small ones for CPUs; the vocabulary is the data set's.
  static const HfFormat& hf_format() { return gpt2_hf_format(); }

  static std::span<const ModelPreset> presets() {
    static const ModelPreset kPresets[] = {{"tiny", shape(2, 4, 32, 16), false},
                                           {"small", shape(4, 8, 512, 256), false},
                                           {"gpt2", shape(12, 12, 768, 1024), false},
                                           {"gpt2-medium", shape(24, 16, 1024, 1024), false}};
    return kPresets;
  }
};

}  // namespace

const ModelFamily& gpt2_family() {
  return family_from<Gpt2>();
}

}  // namespace gpt
