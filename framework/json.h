// JSON for the whole project: nlohmann::json (Debian's nlohmann-json3-dev), with keys kept in the
// order they were added so metrics lines and configs read as written. Numbers are written in
// their shortest round-trip form and non-finite reals as null (JSON has no inf or nan). Reading
// goes through the two helpers below, so malformed or missing input is a one-line input error
// naming the file or attribute, never a library exception text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "framework/check.h"

namespace gpt {

using Json = nlohmann::ordered_json;

// Parses `text` as a JSON object; throws a one-line input error naming `what` otherwise.
Json parse_json_object(const std::string& text, const std::string& what);

// object[key] as T; throws a one-line input error naming `what` and the key when the key is
// missing or holds another type.
template <typename T>
T json_field(const Json& object, const std::string& key, const std::string& what) {
  const auto it = object.find(key);
  GPT_INPUT_CHECK(it != object.end(), what << " has no '" << key << "'");
  try {
    return it->template get<T>();
  } catch (const nlohmann::json::exception&) {
    fail_input(GPT_MSG(what << ": '" << key << "' has the wrong type (" << it->dump() << ")"));
  }
}

}  // namespace gpt
