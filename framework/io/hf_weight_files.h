// The weight files of a Hugging Face model directory: one model.safetensors, or shards that
// model.safetensors.index.json names ({"metadata": {"total_size": bytes}, "weight_map":
// {tensor: file}}), as save_pretrained writes them above its shard size. Reading opens every
// shard's header up front (each validated by SafetensorsFile), so a missing shard, a tensor the
// index places in a file that lacks it, or a tensor stored twice is one error before any tensor
// is read; writing fills shards in order up to a size and writes the index last.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/io/safetensors.h"
#include "framework/json.h"

namespace gpt {

inline constexpr const char* kHfSingleWeightsFile = "model.safetensors";
inline constexpr const char* kHfWeightIndexFile = "model.safetensors.index.json";

// A JSON file of a model directory (config.json, the shard index), read whole after a size check
// (far above any real one: a larger file is not what it claims to be). `what` names the option
// that gave the directory, for the error when it is not a regular file.
Json read_hf_json(const std::string& path, const std::string& what);

class HfWeightFiles {
 public:
  // Opens model.safetensors, or where there is none the index and its shards.
  explicit HfWeightFiles(const std::string& dir);

  bool has(const std::string& name) const { return where_.count(name) > 0; }
  std::vector<std::string> names() const;  // in name order
  const std::vector<int64_t>& shape(const std::string& name) const;
  // The file holding the tensor, for messages.
  const std::string& path_of(const std::string& name) const;
  HostTensor read(const std::string& name) const;
  // Values the files hold in all: a bound on the model a config may claim they contain.
  int64_t total_values() const { return total_values_; }
  // The first file's metadata entry, "" where absent.
  std::string metadata(const std::string& key) const;
  // What the weights were read from: the index or model.safetensors.
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> where_;
  int64_t total_values_ = 0;
};

// Hugging Face's default shard size, 5 GB.
inline constexpr int64_t kHfDefaultShardBytes = 5'000'000'000;

// Writes the tensors into `dir` as model.safetensors, or, when they exceed `max_shard_bytes`, as
// model-0000i-of-0000N.safetensors (each filled in order up to the size; a larger tensor alone)
// and model.safetensors.index.json. Weight files of an earlier model in `dir` are removed first,
// so a loader cannot mix them in. Returns the names of the files written.
std::vector<std::string> write_hf_weights(const std::string& dir,
                                          const std::vector<TensorToWrite>& tensors,
                                          const TensorValues& values,
                                          const std::map<std::string, std::string>& metadata,
                                          StoredDtype dtype, int64_t max_shard_bytes);

}  // namespace gpt
