// The Hugging Face fields an import keeps and an export writes back (see hf_extras.h).
#include "framework/io/hf_extras.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "framework/families/model_family.h"
#include "framework/io/hf_weight_files.h"

namespace gpt {
namespace {

constexpr const char* kTokenIdKeys[] = {"bos_token_id", "eos_token_id"};
// A real generation_config.json is well under a kilobyte; it travels inside every checkpoint's
// config attribute, so a larger one is not kept.
constexpr size_t kMaxGenerationConfigBytes = 64u << 10;

// The kept fields of `source` (a config.json, or a checkpoint's "hf" object), checked: a key that
// is absent or null is left out.
Json kept_fields(const Json& source, const std::string& what) {
  Json out = Json::object();
  const auto present = [&](const char* key) { return json_has_value(source, key); };
  if (present("max_position_embeddings")) {
    const auto positions = json_field<int64_t>(source, "max_position_embeddings", what);
    GPT_INPUT_CHECK(positions >= 1, what << ": max_position_embeddings must be at least 1");
    out["max_position_embeddings"] = positions;
  }
  for (const char* key : kTokenIdKeys) {
    if (!present(key)) continue;
    // One id, or a list of them (Llama 3.1 ends a turn on any of three).
    const Json& value = source.at(key);
    std::vector<int64_t> ids;
    if (const std::optional<int64_t> one = json_value<int64_t>(value)) {
      ids = {*one};
    } else if (std::optional<std::vector<int64_t>> many = json_value<std::vector<int64_t>>(value)) {
      ids = std::move(*many);
    }
    GPT_INPUT_CHECK(!ids.empty() && ids.size() <= 64 &&
                        std::all_of(ids.begin(), ids.end(),
                                    [](int64_t id) { return id >= 0 && id <= kMaxVocab; }),
                    what << ": '" << key << "' must be a token id or a list of up to 64 of them "
                         << "(found " << json_found(value) << ")");
    out[key] = value;
  }
  return out;
}

Json checked_generation_config(const Json& value, const std::string& what) {
  GPT_INPUT_CHECK(
      value.is_object() && value.dump().size() <= kMaxGenerationConfigBytes,
      what << " must be a JSON object of at most " << kMaxGenerationConfigBytes << " bytes");
  return value;
}

}  // namespace

Json read_hf_extras(const Json& config, const std::string& what, const std::string& dir) {
  Json extras = kept_fields(config, what);
  const std::filesystem::path generation = std::filesystem::path(dir) / kHfGenerationConfigFile;
  std::error_code ec;
  if (std::filesystem::exists(generation, ec))
    extras["generation_config"] = checked_generation_config(
        read_hf_json(generation.string(), "--from-hf"), generation.string());
  return extras;
}

Json hf_extras_from_checkpoint(const Json& checkpoint_config, const std::string& what) {
  if (!checkpoint_config.contains("hf")) return Json::object();
  const std::string hf_what = what + ": hf";
  const Json& stored = checkpoint_config.at("hf");
  GPT_INPUT_CHECK(stored.is_object(), hf_what << " must be an object");
  Json extras = kept_fields(stored, hf_what);
  if (stored.contains("generation_config"))
    extras["generation_config"] =
        checked_generation_config(stored.at("generation_config"), hf_what + ": generation_config");
  return extras;
}

std::optional<Json> apply_hf_extras(const Json& extras, const ModelConfig& model, Json& config) {
  // Learned positions (GPT-2's): a fine-tune's shorter --seq-len is all the model has.
  if (!describe(model).learned_positions() && extras.contains("max_position_embeddings"))
    config["max_position_embeddings"] =
        std::max(model.seq_len, extras.at("max_position_embeddings").get<int64_t>());
  for (const char* key : kTokenIdKeys)
    if (extras.contains(key)) config[key] = extras.at(key);
  if (extras.contains("generation_config")) return extras.at("generation_config");
  Json generation = Json::object();
  for (const char* key : kTokenIdKeys)
    if (config.contains(key)) generation[key] = config.at(key);
  if (generation.empty()) return std::nullopt;
  return generation;
}

}  // namespace gpt
