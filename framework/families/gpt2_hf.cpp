// GPT-2 in Hugging Face's files (GPT2LMHeadModel): config.json's keys (n_layer, n_head, n_embd,
// n_positions) both ways, and the weights under this project's names, which are Hugging Face's
// without "transformer." and with wte and wpe lacking ".weight"; the four linear weights of each
// block are stored in Conv1D's [in, out] layout.
#include <string>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "framework/json.h"

namespace gpt {

namespace {

struct Gpt2Hf {
  static constexpr HfArchitecture kArchitectures[] = {{"GPT2LMHeadModel", "gpt2"}};
  static constexpr bool kModelTypeDecides = true;
  static constexpr bool kReadsTokenizerJson = false;

  static ModelConfig read_config(const Json& c, const std::string&, const std::string& what,
                                 int64_t seq_len) {
    GPT_INPUT_CHECK(seq_len == 0, "--seq-len is for rotary positions: "
                                      << what
                                      << " is a GPT-2, whose positions are learned (train "
                                         "--init-from --seq-len takes fewer)");
    ModelConfig m;
    m.n_layer = json_field<int64_t>(c, "n_layer", what);
    m.n_head = json_field<int64_t>(c, "n_head", what);
    m.d_model = json_field<int64_t>(c, "n_embd", what);
    m.seq_len = json_field<int64_t>(c, c.contains("n_positions") ? "n_positions" : "n_ctx", what);
    m.vocab_size = json_field<int64_t>(c, "vocab_size", what);
    if (c.contains("activation_function")) {
      const auto activation = json_field<std::string>(c, "activation_function", what);
      GPT_INPUT_CHECK(activation == "gelu_new" || activation == "gelu_pytorch_tanh",
                      what << ": activation_function " << quoted_excerpt(activation)
                           << " (this model has GELU's tanh form, gelu_new)");
    }
    if (c.contains("layer_norm_epsilon")) {
      const auto eps = json_field<double>(c, "layer_norm_epsilon", what);
      GPT_INPUT_CHECK(eps == 1e-5,
                      what << ": layer_norm_epsilon " << eps << " (this model has 1e-5)");
    }
    if (c.contains("tie_word_embeddings"))
      GPT_INPUT_CHECK(json_field<bool>(c, "tie_word_embeddings", what),
                      what << ": untied embeddings (this model ties lm_head to wte)");
    m.validate(what);
    return m;
  }

  // Tied embeddings, gelu_new, LayerNorm epsilon 1e-5, no dropout.
  static Json write_config(const ModelConfig& m, const std::string& torch_dtype) {
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"n_layer", m.n_layer},
            {"n_head", m.n_head},
            {"n_embd", m.d_model},
            {"n_positions", m.seq_len},
            {"n_ctx", m.seq_len},
            {"vocab_size", m.vocab_size},
            {"activation_function", "gelu_new"},
            {"layer_norm_epsilon", 1e-5},
            {"resid_pdrop", 0.0},
            {"embd_pdrop", 0.0},
            {"attn_pdrop", 0.0},
            {"initializer_range", 0.02},
            {"tie_word_embeddings", true},
            {"torch_dtype", torch_dtype}};
  }

  static std::string hf_name(const std::string& ours) {
    return ours == "wte" || ours == "wpe" ? ours + ".weight" : ours;
  }

  static std::string our_name(const std::string& hf) {
    const std::string prefix = "transformer.";
    const std::string name = hf.starts_with(prefix) ? hf.substr(prefix.size()) : hf;
    return name == "wte.weight" || name == "wpe.weight" ? name.substr(0, 3) : name;
  }

  // The causal masks some exports store beside the weights.
  static bool is_buffer(const std::string& hf) {
    return hf.ends_with(".attn.bias") || hf.ends_with(".attn.masked_bias");
  }

  static bool transposed(const std::string& ours) {
    for (const char* suffix :
         {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
      if (ours.ends_with(suffix)) return true;
    return false;
  }

  // A GPT-2 directory holds OpenAI's vocabulary, which this project carries as "gpt2".
  static std::string default_tokenizer(const std::string&) { return "gpt2"; }
};

}  // namespace

const HfFormat& gpt2_hf_format() {
  return hf_format_from<Gpt2Hf>();
}

}  // namespace gpt
