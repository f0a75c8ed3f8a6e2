// Hugging Face's Llama-family config.json and tensor names (see llama_weights.h).
#include "framework/io/llama_weights.h"

#include <algorithm>
#include <limits>
#include <set>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "framework/io/hdf5_util.h"
#include "framework/parameter.h"

namespace gpt {
namespace {

// Each architecture this project reads, with its model_type.
struct HfArchitecture {
  const char* architecture;
  const char* model_type;
};
constexpr HfArchitecture kHfArchitectures[] = {{"GPT2LMHeadModel", "gpt2"},
                                               {"LlamaForCausalLM", "llama"},
                                               {"MistralForCausalLM", "mistral"},
                                               {"Qwen2ForCausalLM", "qwen2"},
                                               {"Qwen3ForCausalLM", "qwen3"}};

std::string known_architectures() {
  std::string out;
  for (const HfArchitecture& a : kHfArchitectures)
    out += (out.empty() ? "" : ", ") + std::string(a.architecture);
  return out;
}

// A key that may be absent or null (Hugging Face writes null for "the default").
bool has_value(const Json& c, const std::string& key) {
  return c.contains(key) && !c.at(key).is_null();
}

// config[key] as an integer within [low, high], the error naming the file and the key.
int64_t int_key(const Json& c, const std::string& key, int64_t low, int64_t high,
                const std::string& what) {
  const auto value = json_field<int64_t>(c, key, what);
  GPT_INPUT_CHECK(value >= low && value <= high, what << ": " << key << " must be in [" << low
                                                      << ", " << high << "] (got " << value << ")");
  return value;
}

// A feature this project does not run, named by its key.
void refuse(bool in_use, const std::string& what, const std::string& key, const std::string& why) {
  GPT_INPUT_CHECK(!in_use, what << ": " << key << " " << why);
}

RopeScalingParams rope_scaling_from_hf(const Json& c, const std::string& what) {
  RopeScalingParams r;
  if (!has_value(c, "rope_scaling")) return r;
  const Json s = c.at("rope_scaling");
  const std::string scaling_what = what + ": rope_scaling";
  GPT_INPUT_CHECK(s.is_object(), scaling_what << " must be an object or null");
  const std::string type =
      json_field<std::string>(s, s.contains("rope_type") ? "rope_type" : "type", scaling_what);
  if (type == "default") return r;
  GPT_INPUT_CHECK(type == "llama3", scaling_what << ": type " << quoted_excerpt(type)
                                                 << " (this project runs none and llama3)");
  r.type = RopeScaling::kLlama3;
  r.factor = json_field<double>(s, "factor", scaling_what);
  r.low_freq_factor = json_field<double>(s, "low_freq_factor", scaling_what);
  r.high_freq_factor = json_field<double>(s, "high_freq_factor", scaling_what);
  r.original_max_positions =
      json_field<int64_t>(s, "original_max_position_embeddings", scaling_what);
  return r;
}

// The settings of the family this project does not have, each refused by its key.
void refuse_unsupported(const Json& c, const std::string& model_type, const std::string& what,
                        int64_t max_positions) {
  if (has_value(c, "hidden_act")) {
    const auto act = json_field<std::string>(c, "hidden_act", what);
    refuse(act != "silu", what, "hidden_act",
           quoted_excerpt(act) + " (this model's MLP is SwiGLU: silu)");
  }
  if (has_value(c, "mlp_bias"))
    refuse(json_field<bool>(c, "mlp_bias", what), what, "mlp_bias",
           "true (this model's MLP has no biases)");
  // Llama's and Qwen3's attention_bias also puts a bias on o_proj, which this model does not
  // have; Qwen2's q, k, v biases come with the architecture, without the key.
  if (model_type != "qwen2" && has_value(c, "attention_bias"))
    refuse(json_field<bool>(c, "attention_bias", what), what, "attention_bias",
           "true (a bias on o_proj too; this model has q, k, v biases only, as Qwen2)");
  for (const char* key : {"num_experts", "num_local_experts"})
    if (has_value(c, key))
      refuse(json_field<int64_t>(c, key, what) > 0, what, key,
             "> 0 (a mixture of experts; this model's MLP is dense)");
  // Qwen2 and Qwen3 carry a sliding_window that only use_sliding_window turns on; Mistral's is
  // on whenever it is shorter than the context.
  if (has_value(c, "use_sliding_window")) {
    refuse(json_field<bool>(c, "use_sliding_window", what), what, "use_sliding_window",
           "true (this model's attention sees every earlier position)");
  } else if (has_value(c, "sliding_window")) {
    const auto window = json_field<int64_t>(c, "sliding_window", what);
    refuse(window < max_positions, what, "sliding_window",
           std::to_string(window) + " is shorter than max_position_embeddings " +
               std::to_string(max_positions) +
               " (this model's attention sees every earlier position)");
  }
}

}  // namespace

std::string hf_model_type(const Json& c, const std::string& what) {
  // GPT-2 directories were read whatever their architectures said (GPT2Model, say): still so.
  if (has_value(c, "model_type") && json_field<std::string>(c, "model_type", what) == "gpt2")
    return "gpt2";
  if (has_value(c, "architectures")) {
    const auto names = json_field<std::vector<std::string>>(c, "architectures", what);
    GPT_INPUT_CHECK(names.size() == 1, what << ": architectures must name one architecture (got "
                                            << names.size() << ")");
    for (const HfArchitecture& a : kHfArchitectures)
      if (names[0] == a.architecture) return a.model_type;
    fail_input(what + ": architectures " + quoted_excerpt(names[0]) +
               " is not one this project reads (" + known_architectures() + ")");
  }
  if (!has_value(c, "model_type")) return "gpt2";
  const auto type = json_field<std::string>(c, "model_type", what);
  for (const HfArchitecture& a : kHfArchitectures)
    if (type == a.model_type) return a.model_type;
  fail_input(what + ": model_type " + quoted_excerpt(type) + " is not one this project reads (" +
             known_architectures() + ")");
}

ModelConfig llama_model_from_hf_config(const Json& c, const std::string& model_type,
                                       const std::string& what, int64_t seq_len) {
  ModelConfig m;
  m.arch = Arch::kLlama;
  m.d_model = int_key(c, "hidden_size", 1, kMaxWidth, what);
  m.ffn_hidden = int_key(c, "intermediate_size", 1, int64_t{1} << 20, what);
  m.n_head = int_key(c, "num_attention_heads", 1, kMaxWidth, what);
  m.n_kv_head = has_value(c, "num_key_value_heads")
                    ? int_key(c, "num_key_value_heads", 1, m.n_head, what)
                    : m.n_head;
  GPT_INPUT_CHECK(m.n_head % m.n_kv_head == 0, what << ": num_key_value_heads " << m.n_kv_head
                                                    << " does not divide num_attention_heads "
                                                    << m.n_head);
  if (has_value(c, "head_dim")) {
    m.head_size = int_key(c, "head_dim", 2, kMaxWidth, what);
  } else {
    GPT_INPUT_CHECK(m.d_model % m.n_head == 0, what << ": num_attention_heads " << m.n_head
                                                    << " does not divide hidden_size " << m.d_model
                                                    << " (and there is no head_dim)");
    m.head_size = m.d_model / m.n_head;
  }
  GPT_INPUT_CHECK(m.head_size % 2 == 0, what << ": the head size " << m.head_size
                                             << " must be even (rotary positions turn pairs)");
  m.n_layer = int_key(c, "num_hidden_layers", 1, kMaxLayers, what);
  m.vocab_size = int_key(c, "vocab_size", 2, kMaxVocab, what);
  const int64_t max_positions =
      int_key(c, "max_position_embeddings", 1, std::numeric_limits<int64_t>::max(), what);
  if (seq_len > 0) {
    GPT_INPUT_CHECK(seq_len <= max_positions, "--seq-len " << seq_len << " is longer than " << what
                                                           << "'s max_position_embeddings "
                                                           << max_positions);
    m.seq_len = seq_len;
  } else {
    m.seq_len = std::min(max_positions, kHfDefaultSeqLenCap);
  }
  // Hugging Face's defaults for these families where a config leaves a key out.
  m.norm_eps = has_value(c, "rms_norm_eps") ? json_field<double>(c, "rms_norm_eps", what) : 1e-6;
  m.rope_theta = has_value(c, "rope_theta") ? json_field<double>(c, "rope_theta", what) : 1e4;
  m.rope_scaling = rope_scaling_from_hf(c, what);
  m.tie_embeddings =
      has_value(c, "tie_word_embeddings") && json_field<bool>(c, "tie_word_embeddings", what);
  m.qkv_bias = model_type == "qwen2";
  m.qk_norm = model_type == "qwen3";
  refuse_unsupported(c, model_type, what, max_positions);
  m.validate(what);
  return m;
}

Json hf_llama_config(const ModelConfig& m, const std::string& torch_dtype) {
  GPT_INPUT_CHECK(!(m.qkv_bias && m.qk_norm),
                  "a model with both q, k, v biases and q, k norms has no Hugging Face "
                  "architecture (Qwen2 has the biases, Qwen3 the norms)");
  const char* architecture = m.qk_norm    ? "Qwen3ForCausalLM"
                             : m.qkv_bias ? "Qwen2ForCausalLM"
                                          : "LlamaForCausalLM";
  const char* model_type = m.qk_norm ? "qwen3" : m.qkv_bias ? "qwen2" : "llama";
  Json c = {{"architectures", {architecture}},
            {"model_type", model_type},
            {"hidden_size", m.d_model},
            {"intermediate_size", m.ffn_dim()},
            {"num_attention_heads", m.n_head},
            {"num_key_value_heads", m.kv_heads()},
            {"head_dim", m.head_dim()},
            {"num_hidden_layers", m.n_layer},
            {"vocab_size", m.vocab_size},
            {"max_position_embeddings", m.seq_len},
            {"rms_norm_eps", m.norm_eps},
            {"rope_theta", m.rope_theta},
            {"rope_scaling", nullptr},
            {"tie_word_embeddings", m.tie_embeddings},
            {"hidden_act", "silu"},
            {"attention_dropout", 0.0},
            {"initializer_range", 0.02},
            {"torch_dtype", torch_dtype}};
  if (m.rope_scaling.type == RopeScaling::kLlama3)
    c["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", m.rope_scaling.factor},
        {"low_freq_factor", m.rope_scaling.low_freq_factor},
        {"high_freq_factor", m.rope_scaling.high_freq_factor},
        {"original_max_position_embeddings", m.rope_scaling.original_max_positions}};
  if (!m.qkv_bias) c["attention_bias"] = false;  // Qwen2's biases need no key
  if (!m.qkv_bias && !m.qk_norm) c["mlp_bias"] = false;
  if (m.qkv_bias || m.qk_norm) c["use_sliding_window"] = false;
  return c;
}

std::string hf_llama_name(const std::string& name) {
  return name == "lm_head.weight" ? name : "model." + name;
}

void check_llama_model_size(const HfWeightFiles& files, const ModelConfig& model,
                            const std::string& config_path) {
  const int64_t needed = model.num_parameters(true);  // validated sizes: no overflow
  GPT_INPUT_CHECK(needed / 2 <= files.total_values(),
                  config_path << "'s model needs " << needed << " parameters, more than twice the "
                              << files.total_values() << " values " << files.source() << " holds");
}

void check_llama_tensors(const HfWeightFiles& files,
                         const std::map<std::string, std::vector<int64_t>>& expected,
                         const ModelConfig& model, const std::string& config_path) {
  std::set<std::string> wanted;
  for (const auto& entry : expected) {
    const std::string& name = entry.first;
    const std::vector<int64_t>& shape = entry.second;
    const std::string hf = hf_llama_name(name);
    GPT_INPUT_CHECK(files.has(hf), files.source() << " has no tensor " << hf);
    GPT_INPUT_CHECK(files.shape(hf) == shape,
                    files.path_of(hf)
                        << ": tensor " << hf << " has shape " << h5::shape_string(files.shape(hf))
                        << " but " << config_path << "'s model needs " << h5::shape_string(shape));
    wanted.insert(hf);
  }
  for (const std::string& name : files.names()) {
    if (wanted.count(name) || name.ends_with(".rotary_emb.inv_freq")) continue;
    GPT_INPUT_CHECK(name == "lm_head.weight" && describe(model).tied_head,
                    files.path_of(name) << ": tensor " << quoted_excerpt(name)
                                        << " has no place in " << config_path << "'s model");
    // A tied model saved with its head: the head must be the embedding, or it is not tied.
    const std::string embedding = hf_llama_name("embed_tokens.weight");
    GPT_INPUT_CHECK(files.read(name).values == files.read(embedding).values,
                    files.path_of(name) << ": lm_head.weight differs from " << embedding << " but "
                                        << config_path << " has tie_word_embeddings true");
  }
}

}  // namespace gpt
