// parse_json_object and the message helpers (see json.h).
#include "framework/json.h"

#include <algorithm>

namespace gpt {
namespace {

constexpr size_t kExcerptBytes = 40;

// The deepest nesting of brackets outside strings: a cheap scan before nlohmann builds anything.
// For malformed text the count may be off, but the parse then fails on its own.
int nesting_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // skips the escaped character, \" included
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth) break;  // the answer is known
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

template <typename J>
J parse_object(const std::string& text, const std::string& what) {
  GPT_INPUT_CHECK(nesting_depth(text) <= kMaxJsonDepth,
                  what << ": JSON nested deeper than " << kMaxJsonDepth << " levels");
  J parsed = J::parse(text, nullptr, /*allow_exceptions=*/false);
  GPT_INPUT_CHECK(!parsed.is_discarded(), what << ": not valid JSON");
  GPT_INPUT_CHECK(parsed.is_object(), what << ": not a JSON object");
  return parsed;
}

}  // namespace

Json parse_json_object(const std::string& text, const std::string& what) {
  return parse_object<Json>(text, what);
}

LargeJson parse_large_json_object(const std::string& text, const std::string& what) {
  return parse_object<LargeJson>(text, what);
}

std::string quoted_excerpt(const std::string& untrusted) {
  const bool cut = untrusted.size() > kExcerptBytes;
  // A cut may split a UTF-8 sequence: the replace handler prints U+FFFD instead of throwing.
  return Json(untrusted.substr(0, kExcerptBytes))
             .dump(-1, ' ', false, Json::error_handler_t::replace) +
         (cut ? "..." : "");
}

std::string shown_excerpt(const std::string& untrusted, size_t max_bytes) {
  std::string out;
  size_t i = 0;
  for (; i < untrusted.size() && out.size() < max_bytes; ++i) {
    const auto c = static_cast<unsigned char>(untrusted[i]);
    if (c >= 0x20 && c != 0x7f) {
      out += static_cast<char>(c);
    } else {
      static const char hex[] = "0123456789abcdef";
      out += {'\\', 'x', hex[c >> 4], hex[c & 15]};
    }
  }
  // An escape is 4 bytes: the text shown, not the text read, is what is bounded.
  return i < untrusted.size() ? out + "..." : out;
}

namespace {
template <typename J>
std::string found(const J& value) {
  if (value.is_number()) return value.dump();
  const std::string kind = value.type_name();
  if (kind == "array" || kind == "object") return "an " + kind;
  return "a " + kind;
}
}  // namespace

std::string json_found(const Json& value) {
  return found(value);
}
std::string json_found(const LargeJson& value) {
  return found(value);
}

}  // namespace gpt
