// GPT-2 weights in other projects' layouts (docs/CONVERT.md). This project's tensor names are
// Hugging Face's GPT-2 names without the "transformer." prefix, the embeddings without
// ".weight", and its linear weights are nn.Linear's [out, in] (docs/DESIGN.md "Checkpoint"):
//  - Hugging Face: model.safetensors with the same names (wte.weight, wpe.weight), the four
//    linear weights per block in Conv1D's [in, out] layout, and config.json;
//  - llm.c: gpt2_124M.bin version 3: a header of 256 int32 (20240326, 3, max_seq_len,
//    vocab_size, num_layers, num_heads, channels, padded_vocab_size), then every tensor in
//    float32, [out, in] like ours, grouped by kind over the layers, wte padded with zero rows to
//    a multiple of 128 (llm.c's train_gpt2.py, write_model).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/config.h"
#include "framework/io/safetensors.h"
#include "framework/json.h"

namespace gpt {

// The model's float count with wte of `vocab_rows` rows and wpe, from numbers a file declares:
// none where it passes 2^63, so a damaged header or config fails a size check instead of wrapping.
std::optional<int64_t> checked_gpt2_floats(const ModelConfig& m, int64_t vocab_rows);

// Full logical tensors by this project's names.
using NamedTensors = std::map<std::string, HostTensor>;

// A Hugging Face GPT-2 config.json for the model (GPT2LMHeadModel, tied embeddings, gelu_new,
// LayerNorm epsilon 1e-5, no dropout), and the model a config.json describes: n_layer, n_head,
// n_embd, n_positions (or n_ctx), vocab_size; settings this model does not have (another
// activation or epsilon, untied embeddings) are an error naming `what`.
Json hf_gpt2_config(const ModelConfig& model);
ModelConfig model_from_hf_config(const Json& config, const std::string& what);

// Throws when `model` (from config_path) has more than twice as many parameters as `file` holds
// values: checked before the model is allocated, so sizes a config.json makes up fail here, and
// the allocation stays within twice what the file justifies. A nearer miss (a tensor missing or
// misshapen) is left to the tensor-by-tensor check, whose message names the tensor.
void check_hf_model_size(const SafetensorsFile& file, const ModelConfig& model,
                         const std::string& config_path);

// The tensors `expected` (this project's names and shapes) from a Hugging Face file: names with
// or without "transformer.", Conv1D weights transposed. A missing tensor, another shape, a
// tensor this model has no place for, or an lm_head.weight that differs from wte is an error
// naming the file and the tensor.
NamedTensors read_hf_tensors(const SafetensorsFile& file,
                             const std::map<std::string, std::vector<int64_t>>& expected);

// The tensors under Hugging Face's names and layouts, in this project's name order.
std::vector<std::pair<std::string, HostTensor>> to_hf_tensors(const NamedTensors& tensors);

// llm.c's version-3 file of the model (through a temporary file and a rename).
void write_llmc(const std::string& path, const NamedTensors& tensors, const ModelConfig& model);

// An llm.c version-3 file: the model its header describes and its tensors (wte without the
// padding rows). Another magic or version, or a size that does not match the header, is an error
// naming the file.
struct LlmcWeights {
  ModelConfig model;
  NamedTensors tensors;
};
LlmcWeights read_llmc(const std::string& path);

}  // namespace gpt
