// What `convert --from-hf` keeps of a Hugging Face directory beside the model's shape, so that
// `--to-hf` of the imported model, or of a fine-tune of it, writes it back: the context the model
// was trained for (config.json's max_position_embeddings, which a fine-tune's shorter --seq-len
// must not replace), the bos and eos token ids (one id, or a list, as Llama 3.1 gives eos), and
// generation_config.json whole. It travels as the "hf" object of a checkpoint's config attribute
// (launch/training/run_config.h carries it through train).
#pragma once

#include <optional>
#include <string>

#include "framework/config.h"
#include "framework/json.h"

namespace gpt {

inline constexpr const char* kHfGenerationConfigFile = "generation_config.json";

// The kept fields of the directory `dir` whose config.json is `config` (read from `what`), each
// only where the directory has it: {"max_position_embeddings", "bos_token_id", "eos_token_id",
// "generation_config"}. A field of the wrong type is a one-line error naming the file and key.
Json read_hf_extras(const Json& config, const std::string& what, const std::string& dir);

// The "hf" object of a checkpoint's config, checked as read_hf_extras checks a directory's
// (`what` names the checkpoint); an empty object where there is none.
Json hf_extras_from_checkpoint(const Json& checkpoint_config, const std::string& what);

// Writes the kept fields into the config.json of `model` being exported: max_position_embeddings
// (Llama family; never below the model's own --seq-len), bos_token_id and eos_token_id. Returns
// generation_config.json's text: the kept file, else one of the token ids config.json holds
// (what transformers derives from config.json); none where there is neither.
std::optional<Json> apply_hf_extras(const Json& extras, const ModelConfig& model, Json& config);

}  // namespace gpt
