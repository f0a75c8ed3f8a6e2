// parse_json_object (see json.h).
#include "framework/json.h"

namespace gpt {

Json parse_json_object(const std::string& text, const std::string& what) {
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  GPT_INPUT_CHECK(!parsed.is_discarded(), what << ": not valid JSON");
  GPT_INPUT_CHECK(parsed.is_object(), what << ": not a JSON object");
  return parsed;
}

}  // namespace gpt
