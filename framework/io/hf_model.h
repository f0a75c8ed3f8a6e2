// A Hugging Face model directory, for every family alike (docs/CONVERT.md): which family and
// architecture config.json describes, and its model; the weights under this project's names,
// checked from the headers and read one tensor at a time; a checkpoint's weights written under
// Hugging Face's names. What differs between families (config.json's keys, the names, which
// weights are stored transposed) is the family's HfFormat (framework/families/model_family.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/config.h"
#include "framework/families/model_family.h"
#include "framework/io/hf_weight_files.h"
#include "framework/json.h"

namespace gpt {

class CheckpointReader;

// What a config.json describes: the family and model_type its one `architectures` entry names,
// else its `model_type`; a config whose model_type belongs to a family whose model_type decides
// (GPT-2) is that family's whatever its architectures say, and so is a config with neither key.
// Then that family's model at `seq_len` positions (0: the family's default). Another
// architecture is an error naming `what`, the key and the architectures this project reads.
struct HfModel {
  const ModelFamily* family;
  std::string model_type;
  ModelConfig model;
};
HfModel read_hf_config(const Json& config, const std::string& what, int64_t seq_len);

// This project's tensor names and their shapes (nn.Linear's [out, in]).
using ExpectedTensors = std::map<std::string, std::vector<int64_t>>;

// The weights of a directory by this project's names.
class HfModelWeights {
 public:
  // Opens the weight files (HfWeightFiles). Before the model is allocated, config.json's model
  // may have at most twice as many parameters as the files hold values, so a config that makes
  // up sizes allocates nothing and the allocation stays within twice what the files justify. A
  // nearer miss (a layer too many, another width) is left to check(), whose message names the
  // tensor. A tensor stored under two names (GPT-2's with and without "transformer.") is an
  // error.
  HfModelWeights(const std::string& dir, const HfModel& hf, const std::string& config_path);

  // From the headers alone, before any tensor is read: every tensor of `expected` is in the
  // files in that shape (in the files' layout), and the files hold nothing this model has no
  // place for but buffers and, for a tied model, a head equal to the embedding. Each failure is
  // one error naming the file and the tensor.
  void check(const ExpectedTensors& expected) const;

  // A tensor by this project's name, in nn.Linear's layout.
  HostTensor read(const std::string& ours) const;

  // The first file's metadata entry, "" where absent.
  std::string metadata(const std::string& key) const { return files_.metadata(key); }

 private:
  HfWeightFiles files_;
  const HfFormat& format_;
  ModelConfig model_;
  std::string config_path_;
  std::map<std::string, std::string> stored_;  // this project's name -> the files'
};

// The checkpoint's /model tensors into `dir` under Hugging Face's names and layouts, read one
// tensor at a time as the files are written (write_hf_weights: one file, or shards of at most
// max_shard_bytes and their index). Returns the names of the files written.
std::vector<std::string> write_hf_model_weights(const std::string& dir,
                                                const CheckpointReader& reader,
                                                const ModelConfig& model,
                                                const std::map<std::string, std::string>& metadata,
                                                StoredDtype dtype, int64_t max_shard_bytes);

}  // namespace gpt
