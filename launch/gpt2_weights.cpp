// Hugging Face and llm.c layouts of GPT-2's weights (see gpt2_weights.h).
#include "launch/gpt2_weights.h"

#include <cstdint>
#include <set>

#include "framework/check.h"
#include "framework/io/atomic_file.h"
#include "framework/io/hdf5_util.h"

namespace gpt {
namespace {

constexpr int32_t kLlmcMagic = 20240326;
constexpr int32_t kLlmcFloat32Version = 3;  // float32 tensors, padded vocabulary
constexpr int64_t kLlmcVocabMultiple = 128;

std::string hf_name(const std::string& name) {
  return name == "wte" || name == "wpe" ? name + ".weight" : name;
}

// The four linear weights of a block, which Hugging Face stores as Conv1D [in, out].
bool is_conv1d_weight(const std::string& name) {
  for (const char* suffix :
       {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

HostTensor transposed(const HostTensor& t) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  HostTensor out{{cols, rows}, std::vector<float>(t.values.size())};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out.values[static_cast<size_t>(c * rows + r)] = t.values[static_cast<size_t>(r * cols + c)];
  return out;
}

// Buffers a Hugging Face GPT-2 may store besides the weights: the causal masks.
bool is_hf_buffer(const std::string& name) {
  return name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias");
}

std::string without_prefix(const std::string& name) {
  const std::string prefix = "transformer.";
  return name.starts_with(prefix) ? name.substr(prefix.size()) : name;
}

}  // namespace

Json hf_gpt2_config(const ModelConfig& m) {
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
          {"tie_word_embeddings", true}};
}

ModelConfig model_from_hf_config(const Json& c, const std::string& what) {
  ModelConfig m;
  m.n_layer = json_field<int64_t>(c, "n_layer", what);
  m.n_head = json_field<int64_t>(c, "n_head", what);
  m.d_model = json_field<int64_t>(c, "n_embd", what);
  m.seq_len = json_field<int64_t>(c, c.contains("n_positions") ? "n_positions" : "n_ctx", what);
  m.vocab_size = json_field<int64_t>(c, "vocab_size", what);
  if (c.contains("activation_function")) {
    const auto activation = json_field<std::string>(c, "activation_function", what);
    GPT_INPUT_CHECK(activation == "gelu_new" || activation == "gelu_pytorch_tanh",
                    what << ": activation_function " << activation
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
  try {
    m.validate();
  } catch (const Error& e) {
    fail_input(what + ": " + e.what());
  }
  return m;
}

NamedTensors read_hf_tensors(const SafetensorsFile& file,
                             const std::map<std::string, std::vector<int64_t>>& expected) {
  std::map<std::string, std::string> stored;  // this project's name -> the file's
  for (const std::string& name : file.names()) {
    const std::string ours = without_prefix(name) == "wte.weight"   ? "wte"
                             : without_prefix(name) == "wpe.weight" ? "wpe"
                                                                    : without_prefix(name);
    if (is_hf_buffer(ours) || ours == "lm_head.weight") continue;
    GPT_INPUT_CHECK(expected.count(ours),
                    file.path() << ": tensor " << name << " has no place in this GPT-2");
    GPT_INPUT_CHECK(!stored.count(ours), file.path() << ": tensor " << ours << " stored twice");
    stored[ours] = name;
  }
  NamedTensors out;
  for (const auto& [name, shape] : expected) {
    GPT_INPUT_CHECK(stored.count(name), file.path() << " has no tensor " << hf_name(name));
    HostTensor t = file.read(stored.at(name));
    const bool conv1d = is_conv1d_weight(name) && t.shape.size() == 2;
    if (conv1d) t = transposed(t);
    GPT_INPUT_CHECK(
        t.shape == shape,
        file.path() << ": tensor " << stored.at(name) << " has shape "
                    << h5::shape_string(conv1d ? transposed(t).shape : t.shape)
                    << " but config.json's model needs "
                    << h5::shape_string(conv1d ? std::vector<int64_t>{shape[1], shape[0]} : shape));
    out[name] = std::move(t);
  }
  for (const char* head : {"lm_head.weight", "transformer.lm_head.weight"}) {
    if (!file.has(head)) continue;
    GPT_INPUT_CHECK(
        out.count("wte") && file.read(head).values == out.at("wte").values,
        file.path() << ": " << head << " differs from wte.weight (this model ties them)");
  }
  return out;
}

std::vector<std::pair<std::string, HostTensor>> to_hf_tensors(const NamedTensors& tensors) {
  std::vector<std::pair<std::string, HostTensor>> out;
  for (const auto& [name, t] : tensors)
    out.emplace_back(hf_name(name), is_conv1d_weight(name) ? transposed(t) : t);
  return out;
}

void write_llmc(const std::string& path, const NamedTensors& tensors, const ModelConfig& m) {
  const int64_t padded_vocab =
      (m.vocab_size + kLlmcVocabMultiple - 1) / kLlmcVocabMultiple * kLlmcVocabMultiple;
  std::vector<int32_t> header(256, 0);
  const int64_t fields[] = {kLlmcMagic, kLlmcFloat32Version, m.seq_len,   m.vocab_size, m.n_layer,
                            m.n_head,   m.d_model,           padded_vocab};
  for (size_t i = 0; i < std::size(fields); ++i) header[i] = static_cast<int32_t>(fields[i]);
  auto tensor = [&](const std::string& name) -> const HostTensor& {
    GPT_INPUT_CHECK(tensors.count(name), "the checkpoint has no tensor " << name);
    return tensors.at(name);
  };
  write_file_atomically(path, [&](std::ostream& out) {
    auto write = [&](const std::vector<float>& v) {
      out.write(reinterpret_cast<const char*>(v.data()),
                static_cast<std::streamsize>(v.size() * sizeof(float)));
    };
    out.write(reinterpret_cast<const char*>(header.data()),
              static_cast<std::streamsize>(header.size() * sizeof(int32_t)));
    std::vector<float> wte = tensor("wte").values;
    wte.resize(static_cast<size_t>(padded_vocab * m.d_model), 0.0f);
    write(wte);
    write(tensor("wpe").values);
    // Per kind, every layer's tensor in turn: llm.c's order.
    for (const char* kind :
         {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
          "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight",
          "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"})
      for (int64_t layer = 0; layer < m.n_layer; ++layer)
        write(tensor("h." + std::to_string(layer) + "." + kind).values);
    write(tensor("ln_f.weight").values);
    write(tensor("ln_f.bias").values);
  });
}

}  // namespace gpt
