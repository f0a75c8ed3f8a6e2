// The Llama family in Hugging Face's files (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM): which config.json describes which model, what it refuses (a sliding window
// in use, another rope scaling, experts, another activation, MLP or output biases), the
// config.json of a model, and the weights' names: this project's are Hugging Face's state-dict
// names without "model." (lm_head.weight has none), and both store nn.Linear's [out, in], so the
// weights move as they are.
#include <algorithm>
#include <limits>
#include <string>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "framework/json.h"

namespace gpt {

namespace {

// The sequence length an import gets when --seq-len is not given: max_position_embeddings, but
// no more than this (a 128K context is rarely what one evaluates or fine-tunes at).
constexpr int64_t kDefaultSeqLenCap = 4096;

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
  if (!json_has_value(c, "rope_scaling")) return r;
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
  if (json_has_value(c, "hidden_act")) {
    const auto act = json_field<std::string>(c, "hidden_act", what);
    refuse(act != "silu", what, "hidden_act",
           quoted_excerpt(act) + " (this model's MLP is SwiGLU: silu)");
  }
  if (json_has_value(c, "mlp_bias"))
    refuse(json_field<bool>(c, "mlp_bias", what), what, "mlp_bias",
           "true (this model's MLP has no biases)");
  // Llama's and Qwen3's attention_bias also puts a bias on o_proj, which this model does not
  // have; Qwen2's q, k, v biases come with the architecture, without the key.
  if (model_type != "qwen2" && json_has_value(c, "attention_bias"))
    refuse(json_field<bool>(c, "attention_bias", what), what, "attention_bias",
           "true (a bias on o_proj too; this model has q, k, v biases only, as Qwen2)");
  for (const char* key : {"num_experts", "num_local_experts"})
    if (json_has_value(c, key))
      refuse(json_field<int64_t>(c, key, what) > 0, what, key,
             "> 0 (a mixture of experts; this model's MLP is dense)");
  // Qwen2 and Qwen3 carry a sliding_window that only use_sliding_window turns on; Mistral's is
  // on whenever it is shorter than the context.
  if (json_has_value(c, "use_sliding_window")) {
    refuse(json_field<bool>(c, "use_sliding_window", what), what, "use_sliding_window",
           "true (this model's attention sees every earlier position)");
  } else if (json_has_value(c, "sliding_window")) {
    const auto window = json_field<int64_t>(c, "sliding_window", what);
    refuse(window < max_positions, what, "sliding_window",
           std::to_string(window) + " is shorter than max_position_embeddings " +
               std::to_string(max_positions) +
               " (this model's attention sees every earlier position)");
  }
}

struct LlamaHf {
  static constexpr HfArchitecture kArchitectures[] = {{"LlamaForCausalLM", "llama"},
                                                      {"MistralForCausalLM", "mistral"},
                                                      {"Qwen2ForCausalLM", "qwen2"},
                                                      {"Qwen3ForCausalLM", "qwen3"}};
  static constexpr bool kModelTypeDecides = false;
  static constexpr bool kReadsTokenizerJson = true;

  static ModelConfig read_config(const Json& c, const std::string& model_type,
                                 const std::string& what, int64_t seq_len) {
    ModelConfig m;
    m.arch = Arch::kLlama;
    m.d_model = int_key(c, "hidden_size", 1, kMaxWidth, what);
    m.ffn_hidden = int_key(c, "intermediate_size", 1, int64_t{1} << 20, what);
    m.n_head = int_key(c, "num_attention_heads", 1, kMaxWidth, what);
    m.n_kv_head = json_has_value(c, "num_key_value_heads")
                      ? int_key(c, "num_key_value_heads", 1, m.n_head, what)
                      : m.n_head;
    GPT_INPUT_CHECK(m.n_head % m.n_kv_head == 0, what << ": num_key_value_heads " << m.n_kv_head
                                                      << " does not divide num_attention_heads "
                                                      << m.n_head);
    if (json_has_value(c, "head_dim")) {
      m.head_size = int_key(c, "head_dim", 2, kMaxWidth, what);
    } else {
      GPT_INPUT_CHECK(m.d_model % m.n_head == 0, what << ": num_attention_heads " << m.n_head
                                                      << " does not divide hidden_size "
                                                      << m.d_model
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
      GPT_INPUT_CHECK(seq_len <= max_positions,
                      "--seq-len " << seq_len << " is longer than " << what
                                   << "'s max_position_embeddings " << max_positions);
      m.seq_len = seq_len;
    } else {
      m.seq_len = std::min(max_positions, kDefaultSeqLenCap);
    }
    // Hugging Face's defaults for these families where a config leaves a key out.
    m.norm_eps =
        json_has_value(c, "rms_norm_eps") ? json_field<double>(c, "rms_norm_eps", what) : 1e-6;
    m.rope_theta =
        json_has_value(c, "rope_theta") ? json_field<double>(c, "rope_theta", what) : 1e4;
    m.rope_scaling = rope_scaling_from_hf(c, what);
    m.tie_embeddings = json_has_value(c, "tie_word_embeddings") &&
                       json_field<bool>(c, "tie_word_embeddings", what);
    m.qkv_bias = model_type == "qwen2";
    m.qk_norm = model_type == "qwen3";
    refuse_unsupported(c, model_type, what, max_positions);
    m.validate(what);
    return m;
  }

  static Json write_config(const ModelConfig& m, const std::string& torch_dtype) {
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

  static std::string hf_name(const std::string& ours) {
    return ours == "lm_head.weight" ? ours : "model." + ours;
  }

  static std::string our_name(const std::string& hf) {
    const std::string prefix = "model.";
    return hf.starts_with(prefix) ? hf.substr(prefix.size()) : hf;
  }

  // Older exports store the rotary frequencies.
  static bool is_buffer(const std::string& hf) { return hf.ends_with(".rotary_emb.inv_freq"); }

  static bool transposed(const std::string&) { return false; }

  // Where the ids of a directory without tokenizer.json come from: its data sets were made
  // elsewhere.
  static std::string default_tokenizer(const std::string& model_type) { return "hf:" + model_type; }
};

}  // namespace

const HfFormat& llama_hf_format() {
  return hf_format_from<LlamaHf>();
}

}  // namespace gpt
