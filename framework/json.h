// JSON for the whole project: nlohmann::json (Debian's nlohmann-json3-dev), with keys kept in the
// order they were added so metrics lines and configs read as written. Numbers are written in
// their shortest round-trip form and non-finite reals as null (JSON has no inf or nan). Reading
// goes through the helpers below, so malformed, hostile or missing input is a one-line input
// error naming the file or attribute, never a library exception text or a crash.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "framework/check.h"

namespace gpt {

using Json = nlohmann::ordered_json;

// The deepest nesting of arrays and objects read from a file. The project's own files nest three
// levels; nlohmann builds, copies and prints values recursively, so a value nested hundreds of
// thousands deep would overflow the stack. Deeper text is refused at its first bracket too deep.
constexpr int kMaxJsonDepth = 64;

// Parses `text` as a JSON object, in time linear in its length however many keys an object has;
// throws a one-line input error naming `what` otherwise (not JSON, not an object, or nested
// deeper than kMaxJsonDepth).
Json parse_json_object(const std::string& text, const std::string& what);

// The same for files whose objects of many keys are looked up by key (a tokenizer's vocabulary of
// 10^5 tokens) and whose key order does not matter: the ordered Json finds a key by a linear
// search; this one keeps keys in a sorted map.
using LargeJson = nlohmann::json;
LargeJson parse_large_json_object(const std::string& text, const std::string& what);

// Text from a file, for a message: JSON-quoted (control characters escaped, so the message stays
// one line) and cut to its first 40 bytes, so a hostile file cannot flood the error.
std::string quoted_excerpt(const std::string& untrusted);

// Text from a file or a library's message, shown as written (no quotes added): control
// characters as \xNN, so the message stays one line, and cut after `max_bytes` bytes of that
// (at most 3 more, then "...").
std::string shown_excerpt(const std::string& untrusted, size_t max_bytes = 80);

// What a message says was found instead of the expected value: a number's own short text, or
// the kind of value ("a string", "an array", ...); never the value itself.
std::string json_found(const Json& value);
std::string json_found(const LargeJson& value);

namespace json_detail {
template <typename T>
struct IsVector : std::false_type {};
template <typename E>
struct IsVector<std::vector<E>> : std::true_type {};
}  // namespace json_detail

// What json_value<T> accepts, for messages: "a 64-bit integer", "an array of 64-bit integers".
template <typename T>
std::string json_expected() {
  if constexpr (json_detail::IsVector<T>::value) {
    const std::string element = json_expected<typename T::value_type>();
    return "an array of " + element.substr(element.find(' ') + 1) + "s";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "a boolean";
  } else if constexpr (std::is_integral_v<T>) {
    std::string text = "a ";
    text += std::to_string(8 * sizeof(T));
    text += std::is_signed_v<T> ? "-bit integer" : "-bit unsigned integer";
    return text;
  } else if constexpr (std::is_floating_point_v<T>) {
    return "a number";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return "a string";
  } else {
    return "a JSON value";
  }
}

// `value` as T, or none when it holds another type. Integers must be JSON integers within T's
// range: 2.7 or 1e3 is not an integer, and 2^63 is not an int64_t (nlohmann's own get<> would
// truncate or wrap them).
template <typename T, typename J>
std::optional<T> json_value(const J& value) {
  if constexpr (json_detail::IsVector<T>::value) {
    if (!value.is_array()) return std::nullopt;
    T out;
    out.reserve(value.size());
    for (const J& element : value) {
      std::optional<typename T::value_type> e = json_value<typename T::value_type, J>(element);
      if (!e) return std::nullopt;
      out.push_back(std::move(*e));
    }
    return out;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) return std::nullopt;
    return value.template get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (value.is_number_unsigned()) {
      const auto u = value.template get<uint64_t>();
      if (!std::in_range<T>(u)) return std::nullopt;
      return static_cast<T>(u);
    }
    if (!value.is_number_integer()) return std::nullopt;
    const auto i = value.template get<int64_t>();
    if (!std::in_range<T>(i)) return std::nullopt;
    return static_cast<T>(i);
  } else {
    try {
      return value.template get<T>();
    } catch (const nlohmann::json::exception&) {
      return std::nullopt;
    }
  }
}

// Whether object has the key with a value other than null: Hugging Face's files and OpenAI's API
// write null for "the default" or "not given".
inline bool json_has_value(const Json& object, const std::string& key) {
  const auto it = object.find(key);
  return it != object.end() && !it->is_null();
}

// object[key] as T (json_value's rules); throws a one-line input error naming `what`, the key
// and the expected type when the key is missing or holds anything else.
template <typename T>
T json_field(const Json& object, const std::string& key, const std::string& what) {
  const auto it = object.find(key);
  GPT_INPUT_CHECK(it != object.end(), what << " has no '" << key << "'");
  std::optional<T> value = json_value<T>(*it);
  GPT_INPUT_CHECK(value.has_value(), what << ": '" << key << "' must be " << json_expected<T>()
                                          << " (found " << json_found(*it) << ")");
  return std::move(*value);
}

}  // namespace gpt
