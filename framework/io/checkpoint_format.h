// The checkpoint file format (docs/DESIGN.md "Checkpoint", docs/FORMATS.md): one HDF5 file per
// checkpoint, independent of the layout that wrote it. /model/<name> holds each parameter's full
// logical tensor (float32, contiguous), /optimizer/<name>/<state> its optimizer state, each
// dataset with a crc32 attribute; root attributes describe the run, and complete = 1 is written
// last. The writer (checkpoint_writer.h) and the reader (checkpoint_reader.h) share these.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpt {

inline constexpr const char* kCheckpointFormat = "gpt-train-checkpoint";
// Parameter <name>'s dataset is kModelDatasetPrefix + name.
inline constexpr std::string_view kModelDatasetPrefix = "/model/";
inline constexpr int64_t kCheckpointFormatVersion = 2;  // 2: with metadata_crc32

struct CheckpointMeta {
  int64_t step = 0;
  int64_t consumed_samples = 0;
  uint64_t seed = 0;        // stored as int64 (bit pattern)
  std::string config_json;  // JSON text of the model and training options (attribute "config")
  std::string tokenizer;    // "bytes"
  std::string layout;       // informational, e.g. "tp=1 dp=1 pp=1"
};

struct OptimizerMeta {
  std::string type;  // "adamw" | "sgd"
  // Double attributes of /optimizer (lr, beta1, ...), in name order when read back.
  std::vector<std::pair<std::string, double>> hyperparameters;
  int64_t step = 0;  // attribute "step" of /optimizer: one count for all parameters
  // ParameterStore state buffers, written as /optimizer/<param>/<state>: {"exp_avg",
  // "exp_avg_sq"} (AdamW) or {"momentum_buffer"} (SGD); read back in name order.
  std::vector<std::string> state_names;
};

}  // namespace gpt
