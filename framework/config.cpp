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

void ModelConfig::validate() const {
  GPT_INPUT_CHECK(n_layer >= 1, "--n-layer must be at least 1 (got " << n_layer << ")");
  GPT_INPUT_CHECK(n_head >= 1, "--n-head must be at least 1 (got " << n_head << ")");
  GPT_INPUT_CHECK(d_model >= 1, "--d-model must be at least 1 (got " << d_model << ")");
  GPT_INPUT_CHECK(d_model % n_head == 0,
                  "--n-head " << n_head << " does not divide --d-model " << d_model);
  GPT_INPUT_CHECK(seq_len >= 1, "--seq-len must be at least 1 (got " << seq_len << ")");
  GPT_INPUT_CHECK(vocab_size >= 2, "vocabulary size must be at least 2 (got " << vocab_size << ")");
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
  m.validate();
  return m;
}

}  // namespace gpt
