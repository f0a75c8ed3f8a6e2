// A model family as data, in the manner of Megatron-Core's config plus layer spec: what makes
// GPT-2 GPT-2 and a Llama a Llama, resolved from a ModelConfig by pure functions. The block
// description (norm, positions, MLP, biases, q/k norms, head) and the parameter specs (names,
// shapes, init, which linears split by rows or by columns over tp) are what the layers build,
// the memory model and the cost model sum and price, the checkpoint's config writes and the
// presets fill, and its Hugging Face format says how convert reads and writes it; none of them
// asks which family a model is. Each family is a file beside this one (gpt2.cpp, llama.cpp: the
// Llama family with its Mistral and Qwen variants) and its Hugging Face format (gpt2_hf.cpp,
// llama_hf.cpp); adding one means those two files, its entry in model_family.cpp and the kernels
// it needs.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "framework/config.h"

namespace gpt {

enum class NormKind { kLayerNorm, kRmsNorm };   // RMSNorm keeps no mean and has no bias
enum class PositionKind { kLearned, kRotary };  // a position table (wpe), or rotated q and k
enum class MlpKind { kGelu, kSwiGlu };          // gelu(c_fc x), or silu(gate x) * (up x)

// Activation elements a block's streaming kernels (norms, bias adds, the MLP's activation,
// residual adds, rotations) read and write per row, by the width each runs over: C (the
// residual's rows), F (the MLP's) and Q + KV (q's and k's). The cost model's
// (parallel/planner/cost_model.cpp) count, from the kernels each family runs.
struct StreamTraffic {
  double forward_c, forward_c_megatron;  // Megatron fuses the bias adds with dropout and residual
  double forward_f, forward_qk;
  double backward_c, backward_f, backward_qk;
};

// How a block computes.
struct BlockDescription {
  NormKind norm = NormKind::kLayerNorm;
  float norm_eps = 1e-5f;
  PositionKind positions = PositionKind::kLearned;
  MlpKind mlp = MlpKind::kGelu;
  bool fused_qkv = true;  // one c_attn whose rows are q's, k's and v's (split by heads each)
  bool qk_norm = false;   // RMSNorm over each head's q and k before the rotation (Qwen3)
  bool tied_head = true;  // the head multiplies by the token embedding
  StreamTraffic traffic{};

  bool rms() const { return norm == NormKind::kRmsNorm; }
  bool rotary() const { return positions == PositionKind::kRotary; }
  bool swiglu() const { return mlp == MlpKind::kSwiGlu; }
  // Learned positions bound the context to the table's length; rotary ones take any.
  bool learned_positions() const { return positions == PositionKind::kLearned; }
};

// One linear in nn.Linear layout (weight [OC, IC], bias [OC]): registers "<name>.weight" and
// "<name>.bias". Whether it splits over tp by rows (column-parallel) or by columns
// (row-parallel) is its place in BlockParameters.
struct LinearSpec {
  std::string name;
  int64_t in_features = 0;   // IC
  int64_t out_features = 0;  // OC
  float init_std = 0.02f;    // weights N(0, init_std); biases start at zero
  bool bias = true;
  // Column-parallel: the rows form this many equal groups, each split over tp (GPT-2's c_attn:
  // q, k and v).
  int64_t groups = 1;
  // Column-parallel: consecutive groups of this many tp ranks hold the same rows (the key/value
  // heads when tp exceeds them).
  int64_t tp_replicas = 1;
};

// A norm: registers "<name>.weight" (ones) and, for LayerNorm, "<name>.bias" (zeros).
struct NormSpec {
  std::string name;
  int64_t C = 0;
  bool rms = false;
  float eps = 1e-5f;
  int64_t heads = 0;  // 0: over the residual stream; else per head, of this many heads a row
};

// A block's parameters in the order its layers register them (the flat buffers' order).
struct BlockParameters {
  NormSpec attn_norm;
  std::vector<LinearSpec> qkv;     // column-parallel: c_attn, or q_proj, k_proj and v_proj
  LinearSpec attn_out;             // row-parallel
  std::vector<NormSpec> qk_norms;  // q's and k's (Qwen3), or none
  NormSpec mlp_norm;
  std::vector<LinearSpec> mlp_in;  // column-parallel: c_fc, or gate_proj and up_proj
  LinearSpec mlp_out;              // row-parallel
};

// Where a linear sits in its block: the inputs split over tp by rows (column-parallel), the
// outputs by columns (row-parallel).
enum class LinearPlace { kAttentionIn, kAttentionOut, kMlpIn, kMlpOut };
inline bool column_parallel(LinearPlace place) {
  return place == LinearPlace::kAttentionIn || place == LinearPlace::kMlpIn;
}

// Visits a block's norms, on_norm(const NormSpec&), and linears, on_linear(const LinearSpec&,
// LinearPlace), in BlockParameters' order: the one walk of a block's parameters that the
// registration counts, the memory and cost models and the checkpoint's names follow.
template <typename OnNorm, typename OnLinear>
void for_each_block_parameter(const BlockParameters& p, OnNorm&& on_norm, OnLinear&& on_linear) {
  on_norm(p.attn_norm);
  for (const LinearSpec& spec : p.qkv) on_linear(spec, LinearPlace::kAttentionIn);
  on_linear(p.attn_out, LinearPlace::kAttentionOut);
  for (const NormSpec& spec : p.qk_norms) on_norm(spec);
  on_norm(p.mlp_norm);
  for (const LinearSpec& spec : p.mlp_in) on_linear(spec, LinearPlace::kMlpIn);
  on_linear(p.mlp_out, LinearPlace::kMlpOut);
}

// The parameters outside the blocks: the vocabulary matrices (V rows of C, split by rows over
// tp and padded) and, for learned positions, the position table (seq_len rows, replicated).
struct EdgeParameters {
  std::string token_embedding;  // the first stage's table; the head's matrix too when tied
  std::string untied_head;      // the head's own matrix, or empty
  std::string positions;        // "wpe", or empty
  float init_std = 0.02f;       // of the three
  NormSpec final_norm;          // before the head
};

// A named model shape (train's and plan's --model). sets_vocab: the preset gives the
// vocabulary (a tokenizer's); otherwise it comes from the data set.
struct ModelPreset {
  const char* name;
  ModelConfig shape;
  bool sets_vocab;
};

// Field names for messages: the option (--n-kv-head) when the value came from the command line,
// the file's key (n_kv_head) after "FILE: " when it came from a file.
struct FieldNames {
  std::string file;  // empty: the command line
  std::string where() const { return file.empty() ? "" : file + ": "; }
  std::string operator()(const char* option, const char* key) const {
    return file.empty() ? std::string("--") + option : std::string(key);
  }
};

// An architecture a family reads from Hugging Face's config.json: its `architectures` entry and
// its `model_type`.
struct HfArchitecture {
  const char* architecture;
  const char* model_type;
};

// How a family's models are written in a Hugging Face directory (docs/CONVERT.md): config.json's
// keys both ways and the weights' names and layouts. framework/io/hf_model.h reads and writes
// the directory with it, for every family alike.
struct HfFormat {
  std::span<const HfArchitecture> architectures;
  // A config whose model_type is one of this family's is read whatever its architectures say
  // (GPT2Model, say), and a config with neither key is this family's: GPT-2's, as configs
  // written before either key was usual were read.
  bool model_type_decides = false;
  // The model a config.json of `model_type` describes, at `seq_len` positions (0: the family's
  // default); what this project does not run, and values out of range, are one error naming
  // `what` and the key.
  ModelConfig (*read_config)(const nlohmann::ordered_json& config, const std::string& model_type,
                             const std::string& what, int64_t seq_len);
  // The config.json of a model, with `torch_dtype` ("float32", "bfloat16"); a model no
  // architecture of Hugging Face describes is an input error.
  nlohmann::ordered_json (*write_config)(const ModelConfig& m, const std::string& torch_dtype);
  // Hugging Face's name of a tensor this project names `ours`, and this project's name of a
  // tensor a file stores (which may take forms the writer never uses: GPT-2's "transformer.").
  std::string (*hf_name)(const std::string& ours);
  std::string (*our_name)(const std::string& hf);
  // Tensors the files may hold that are no weights (causal masks, rotary frequencies): skipped.
  bool (*is_buffer)(const std::string& hf);
  // Weights stored [in, out] (GPT-2's Conv1D) rather than nn.Linear's [out, in]: transposed both
  // ways.
  bool (*transposed)(const std::string& ours);
  // The tokenizer an import records when the files name none: the directory's tokenizer.json
  // where reads_tokenizer_json and there is one, else default_tokenizer(model_type).
  bool reads_tokenizer_json = false;
  std::string (*default_tokenizer)(const std::string& model_type);
};

struct ModelFamily {
  Arch arch;
  BlockDescription (*describe)(const ModelConfig& m);
  BlockParameters (*block_parameters)(const ModelConfig& m, int64_t layer, int64_t tp);
  EdgeParameters (*edge_parameters)(const ModelConfig& m);
  int64_t (*default_ffn_dim)(const ModelConfig& m);
  // Parameters of the logical (unpadded) model; include_positions: GPT-2's wpe counts too.
  int64_t (*num_parameters)(const ModelConfig& m, bool include_positions);
  // Model FLOPs per token, forward and backward (docs/MODEL.md): 6 per weight of every matrix
  // product plus 12 L T (n_head * head_dim) for the attention scores and their use.
  double (*flops_per_token)(const ModelConfig& m);
  // The family's own rules on the fields (the common bounds are ModelConfig::validate's).
  void (*validate)(const ModelConfig& m, const FieldNames& names);
  // What tp must divide (heads aside, which every family splits): a one-line input error.
  void (*validate_tp)(const ModelConfig& m, int64_t tp);
  // The fields the checkpoint's config attribute adds to n_layer, n_head, d_model, seq_len and
  // vocab_size, written and read back (validation follows).
  void (*write_fields)(nlohmann::ordered_json& json, const ModelConfig& m);
  void (*read_fields)(const nlohmann::ordered_json& json, const std::string& what, ModelConfig& m);
  bool writes_arch;          // the config names the family ("arch"); GPT-2's files never did
  bool takes_shape_options;  // train needs kArchFields' options beside the plain shape ones
  std::span<const ModelPreset> presets;
  const HfFormat* hf;  // Hugging Face's config.json and weights
};

// The project's initialisation, GPT-2's, which the Llama family keeps too: matrices N(0, 0.02),
// and N(0, 0.02/sqrt(2*n_layer)) for the two residual output projections of each block.
inline constexpr float kLinearInitStd = 0.02f;
float residual_projection_init_std(int64_t n_layer);

// The ModelFamily of a family's file: a struct F of the static functions ModelFamily points to
// (describe, block_parameters, ..., presets(), hf_format()) and the constants kArch, kWritesArch
// and kTakesShapeOptions.
template <typename F>
const ModelFamily& family_from() {
  static const ModelFamily family{.arch = F::kArch,
                                  .describe = F::describe,
                                  .block_parameters = F::block_parameters,
                                  .edge_parameters = F::edge_parameters,
                                  .default_ffn_dim = F::default_ffn_dim,
                                  .num_parameters = F::num_parameters,
                                  .flops_per_token = F::flops_per_token,
                                  .validate = F::validate,
                                  .validate_tp = F::validate_tp,
                                  .write_fields = F::write_fields,
                                  .read_fields = F::read_fields,
                                  .writes_arch = F::kWritesArch,
                                  .takes_shape_options = F::kTakesShapeOptions,
                                  .presets = F::presets(),
                                  .hf = &F::hf_format()};
  return family;
}

// The HfFormat of a family's Hugging Face file: a struct H of the static functions HfFormat
// points to (read_config, write_config, hf_name, ...) and the constants kArchitectures,
// kModelTypeDecides and kReadsTokenizerJson.
template <typename H>
const HfFormat& hf_format_from() {
  static const HfFormat format{.architectures = H::kArchitectures,
                               .model_type_decides = H::kModelTypeDecides,
                               .read_config = H::read_config,
                               .write_config = H::write_config,
                               .hf_name = H::hf_name,
                               .our_name = H::our_name,
                               .is_buffer = H::is_buffer,
                               .transposed = H::transposed,
                               .reads_tokenizer_json = H::kReadsTokenizerJson,
                               .default_tokenizer = H::default_tokenizer};
  return format;
}

const ModelFamily& family_of(Arch arch);
inline const ModelFamily& family_of(const ModelConfig& m) {
  return family_of(m.arch);
}
inline BlockDescription describe(const ModelConfig& m) {
  return family_of(m).describe(m);
}
// Every parameter of the model as a checkpoint names it, with its logical (unsplit, unpadded)
// shape: the token embedding, the position table, the blocks', the untied head, the final norm.
struct LogicalParameter {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<LogicalParameter> logical_parameters(const ModelConfig& m);

// Every family, in Arch's order.
std::span<const ModelFamily* const> model_families();
// The preset of that name in any family; throws an input error listing them all otherwise.
const ModelPreset& find_preset(const std::string& name);

}  // namespace gpt
