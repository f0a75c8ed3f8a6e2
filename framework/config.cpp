// ModelConfig arithmetic, validation and its JSON form.
#include "framework/config.h"

#include <cmath>

#include "framework/check.h"
#include "framework/json.h"

namespace gpt {

const char* arch_name(Arch arch) {
  return arch == Arch::kLlama ? "llama" : "gpt2";
}

Arch parse_arch(const std::string& name, const std::string& what) {
  if (name == "gpt2") return Arch::kGpt2;
  if (name == "llama") return Arch::kLlama;
  fail_input(what + " must be gpt2 or llama (got " + quoted_excerpt(name) + ")");
}

int64_t ModelConfig::ffn_dim() const {
  if (ffn_hidden > 0) return ffn_hidden;
  if (!llama()) return 4 * d_model;
  // Llama's reference rule: two thirds of 4C (the SwiGLU MLP has three matrices), rounded up.
  constexpr int64_t kMultiple = 256;
  const int64_t two_thirds = 2 * 4 * d_model / 3;
  return (two_thirds + kMultiple - 1) / kMultiple * kMultiple;
}

int64_t ModelConfig::padded_vocab(int64_t tp) const {
  const int64_t multiple = 64 * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

int64_t ModelConfig::num_parameters(bool include_wpe) const {
  const int64_t C = d_model, F = ffn_dim();
  if (!llama()) {
    const int64_t per_layer =
        2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (F * C + F) + (C * F + C);
    int64_t n = vocab_size * C + n_layer * per_layer + 2 * C;
    if (include_wpe) n += seq_len * C;
    return n;
  }
  const int64_t Q = q_channels(), KV = kv_channels();
  const int64_t attention =
      C * Q + 2 * C * KV + Q * C + (qkv_bias ? Q + 2 * KV : 0) + (qk_norm ? 2 * head_dim() : 0);
  const int64_t per_layer = 2 * C + attention + 3 * C * F;
  return vocab_size * C * (tied_head() ? 1 : 2) + n_layer * per_layer + C;
}

double ModelConfig::flops_per_token() const {
  const int64_t lookup = llama() && !tied_head() ? vocab_size * d_model : 0;
  return 6.0 * static_cast<double>(num_parameters(false) - lookup) +
         12.0 * static_cast<double>(n_layer * seq_len * q_channels());
}

void ModelConfig::validate(const std::string& from_file) const {
  // Values from a file are named by the file and its keys: the user gave no such option.
  const std::string where = from_file.empty() ? "" : from_file + ": ";
  const auto name = [&](const char* option, const char* key) {
    return from_file.empty() ? std::string("--") + option : std::string(key);
  };
  const auto in_range = [&](int64_t value, int64_t low, int64_t high, const char* option,
                            const char* key) {
    GPT_INPUT_CHECK(value >= low && value <= high, where << name(option, key) << " must be in ["
                                                         << low << ", " << high << "] (got "
                                                         << value << ")");
  };
  in_range(n_layer, 1, kMaxLayers, "n-layer", "n_layer");
  in_range(n_head, 1, kMaxWidth, "n-head", "n_head");
  in_range(d_model, 1, kMaxWidth, "d-model", "d_model");
  in_range(seq_len, 1, kMaxSeqLen, "seq-len", "seq_len");
  in_range(vocab_size, 2, kMaxVocab, "vocab-size", "vocab_size");
  in_range(n_kv_head, 0, kMaxWidth, "n-kv-head", "n_kv_head");
  in_range(head_size, 0, kMaxWidth, "head-dim", "head_dim");
  in_range(ffn_hidden, 0, int64_t{1} << 20, "ffn-hidden-size", "ffn_hidden_size");
  if (!llama()) {
    // GPT-2's shape has none of the Llama options: one given is a mistake, not a no-op.
    const ModelConfig gpt2_defaults{};
    const auto gpt2_only = [&](bool is_default, const char* option, const char* key) {
      GPT_INPUT_CHECK(is_default, where << name(option, key) << " is for --arch llama only");
    };
    gpt2_only(n_kv_head == 0, "n-kv-head", "n_kv_head");
    gpt2_only(head_size == 0, "head-dim", "head_dim");
    gpt2_only(ffn_hidden == 0, "ffn-hidden-size", "ffn_hidden_size");
    gpt2_only(rope_theta == gpt2_defaults.rope_theta, "rope-theta", "rope_theta");
    gpt2_only(rope_scaling.type == RopeScaling::kNone, "rope-scaling", "rope_scaling");
    gpt2_only(norm_eps == gpt2_defaults.norm_eps, "norm-eps", "norm_eps");
    gpt2_only(!tie_embeddings, "tie-embeddings", "tie_embeddings");
    gpt2_only(!qkv_bias, "qkv-bias", "qkv_bias");
    gpt2_only(!qk_norm, "qk-norm", "qk_norm");
    GPT_INPUT_CHECK(d_model % n_head == 0, where << name("n-head", "n_head") << " " << n_head
                                                 << " does not divide "
                                                 << name("d-model", "d_model") << " " << d_model);
    return;
  }
  GPT_INPUT_CHECK(head_size > 0 || d_model % n_head == 0,
                  where << name("n-head", "n_head") << " " << n_head << " does not divide "
                        << name("d-model", "d_model") << " " << d_model << " (or give "
                        << name("head-dim", "head_dim") << ")");
  GPT_INPUT_CHECK(head_dim() % 2 == 0, where << "the head size " << head_dim()
                                             << " must be even (rotary positions turn pairs)");
  GPT_INPUT_CHECK(n_head % kv_heads() == 0, where << name("n-kv-head", "n_kv_head") << " "
                                                  << kv_heads() << " does not divide "
                                                  << name("n-head", "n_head") << " " << n_head);
  GPT_INPUT_CHECK(q_channels() <= kMaxWidth,
                  where << "n_head * head_dim " << q_channels() << " exceeds " << kMaxWidth);
  GPT_INPUT_CHECK(std::isfinite(rope_theta) && rope_theta > 1.0 && rope_theta <= 1e12,
                  where << name("rope-theta", "rope_theta") << " must be in (1, 1e12] (got "
                        << rope_theta << ")");
  GPT_INPUT_CHECK(
      std::isfinite(norm_eps) && norm_eps > 0 && norm_eps < 1,
      where << name("norm-eps", "norm_eps") << " must be in (0, 1) (got " << norm_eps << ")");
  if (rope_scaling.type == RopeScaling::kLlama3) {
    const RopeScalingParams& r = rope_scaling;
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

namespace {

const char* rope_scaling_name(RopeScaling type) {
  return type == RopeScaling::kLlama3 ? "llama3" : "none";
}

}  // namespace

void to_json(Json& json, const ModelConfig& m) {
  if (m.llama()) json["arch"] = arch_name(m.arch);
  json["n_layer"] = m.n_layer;
  json["n_head"] = m.n_head;
  json["d_model"] = m.d_model;
  json["seq_len"] = m.seq_len;
  json["vocab_size"] = m.vocab_size;
  if (!m.llama()) return;
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

ModelConfig model_config_from_json(const Json& json, const std::string& what) {
  ModelConfig m;
  if (json.contains("arch"))
    m.arch = parse_arch(json_field<std::string>(json, "arch", what), what + ": arch");
  m.n_layer = json_field<int64_t>(json, "n_layer", what);
  m.n_head = json_field<int64_t>(json, "n_head", what);
  m.d_model = json_field<int64_t>(json, "d_model", what);
  m.seq_len = json_field<int64_t>(json, "seq_len", what);
  m.vocab_size = json_field<int64_t>(json, "vocab_size", what);
  if (m.llama()) {
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
  m.validate(what);
  return m;
}

std::string shortest_text(double value) {
  return Json(value).dump();
}

std::string model_shape_options(const ModelConfig& model) {
  if (!model.llama()) return "";
  std::string out;
  for (const ModelField& field : kArchFields) {
    const std::string value = field.text(model);
    if (value.empty()) continue;
    out += std::string(out.empty() ? "" : " ") + "--" + field.option;
    if (value != "on") out += " " + value;
  }
  return out;
}

}  // namespace gpt
