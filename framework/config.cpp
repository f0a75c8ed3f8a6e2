// ModelConfig arithmetic, validation and its JSON form.
#include "framework/config.h"

#include "framework/check.h"
#include "framework/json.h"

namespace gpt {

int64_t ModelConfig::padded_vocab(int64_t tp) const {
  const int64_t multiple = 64 * tp;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

int64_t ModelConfig::num_parameters(bool include_wpe) const {
  const int64_t C = d_model, F = ffn_dim();
  const int64_t per_layer =
      2 * C + (3 * C * C + 3 * C) + (C * C + C) + 2 * C + (F * C + F) + (C * F + C);
  int64_t n = vocab_size * C + n_layer * per_layer + 2 * C;
  if (include_wpe) n += seq_len * C;
  return n;
}

double ModelConfig::flops_per_token() const {
  return 6.0 * static_cast<double>(num_parameters(false)) +
         12.0 * static_cast<double>(n_layer * seq_len * d_model);
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
  GPT_INPUT_CHECK(d_model % n_head == 0, where << name("n-head", "n_head") << " " << n_head
                                               << " does not divide " << name("d-model", "d_model")
                                               << " " << d_model);
  in_range(seq_len, 1, kMaxSeqLen, "seq-len", "seq_len");
  in_range(vocab_size, 2, kMaxVocab, "vocab-size", "vocab_size");
}

void to_json(Json& json, const ModelConfig& m) {
  json["n_layer"] = m.n_layer;
  json["n_head"] = m.n_head;
  json["d_model"] = m.d_model;
  json["seq_len"] = m.seq_len;
  json["vocab_size"] = m.vocab_size;
}

ModelConfig model_config_from_json(const Json& json, const std::string& what) {
  ModelConfig m;
  m.n_layer = json_field<int64_t>(json, "n_layer", what);
  m.n_head = json_field<int64_t>(json, "n_head", what);
  m.d_model = json_field<int64_t>(json, "d_model", what);
  m.seq_len = json_field<int64_t>(json, "seq_len", what);
  m.vocab_size = json_field<int64_t>(json, "vocab_size", what);
  m.validate(what);
  return m;
}

}  // namespace gpt
