// ModelConfig arithmetic, validation and its JSON form; what depends on the family is the
// family's (framework/families/).
#include "framework/config.h"

#include "framework/check.h"
#include "framework/families/model_family.h"
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
  return ffn_hidden > 0 ? ffn_hidden : family_of(*this).default_ffn_dim(*this);
}

int64_t ModelConfig::padded_vocab(int64_t tp) const {
  const int64_t multiple = 64 * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

int64_t ModelConfig::num_parameters(bool include_positions) const {
  return family_of(*this).num_parameters(*this, include_positions);
}

double ModelConfig::flops_per_token() const {
  return family_of(*this).flops_per_token(*this);
}

void ModelConfig::validate(const std::string& from_file) const {
  // Values from a file are named by the file and its keys: the user gave no such option.
  const FieldNames name{from_file};
  const std::string where = name.where();
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
  family_of(*this).validate(*this, name);
}

void to_json(Json& json, const ModelConfig& m) {
  const ModelFamily& family = family_of(m);
  if (family.writes_arch) json["arch"] = arch_name(m.arch);
  json["n_layer"] = m.n_layer;
  json["n_head"] = m.n_head;
  json["d_model"] = m.d_model;
  json["seq_len"] = m.seq_len;
  json["vocab_size"] = m.vocab_size;
  family.write_fields(json, m);
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
  family_of(m).read_fields(json, what, m);
  m.validate(what);
  return m;
}

std::string shortest_text(double value) {
  return Json(value).dump();
}

std::string model_shape_options(const ModelConfig& model) {
  if (!family_of(model).takes_shape_options) return "";
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
