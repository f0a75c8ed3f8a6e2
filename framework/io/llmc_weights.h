// GPT-2's weights in llm.c's file (docs/CONVERT.md), gpt2_124M.bin version 3: a header of 256
// int32 (20240326, 3, max_seq_len, vocab_size, num_layers, num_heads, channels,
// padded_vocab_size), then every tensor in float32, nn.Linear's [out, in] like this project's,
// grouped by kind over the layers, wte padded with zero rows to a multiple of 128 (llm.c's
// train_gpt2.py, write_model). The names are this project's GPT-2 names
// (framework/families/gpt2.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/config.h"
#include "framework/io/safetensors.h"

namespace gpt {

// Full logical tensors by this project's names.
using NamedTensors = std::map<std::string, HostTensor>;

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
