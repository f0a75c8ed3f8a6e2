// The Llama family in Hugging Face's layout (docs/CONVERT.md "The Llama family"): which
// config.json describes which model (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
// Qwen3ForCausalLM), the config.json of a model, and the weights' names. This project's tensor
// names are Hugging Face's state-dict names without "model." (lm_head.weight has none), and
// both store nn.Linear's [out, in], so the weights move as they are, one tensor at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/config.h"
#include "framework/io/hf_weight_files.h"
#include "framework/json.h"

namespace gpt {

// What a config.json describes: its architecture's model_type ("gpt2", "llama", "mistral",
// "qwen2", "qwen3"): "gpt2" where model_type says so, else from `architectures`, else from
// `model_type`; a config with neither key is GPT-2 (as GPT-2 configs written before either key
// was usual are). Another architecture is an error naming `what` and the key.
std::string hf_model_type(const Json& config, const std::string& what);
inline bool is_llama_family(const std::string& model_type) {
  return model_type != "gpt2";
}

// The sequence length an import gets when --seq-len is not given: max_position_embeddings, but
// no more than this (a 128K context is rarely what one evaluates or fine-tunes at).
inline constexpr int64_t kHfDefaultSeqLenCap = 4096;

// The model a Llama-family config.json describes, at `seq_len` positions (0: its
// max_position_embeddings capped at kHfDefaultSeqLenCap). What this project does not run (a
// sliding window in use, another rope scaling, experts, another activation, MLP or output
// biases) and values out of range are one error naming `what` and the key.
ModelConfig llama_model_from_hf_config(const Json& config, const std::string& model_type,
                                       const std::string& what, int64_t seq_len);

// The config.json of a Llama-family model: LlamaForCausalLM, Qwen2ForCausalLM (q, k, v biases)
// or Qwen3ForCausalLM (q and k norms), with `torch_dtype` ("float32", "bfloat16").
Json hf_llama_config(const ModelConfig& model, const std::string& torch_dtype);

// Hugging Face's name of this project's tensor: "model." + name, lm_head.weight as it is.
std::string hf_llama_name(const std::string& name);

// Before the model is built: config.json's model may have at most twice as many parameters as
// the files hold values, so a config that makes up sizes allocates nothing, and the allocation
// stays within twice what the files justify. A nearer miss (a layer too many, another width) is
// left to check_llama_tensors, whose message names the tensor.
void check_llama_model_size(const HfWeightFiles& files, const ModelConfig& model,
                            const std::string& config_path);

// From the headers alone, before any tensor is read: every tensor of `expected` (this project's
// names and shapes) is in the files in that shape, and the files hold nothing this model has no
// place for (older exports' rotary inv_freq buffers are skipped; a tied model's lm_head.weight
// must equal embed_tokens.weight). Each failure is one error naming the file and the tensor.
void check_llama_tensors(const HfWeightFiles& files,
                         const std::map<std::string, std::vector<int64_t>>& expected,
                         const ModelConfig& model, const std::string& config_path);

}  // namespace gpt
