// The model's shape and what follows from it: head size, padded vocabulary, parameter count and
// FLOPs per token. Its `arch` names the family (docs/MODEL.md): GPT-2, or the Llama family, whose
// fields below give Llama 2/3, Mistral, Qwen2 and Qwen3. What the family makes of the fields
// (its blocks, parameters, presets, FLOPs) is the family's file's (framework/families/).
// Validation here covers the model alone; layout rules (tp dividing heads, ...) are checked with
// the options in launch/.
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

enum class Arch { kGpt2, kLlama };
const char* arch_name(Arch arch);  // "gpt2", "llama"
// Throws a one-line gpt::Error naming `what` (--arch, or a file's key) for anything else.
Arch parse_arch(const std::string& name, const std::string& what = "--arch");

// Rotary frequencies: as computed (kNone), or rescaled as Llama 3.1 does (kLlama3: long
// wavelengths divided by `factor`, short ones kept, a smooth blend between; its four
// parameters are those of config.json's rope_scaling).
enum class RopeScaling { kNone, kLlama3 };
struct RopeScalingParams {
  RopeScaling type = RopeScaling::kNone;
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_positions = 8192;
};

struct ModelConfig {
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t d_model = 128;
  int64_t seq_len = 64;      // positions a sequence has (GPT-2: also the learned positions)
  int64_t vocab_size = 256;  // the data set's
  Arch arch = Arch::kGpt2;

  // The Llama family's (GPT-2 keeps the defaults; its validation refuses others).
  int64_t n_kv_head = 0;   // 0 = n_head
  int64_t head_size = 0;   // 0 = d_model / n_head
  int64_t ffn_hidden = 0;  // 0: the family's (GPT-2 4 d_model, Llama 8 d_model / 3 up to 256)
  double rope_theta = 10000.0;
  RopeScalingParams rope_scaling{};
  double norm_eps = 1e-5;
  bool tie_embeddings = false;  // GPT-2's head is always tied
  bool qkv_bias = false;        // Qwen2: biases on q, k and v
  bool qk_norm = false;         // Qwen3: RMSNorm over each head's q and k before the rotation

  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  int64_t head_dim() const { return head_size > 0 ? head_size : d_model / n_head; }
  int64_t q_channels() const { return n_head * head_dim(); }       // width of q and of o's input
  int64_t kv_channels() const { return kv_heads() * head_dim(); }  // width of k and of v
  int64_t ffn_dim() const;  // ffn_hidden, or the family's default
  // Key/value heads on each of tp ranks: kv_heads/tp when tp divides them, else 1 shared by
  // tp/kv_heads consecutive ranks (kv_replicas) when kv_heads divides tp.
  int64_t kv_heads_per_rank(int64_t tp) const { return kv_heads() >= tp ? kv_heads() / tp : 1; }
  int64_t kv_replicas(int64_t tp) const { return kv_heads() >= tp ? 1 : tp / kv_heads(); }
  // The width of k and of v on each of tp ranks.
  int64_t kv_channels_per_rank(int64_t tp) const { return kv_heads_per_rank(tp) * head_dim(); }
  // Vocabulary padded to a multiple of 64 * tp; padded rows are zero and never used.
  int64_t padded_vocab(int64_t tp) const;
  // Parameters of the logical (unpadded) model, a position table excluded (FLOPs formula) or
  // included; and the model FLOPs per token (the family's, docs/MODEL.md).
  int64_t num_parameters(bool include_positions) const;
  double flops_per_token() const;
  // Throws a one-line gpt::Error naming the bad field: as its option (--n-layer), or with
  // from_file as that file's key ("FILE: attribute config: n_layer").
  void validate(const std::string& from_file = "") const;
};

// A real's shortest text that reads back to it, as the checkpoint's JSON writes it.
std::string shortest_text(double value);

// The architecture and the Llama family's fields, one list by their command-line option: a
// preset copies the fields a user did not give (launch/training/train_options.cpp), and a
// checkpoint refuses an option that disagrees with its stored model
// (launch/training/run_config.cpp). `same` compares what a field means (the kv heads, head width
// and MLP width the defaults give); `text` gives the option's value for a command line (plan's run
// commands): "" for a switch that is off, "on" for one that is on.
struct ModelField {
  const char* option;
  void (*copy)(ModelConfig& to, const ModelConfig& from);
  bool (*same)(const ModelConfig& a, const ModelConfig& b);
  std::string (*text)(const ModelConfig& m);
};
inline constexpr ModelField kArchFields[] = {
    {"arch", [](ModelConfig& t, const ModelConfig& f) { t.arch = f.arch; },
     [](const ModelConfig& a, const ModelConfig& b) { return a.arch == b.arch; },
     [](const ModelConfig& m) { return std::string(arch_name(m.arch)); }},
    {"n-kv-head", [](ModelConfig& t, const ModelConfig& f) { t.n_kv_head = f.n_kv_head; },
     [](const ModelConfig& a, const ModelConfig& b) { return a.kv_heads() == b.kv_heads(); },
     [](const ModelConfig& m) { return std::to_string(m.kv_heads()); }},
    {"head-dim", [](ModelConfig& t, const ModelConfig& f) { t.head_size = f.head_size; },
     [](const ModelConfig& a, const ModelConfig& b) { return a.head_dim() == b.head_dim(); },
     [](const ModelConfig& m) { return std::to_string(m.head_dim()); }},
    {"ffn-hidden-size", [](ModelConfig& t, const ModelConfig& f) { t.ffn_hidden = f.ffn_hidden; },
     [](const ModelConfig& a, const ModelConfig& b) { return a.ffn_dim() == b.ffn_dim(); },
     [](const ModelConfig& m) { return std::to_string(m.ffn_dim()); }},
    {"rope-theta", [](ModelConfig& t, const ModelConfig& f) { t.rope_theta = f.rope_theta; },
     [](const ModelConfig& a, const ModelConfig& b) { return a.rope_theta == b.rope_theta; },
     [](const ModelConfig& m) { return shortest_text(m.rope_theta); }},
    {"rope-scaling", [](ModelConfig& t, const ModelConfig& f) { t.rope_scaling = f.rope_scaling; },
     [](const ModelConfig& a, const ModelConfig& b) {
       return a.rope_scaling.type == b.rope_scaling.type;
     },
     [](const ModelConfig& m) {
       return std::string(m.rope_scaling.type == RopeScaling::kLlama3 ? "llama3" : "none");
     }},
    {"norm-eps", [](ModelConfig& t, const ModelConfig& f) { t.norm_eps = f.norm_eps; },
     [](const ModelConfig& a, const ModelConfig& b) { return a.norm_eps == b.norm_eps; },
     [](const ModelConfig& m) { return shortest_text(m.norm_eps); }},
    {"tie-embeddings",
     [](ModelConfig& t, const ModelConfig& f) { t.tie_embeddings = f.tie_embeddings; },
     [](const ModelConfig& a, const ModelConfig& b) {
       return a.tie_embeddings == b.tie_embeddings;
     },
     [](const ModelConfig& m) { return std::string(m.tie_embeddings ? "on" : ""); }},
    {"qkv-bias", [](ModelConfig& t, const ModelConfig& f) { t.qkv_bias = f.qkv_bias; },
     [](const ModelConfig& a, const ModelConfig& b) { return a.qkv_bias == b.qkv_bias; },
     [](const ModelConfig& m) { return std::string(m.qkv_bias ? "on" : ""); }},
    {"qk-norm", [](ModelConfig& t, const ModelConfig& f) { t.qk_norm = f.qk_norm; },
     [](const ModelConfig& a, const ModelConfig& b) { return a.qk_norm == b.qk_norm; },
     [](const ModelConfig& m) { return std::string(m.qk_norm ? "on" : ""); }},
};

// The options that give train this model's shape and architecture beside the plain ones
// (--n-layer, --n-head, --d-model, --seq-len): none for GPT-2, kArchFields' for the Llama family.
std::string model_shape_options(const ModelConfig& model);

// The model as JSON: the one place its fields are named for files (the checkpoint's config
// attribute). GPT-2 writes its five fields (n_layer, n_head, d_model, seq_len, vocab_size), as it
// always has; Llama adds "arch" and every field above. from_json validates and names `what` (the
// file) in its errors; a file without "arch" is GPT-2.
void to_json(nlohmann::ordered_json& json, const ModelConfig& model);
ModelConfig model_config_from_json(const nlohmann::ordered_json& json, const std::string& what);

}  // namespace gpt
