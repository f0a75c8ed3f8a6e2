// The model's shape (GPT-2, docs/DESIGN.md "Model") and what follows from it: head size, padded
// vocabulary, parameter count and FLOPs per token. Validation here covers the model alone;
// layout rules (tp dividing heads, ...) are checked with the options in launch/.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace gpt {

// The largest model fields accepted, far above any real GPT (so that no count derived from them
// overflows 64 bits): layers, heads and width, positions, and token ids (int32).
inline constexpr int64_t kMaxLayers = 100000;
inline constexpr int64_t kMaxWidth = int64_t{1} << 16;
inline constexpr int64_t kMaxSeqLen = int64_t{1} << 22;
inline constexpr int64_t kMaxVocab = (int64_t{1} << 31) - 1;

struct ModelConfig {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t d_model = 128;
  int64_t seq_len = 64;      // also the number of learned positions
  int64_t vocab_size = 256;  // the data set's

  int64_t head_dim() const { return d_model / n_head; }
  int64_t ffn_dim() const { return 4 * d_model; }
  // Vocabulary padded to a multiple of 64 * tp; padded rows are zero and never used.
  int64_t padded_vocab(int64_t tp) const;
  // Parameters of the logical (unpadded) model, wpe excluded (FLOPs formula) or included.
  int64_t num_parameters(bool include_wpe) const;
  // 6 N + 12 L T C per token (docs/DESIGN.md), N without wpe.
  double flops_per_token() const;
  // Throws a one-line gpt::Error naming the bad field: as its option (--n-layer), or with
  // from_file as that file's key ("FILE: attribute config: n_layer").
  void validate(const std::string& from_file = "") const;
};

// The model's five fields as JSON (n_layer, n_head, d_model, seq_len, vocab_size): the one place
// they are named for files (the checkpoint's config attribute). from_json validates and names
// `what` (the file) in its errors.
void to_json(nlohmann::ordered_json& json, const ModelConfig& model);
ModelConfig model_config_from_json(const nlohmann::ordered_json& json, const std::string& what);

}  // namespace gpt
