// parse_json_object and the message helpers (see json.h).
#include "framework/json.h"

#include <unordered_map>

namespace gpt {
namespace {

constexpr size_t kExcerptBytes = 40;

// Builds the value from nlohmann's SAX events instead of its own DOM parser, for two bounds the
// DOM parser lacks. Depth: the events come from an iterative parser, so text nested deeper than
// kMaxJsonDepth is refused at the first bracket too deep, before anything deep is built. Time:
// the ordered Json's insert looks for the key among all before it, so an object of n keys costs
// n^2 / 2 comparisons (90,000 keys: 19 s); here each open object keeps a hash index of its keys
// and new keys are appended in constant time. A repeated key keeps its first place and takes the
// last value, as nlohmann's own parse does.
template <typename J>
class ValueBuilder {
 public:
  using string_t = typename J::string_t;

  bool null() { return add(J(nullptr)); }
  bool boolean(bool v) { return add(J(v)); }
  bool number_integer(typename J::number_integer_t v) { return add(J(v)); }
  bool number_unsigned(typename J::number_unsigned_t v) { return add(J(v)); }
  bool number_float(typename J::number_float_t v, const string_t&) { return add(J(v)); }
  bool string(string_t& v) { return add(J(std::move(v))); }
  bool binary(typename J::binary_t&) { return false; }  // never produced by text
  bool start_object(size_t) { return open(J::object()); }
  bool start_array(size_t) { return open(J::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(string_t& k) {
    Open& top = open_.back();
    auto& members = *top.value->template get_ptr<typename J::object_t*>();
    if constexpr (std::is_same_v<J, Json>) {
      // ordered_map is a vector of pairs: append past its linear search.
      auto& pairs = static_cast<std::vector<std::pair<const string_t, J>>&>(members);
      const auto [at, added] = top.keys.try_emplace(k, pairs.size());
      if (added) pairs.emplace_back(std::move(k), J());
      slot_ = &pairs[at->second].second;
    } else {
      slot_ = &members[std::move(k)];
    }
    return true;
  }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

  bool too_deep() const { return too_deep_; }
  J take() { return std::move(root_); }

 private:
  struct Open {
    J* value;
    std::unordered_map<string_t, size_t> keys;  // an ordered object's index (Json only)
  };

  // Where the next value goes: the root, the end of the open array, or the slot of the last key.
  J* place(J value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    J& top = *open_.back().value;
    if (top.is_array()) {
      top.push_back(std::move(value));
      return &top.back();
    }
    *slot_ = std::move(value);
    return slot_;
  }
  bool add(J value) {
    place(std::move(value));
    return true;
  }
  bool open(J value) {
    if (open_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      too_deep_ = true;
      return false;
    }
    // A container is filled only while it is the innermost open one, so the pointers to the
    // outer ones stay valid.
    open_.push_back(Open{place(std::move(value)), {}});
    return true;
  }
  bool close() {
    open_.pop_back();
    return true;
  }

  J root_;
  J* slot_ = nullptr;
  std::vector<Open> open_;
  bool too_deep_ = false;
};

template <typename J>
J parse_object(const std::string& text, const std::string& what) {
  ValueBuilder<J> builder;
  const bool parsed = J::sax_parse(text, &builder);
  GPT_INPUT_CHECK(!builder.too_deep(),
                  what << ": JSON nested deeper than " << kMaxJsonDepth << " levels");
  GPT_INPUT_CHECK(parsed, what << ": not valid JSON");
  J value = builder.take();
  GPT_INPUT_CHECK(value.is_object(), what << ": not a JSON object");
  return value;
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
