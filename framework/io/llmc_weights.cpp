// llm.c's file of GPT-2's weights (see llmc_weights.h).
#include "framework/io/llmc_weights.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>

#include "framework/check.h"
#include "framework/checked_size.h"
#include "framework/io/hdf5_util.h"
#include "framework/io/whole_file.h"
#include "framework/parameter.h"

namespace gpt {
namespace {

constexpr int32_t kLlmcMagic = 20240326;
constexpr int32_t kLlmcFloat32Version = 3;  // float32 tensors, padded vocabulary
constexpr int64_t kLlmcVocabMultiple = 128;

// The per-layer tensors of llm.c's file, in its order (each kind over every layer in turn), with
// their shapes for C channels: {rows * C}, or {rows * C, cols * C} where cols > 0.
struct LlmcKind {
  const char* name;
  int64_t rows, cols;
};
constexpr LlmcKind kLlmcLayerKinds[] = {
    {"ln_1.weight", 1, 0},      {"ln_1.bias", 1, 0},          {"attn.c_attn.weight", 3, 1},
    {"attn.c_attn.bias", 3, 0}, {"attn.c_proj.weight", 1, 1}, {"attn.c_proj.bias", 1, 0},
    {"ln_2.weight", 1, 0},      {"ln_2.bias", 1, 0},          {"mlp.c_fc.weight", 4, 1},
    {"mlp.c_fc.bias", 4, 0},    {"mlp.c_proj.weight", 1, 4},  {"mlp.c_proj.bias", 1, 0}};

int64_t llmc_padded_vocab(int64_t vocab_size) {
  return (vocab_size + kLlmcVocabMultiple - 1) / kLlmcVocabMultiple * kLlmcVocabMultiple;
}

// The shape of one block's tensor of `kind` for C channels.
std::vector<int64_t> layer_shape(const LlmcKind& kind, int64_t C) {
  return kind.cols == 0 ? std::vector<int64_t>{kind.rows * C}
                        : std::vector<int64_t>{kind.rows * C, kind.cols * C};
}

// The model's float count with wte of `vocab_rows` rows and wpe, from numbers the header
// declares: none where it passes 2^63, so a damaged header fails the size check instead of
// wrapping.
std::optional<int64_t> checked_gpt2_floats(const ModelConfig& m, int64_t vocab_rows) {
  const int64_t C = m.d_model;
  std::optional<int64_t> layer = 0;
  for (const LlmcKind& kind : kLlmcLayerKinds) {
    const std::optional<int64_t> n = checked_numel(layer_shape(kind, C));
    layer = layer && n ? checked_add(*layer, *n) : std::nullopt;
  }
  std::optional<int64_t> total = checked_mul(2, C);  // ln_f
  for (const std::optional<int64_t>& part :
       {checked_numel({vocab_rows, C}), checked_numel({m.seq_len, C}),
        layer ? checked_mul(*layer, m.n_layer) : std::nullopt})
    total = total && part ? checked_add(*total, *part) : std::nullopt;
  return total;
}

}  // namespace

void write_llmc(const std::string& path, const NamedTensors& tensors, const ModelConfig& m) {
  const int64_t padded_vocab = llmc_padded_vocab(m.vocab_size);
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
    for (const LlmcKind& kind : kLlmcLayerKinds)
      for (int64_t layer = 0; layer < m.n_layer; ++layer)
        write(tensor("h." + std::to_string(layer) + "." + kind.name).values);
    write(tensor("ln_f.weight").values);
    write(tensor("ln_f.bias").values);
  });
}

LlmcWeights read_llmc(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GPT_INPUT_CHECK(in.good(), path << ": cannot open the file");
  std::vector<int32_t> header(256);
  in.read(reinterpret_cast<char*>(header.data()),
          static_cast<std::streamsize>(header.size() * sizeof(int32_t)));
  GPT_INPUT_CHECK(in.good() && header[0] == kLlmcMagic,
                  path << ": not an llm.c model file (no magic " << kLlmcMagic << ")");
  GPT_INPUT_CHECK(header[1] == kLlmcFloat32Version,
                  path << ": llm.c model version " << header[1] << " (version "
                       << kLlmcFloat32Version << ", float32 with a padded vocabulary, is read)");
  LlmcWeights w;
  ModelConfig& m = w.model;
  m.seq_len = header[2];
  m.vocab_size = header[3];
  m.n_layer = header[4];
  m.n_head = header[5];
  m.d_model = header[6];
  const int64_t padded_vocab = header[7], C = m.d_model;
  m.validate(path + ": header");
  GPT_INPUT_CHECK(padded_vocab >= m.vocab_size, path << ": padded_vocab_size " << padded_vocab
                                                     << " below vocab_size " << m.vocab_size);
  // The file's size is checked before anything is allocated: the header's numbers (each up to
  // 2^31) must describe exactly the bytes that follow it.
  const std::optional<int64_t> floats = checked_gpt2_floats(m, padded_vocab);
  const std::optional<int64_t> needed =
      floats ? checked_add(1024, checked_mul(4, *floats).value_or(-1)) : std::nullopt;
  GPT_INPUT_CHECK(needed.has_value(),
                  path << ": its header's model needs more than 2^63 bytes (a damaged header)");
  std::error_code ec;
  const auto bytes = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  GPT_INPUT_CHECK(bytes == *needed,
                  path << ": " << bytes << " bytes, but its header's model needs " << *needed);
  std::vector<std::pair<std::string, std::vector<int64_t>>> order{{"wte", {padded_vocab, C}},
                                                                  {"wpe", {m.seq_len, C}}};
  for (const LlmcKind& kind : kLlmcLayerKinds)
    for (int64_t layer = 0; layer < m.n_layer; ++layer)
      order.push_back({"h." + std::to_string(layer) + "." + kind.name, layer_shape(kind, C)});
  order.push_back({"ln_f.weight", {C}});
  order.push_back({"ln_f.bias", {C}});
  for (auto& entry : order) {
    const std::string& name = entry.first;
    const std::vector<int64_t>& shape = entry.second;
    HostTensor t{shape, std::vector<float>(static_cast<size_t>(shape_numel(shape)))};
    in.read(reinterpret_cast<char*>(t.values.data()),
            static_cast<std::streamsize>(4 * t.values.size()));
    GPT_INPUT_CHECK(in.good(), path << ": cannot read tensor " << name);
    if (name == "wte")  // llm.c's padding rows are never read: only the vocabulary's must be finite
      require_finite_weights({t.values.data(), static_cast<size_t>(m.vocab_size * C)}, path, name);
    else
      require_finite_weights(t.values, path, name);
    w.tensors[name] = std::move(t);
  }
  HostTensor& wte = w.tensors["wte"];  // the padding rows go
  wte.shape[0] = m.vocab_size;
  wte.values.resize(static_cast<size_t>(m.vocab_size * C));
  return w;
}

}  // namespace gpt
