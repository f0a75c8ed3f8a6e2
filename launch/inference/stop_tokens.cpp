// The ids that end a generation (see stop_tokens.h).
#include "launch/inference/stop_tokens.h"

#include <optional>

#include "framework/check.h"
#include "framework/text/hf_tokenizer.h"

namespace gpt {
namespace {

constexpr size_t kMaxStopIds = 64;

// An eos_token_id: one id or a list of them.
std::vector<int64_t> token_ids(const Json& value, const std::string& what) {
  if (const std::optional<int64_t> one = json_value<int64_t>(value)) return {*one};
  std::optional<std::vector<int64_t>> many = json_value<std::vector<int64_t>>(value);
  GPT_INPUT_CHECK(many.has_value() && many->size() <= kMaxStopIds,
                  what << ": eos_token_id must be a token id or a list of up to " << kMaxStopIds
                       << " of them (found " << json_found(value) << ")");
  return std::move(*many);
}

}  // namespace

std::vector<int32_t> stop_token_ids(const TextTokenizer& tokenizer, const Json& hf_extras,
                                    int64_t vocab_size, const std::string& what) {
  std::vector<int64_t> ids;
  if (tokenizer.hf() != nullptr) ids.push_back(tokenizer.hf()->eos());
  if (!tokenizer.document_token_first()) ids.push_back(tokenizer.document_token());
  if (json_has_value(hf_extras, "eos_token_id"))
    for (const int64_t id : token_ids(hf_extras.at("eos_token_id"), what + ": hf"))
      ids.push_back(id);
  if (hf_extras.contains("generation_config") &&
      json_has_value(hf_extras.at("generation_config"), "eos_token_id"))
    for (const int64_t id : token_ids(hf_extras.at("generation_config").at("eos_token_id"),
                                      what + ": hf: generation_config"))
      ids.push_back(id);
  std::vector<int32_t> stops;
  for (const int64_t id : ids)
    if (id >= 0 && id < vocab_size) stops.push_back(static_cast<int32_t>(id));
  std::sort(stops.begin(), stops.end());
  stops.erase(std::unique(stops.begin(), stops.end()), stops.end());
  return stops;
}

}  // namespace gpt
