// json.dumps as Python's json module writes it, for transformers' tojson filter (see value.h):
// its escapes (only '"', '\\' and control characters, or every non-ASCII character with
// ensure_ascii), its separators (", " and ": " on one line, "," and ": " with an indent), floats
// as repr() with NaN and Infinity, and keys of str, int, float, bool or None.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>
#include <cmath>

#include "framework/text/jinja/failure.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"
#include "framework/text/jinja/value.h"
#include "framework/text/unicode_text.h"

namespace gpt::jinja {
namespace {

class JsonWriter {
 public:
  JsonWriter(const JsonStyle& style, size_t max_bytes) : style_(style), max_bytes_(max_bytes) {
    if (style.separators) {
      item_separator_ = style.separators->first;
      key_separator_ = style.separators->second;
    } else if (style.indent) {
      item_separator_ = ",";
    }
  }

  void value(const Value& v, int level) {
    ++value_work();
    if (level > kMaxValueDepth) fail("a value nested too deep for tojson");
    switch (v.kind()) {
      case Kind::kNone:
        return put("null");
      case Kind::kBool:
        return put(v.as_bool() ? "true" : "false");
      case Kind::kInt:
        return put(std::to_string(v.as_int()));
      case Kind::kFloat:
        return put(float_text(v.as_float()));
      case Kind::kString:
        return string(v.str());
      case Kind::kList:
      case Kind::kTuple:
        return list(v.items(), level);
      case Kind::kDict:
        return dict(v.dict(), level);
      default:
        fail("Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  static std::string float_text(double x) {
    if (x != x) return "NaN";
    if (x == HUGE_VAL) return "Infinity";
    if (x == -HUGE_VAL) return "-Infinity";
    return py_float_repr(x);
  }

  void put(std::string_view s) {
    if (out_.size() + s.size() > max_bytes_) fail("tojson: the text is too long");
    out_ += s;
  }

  void newline(int level) {
    if (!style_.indent) return;
    std::string line = "\n";
    for (int i = 0; i < level; ++i) line += *style_.indent;
    put(line);
  }

  void string(std::string_view s) {
    static const char hex[] = "0123456789abcdef";
    std::string text = "\"";
    auto escape16 = [&](unsigned u) {
      text += "\\u";
      for (int k = 3; k >= 0; --k) text += hex[(u >> (4 * k)) & 15];
    };
    for (size_t i = 0, n = 0; i < s.size(); i += n) {
      const char32_t c = utf8_decode(s, i, n);
      switch (c) {
        case '"':
          text += "\\\"";
          break;
        case '\\':
          text += "\\\\";
          break;
        case '\n':
          text += "\\n";
          break;
        case '\r':
          text += "\\r";
          break;
        case '\t':
          text += "\\t";
          break;
        case '\b':
          text += "\\b";
          break;
        case '\f':
          text += "\\f";
          break;
        default:
          if (c < 0x20 || (style_.ensure_ascii && c >= 0x7F)) {
            if (c >= 0x10000) {
              escape16(0xD800 + ((c - 0x10000) >> 10));
              escape16(0xDC00 + ((c - 0x10000) & 0x3FF));
            } else {
              escape16(c);
            }
          } else {
            text.append(s.substr(i, n));
          }
      }
      if (text.size() > max_bytes_) fail("tojson: the text is too long");
    }
    put(text + "\"");
  }

  void list(const std::vector<Value>& items, int level) {
    if (items.empty()) return put("[]");
    put("[");
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) put(item_separator_);
      newline(level + 1);
      value(items[i], level + 1);
    }
    newline(level);
    put("]");
  }

  // A key as json writes it: str as is, the other scalars as their JSON text.
  static std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::kString:
        return k.str();
      case Kind::kFloat:
        return float_text(k.as_float());
      case Kind::kBool:
        return k.as_bool() ? "true" : "false";
      case Kind::kNone:
        return "null";
      case Kind::kInt:
        return std::to_string(k.as_int());
      default:
        fail("keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void dict(const Dict& d, int level) {
    if (d.entries.empty()) return put("{}");
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries) entries.push_back(&e);
    if (style_.sort_keys)  // sorted(d.items()): by key (keys are unique, values never compared)
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return less(a->first, b->first); });
    put("{");
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) put(item_separator_);
      newline(level + 1);
      string(key_text(entries[i]->first));
      put(key_separator_);
      value(entries[i]->second, level + 1);
    }
    newline(level);
    put("}");
  }

  const JsonStyle& style_;
  size_t max_bytes_;
  std::string item_separator_ = ", ", key_separator_ = ": ";
  std::string out_;
};

}  // namespace

std::string to_json(const Value& v, const JsonStyle& style, size_t max_bytes) {
  JsonWriter writer(style, max_bytes);
  writer.value(v, 0);
  return writer.take();
}

}  // namespace gpt::jinja
