// str() and repr() of the chat-template interpreter's values, as Python prints them (see value.h):
// lists, tuples, dicts and the dict views as their reprs, a Markup as Markup('...'), an undefined
// value as nothing (in str()) or Undefined (in repr()), a namespace as <Namespace {...}>.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>

#include "framework/text/jinja/failure.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"
#include "framework/text/jinja/value.h"

namespace gpt::jinja {
namespace {

void append_checked(std::string& out, std::string_view piece, size_t max_bytes) {
  if (out.size() + piece.size() > max_bytes) fail("a value printed is too long");
  out += piece;
}

void append_repr_at(std::string& out, const Value& v, size_t max_bytes, int depth);

void append_items(std::string& out, const std::vector<Value>& items, size_t max_bytes, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) append_checked(out, ", ", max_bytes);
    append_repr_at(out, items[i], max_bytes, depth);
  }
}

void append_dict(std::string& out, const std::vector<std::pair<Value, Value>>& entries,
                 size_t max_bytes, int depth) {
  append_checked(out, "{", max_bytes);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) append_checked(out, ", ", max_bytes);
    append_repr_at(out, entries[i].first, max_bytes, depth);
    append_checked(out, ": ", max_bytes);
    append_repr_at(out, entries[i].second, max_bytes, depth);
  }
  append_checked(out, "}", max_bytes);
}

// Namespaces being printed: one met again inside itself prints as Python's recursive dict repr.
thread_local std::vector<const Namespace*> namespaces_in_repr;

void append_repr_at(std::string& out, const Value& v, size_t max_bytes, int depth) {
  ++value_work();
  if (depth > kMaxValueDepth) fail("a value nested too deep to print");
  switch (v.kind()) {
    case Kind::kUndefined:
      return append_checked(out, "Undefined", max_bytes);
    case Kind::kString: {
      const std::string quoted = py_repr(v.str());
      return append_checked(out, v.markup() ? "Markup(" + quoted + ")" : quoted, max_bytes);
    }
    case Kind::kList:
      append_checked(out, "[", max_bytes);
      append_items(out, v.items(), max_bytes, depth + 1);
      return append_checked(out, "]", max_bytes);
    case Kind::kTuple:
      append_checked(out, "(", max_bytes);
      append_items(out, v.items(), max_bytes, depth + 1);
      return append_checked(out, v.items().size() == 1 ? ",)" : ")", max_bytes);
    case Kind::kRange: {
      const Seq& r = v.seq();
      std::string text = "range(" + std::to_string(r.start) + ", " + std::to_string(r.stop);
      if (r.step != 1) text += ", " + std::to_string(r.step);
      return append_checked(out, text + ")", max_bytes);
    }
    case Kind::kDictKeys:
    case Kind::kDictValues:
    case Kind::kDictItems:
      append_checked(out, type_name(v) + "([", max_bytes);
      append_items(out, v.items(), max_bytes, depth + 1);
      return append_checked(out, "])", max_bytes);
    case Kind::kDict:
      return append_dict(out, v.dict().entries, max_bytes, depth + 1);
    case Kind::kNamespace: {
      const Namespace* ns = &v.ns();
      append_checked(out, "<Namespace ", max_bytes);
      if (std::find(namespaces_in_repr.begin(), namespaces_in_repr.end(), ns) !=
          namespaces_in_repr.end()) {
        append_checked(out, "{...}", max_bytes);
      } else {
        namespaces_in_repr.push_back(ns);
        std::vector<std::pair<Value, Value>> entries;
        for (const auto& [name, value] : ns->attrs)
          entries.emplace_back(Value::string(name), value);
        try {
          append_dict(out, entries, max_bytes, depth + 1);
        } catch (...) {
          namespaces_in_repr.pop_back();
          throw;
        }
        namespaces_in_repr.pop_back();
      }
      return append_checked(out, ">", max_bytes);
    }
    case Kind::kIterator:
    case Kind::kLoop:
    case Kind::kCallable: {
      if (v.is(Kind::kIterator))
        unsupported("printing a " + type_name(v) + " (Python prints its address; use |list)");
      const std::optional<std::string> text = v.as<Opaque>().repr();
      if (!text) unsupported("printing a " + type_name(v) + " (Python prints its address)");
      return append_checked(out, *text, max_bytes);
    }
    default: {
      std::string text;
      append_str(text, v, max_bytes);
      return append_checked(out, text, max_bytes);
    }
  }
}

}  // namespace

void append_str(std::string& out, const Value& v, size_t max_bytes) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return;
    case Kind::kNone:
      return append_checked(out, "None", max_bytes);
    case Kind::kBool:
      return append_checked(out, v.as_bool() ? "True" : "False", max_bytes);
    case Kind::kInt:
      return append_checked(out, std::to_string(v.as_int()), max_bytes);
    case Kind::kFloat:
      return append_checked(out, py_float_repr(v.as_float()), max_bytes);
    case Kind::kString:
      return append_checked(out, v.str(), max_bytes);
    default:
      return append_repr_at(out, v, max_bytes, 0);
  }
}

void append_repr(std::string& out, const Value& v, size_t max_bytes) {
  append_repr_at(out, v, max_bytes, 0);
}

std::string to_str(const Value& v, size_t max_bytes) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v, max_bytes);
  return out;
}

}  // namespace gpt::jinja
