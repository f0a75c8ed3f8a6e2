// The values of the chat-template interpreter (framework/text/jinja/), with the semantics of the
// Python objects Jinja2 works on: a template sees a conversation's JSON as dicts, lists, str,
// int, float, bool and None, makes tuples, ranges, iterators and namespaces, and prints,
// compares and tests them as Python does (str() and repr(), ==, <, truthiness). Hand-written:
// the point is to render exactly what transformers' Jinja2 renders, in C++.
//
// Ownership: a Value shares its payload (strings, sequences and dicts are immutable once made,
// except list.pop()/clear(), which Jinja2's sandbox allows). Namespaces, macros and the scopes
// macros close over are owned by the rendering (they can refer to each other in cycles) and only
// pointed to. Containers record their nesting depth, refused past kMaxValueDepth, so that
// printing, comparing and freeing them cannot exhaust the stack.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "framework/json.h"

namespace gpt::jinja {

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  // Sequences (a Seq payload).
  kList,
  kTuple,
  kRange,
  kDictKeys,
  kDictValues,
  kDictItems,
  kDict,
  kIterator,  // a generator or other one-pass iterator
  kNamespace,
  kLoop,      // the loop variable of a for loop
  kCallable,  // a macro, a global function or a bound method
};

struct Object {
  virtual ~Object() = default;
};

struct Seq;
struct Dict;
struct Iterator;
struct Namespace;

class Value {
 public:
  Value() = default;  // undefined, with no reason
  static Value undefined(std::string why, bool unsafe = false);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double f);
  static Value string(std::string s, bool markup = false);
  // A sequence of `kind` (kList ... kDictItems); fails past kMaxValueDepth or kMaxListItems.
  static Value sequence(Kind kind, std::vector<Value> items);
  static Value range(int64_t start, int64_t stop, int64_t step);
  static Value dict(std::shared_ptr<Dict> d);
  static Value iterator(std::shared_ptr<Iterator> it);
  static Value object(Kind kind, std::shared_ptr<Object> o);
  // A namespace owned elsewhere (by the rendering).
  static Value namespace_ref(Namespace* ns);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const {
    return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat;
  }
  bool is_sequence() const { return kind_ >= Kind::kList && kind_ <= Kind::kDictItems; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }  // kBool and kInt
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return static_cast<const Text&>(*obj_).s; }
  bool markup() const { return flag_; }
  bool unsafe() const { return flag_; }  // kUndefined: an attribute the sandbox refuses
  const std::string& why() const;        // kUndefined: what is undefined
  Seq& seq() const;
  const std::vector<Value>& items() const;
  const Dict& dict() const;
  Iterator& iter() const;
  Namespace& ns() const;
  template <typename T>
  T& as() const {
    return static_cast<T&>(*obj_);
  }
  const Object* identity() const { return obj_.get(); }

 private:
  struct Text : Object {
    std::string s;
  };
  Kind kind_ = Kind::kUndefined;
  bool flag_ = false;
  union {
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<Object> obj_;
};

struct Seq : Object {
  std::vector<Value> items;
  int depth = 1;
  int64_t start = 0, stop = 0, step = 1;  // kRange's arguments, for its repr
};

struct Dict : Object {
  std::vector<std::pair<Value, Value>> entries;         // in insertion order
  std::unordered_map<std::string, size_t> string_keys;  // where each str key is
  int depth = 1;
  const Value* find(const Value& key) const;  // Python's dict lookup; null when absent
  void set(Value key, Value value);           // a new key goes last, an old one keeps its place

 private:
  size_t index_of(const Value& key) const;  // entries.size() when absent
};

struct Iterator : Object {
  std::string type_name;             // Python's: "generator", "list_reverseiterator", ...
  std::function<bool(Value&)> next;  // the next item, or false at the end
  int depth = 1;
};

struct Namespace : Object {
  std::vector<std::pair<std::string, Value>> attrs;
  Value* find(const std::string& name);
};

// Loops and callables: the renderer's objects, printed through these.
struct Opaque : Object {
  virtual std::string type_name() const = 0;
  // repr(), or none where Python prints an address (a function, a bound method).
  virtual std::optional<std::string> repr() const = 0;
};

inline Seq& Value::seq() const {
  return static_cast<Seq&>(*obj_);
}
inline const std::vector<Value>& Value::items() const {
  return seq().items;
}
inline const Dict& Value::dict() const {
  return static_cast<const Dict&>(*obj_);
}
inline Iterator& Value::iter() const {
  return static_cast<Iterator&>(*obj_);
}
inline Namespace& Value::ns() const {
  return static_cast<Namespace&>(*obj_);
}

// Elements the functions below have visited (compared, ordered, printed, written as JSON) on this
// thread: the renderer adds them to its step budget (Renderer::step), so that comparing or
// printing a large value in a loop is bounded like any other work. One thread renders one
// template at a time.
int64_t& value_work();

// Nesting depth: 1 + the deepest item's for containers and iterators, 0 for the rest.
int depth_of(const Value& v);

// Python's type(v).__name__, for messages.
std::string type_name(const Value& v);
// "'dict object'" as Jinja2's undefined messages name an object.
std::string object_name(const Value& v);

bool truthy(const Value& v);
// Python's ==. Fails where Python would raise (an undefined's payload never does).
bool equal(const Value& a, const Value& b);
// Python's ordering of numbers, strings, and lists or tuples of those: -1, 0, 1, or 2 when
// unordered (a NaN); TypeError naming `op` for other kinds. less() is order(a, b, "<") == -1.
int order(const Value& a, const Value& b, const char* op);
bool less(const Value& a, const Value& b);
// Two numbers (bool, int, float) compared exactly: -1, 0, 1, or 2 when unordered (a NaN).
int compare_numbers(const Value& a, const Value& b);

// str(v) and repr(v) appended to out; fail past max_bytes, or where Python prints an address.
void append_str(std::string& out, const Value& v, size_t max_bytes);
void append_repr(std::string& out, const Value& v, size_t max_bytes);
std::string to_str(const Value& v, size_t max_bytes);

// The Python value of JSON (json.loads): objects keep their key order.
Value from_json(const Json& j);

// json.dumps(v, ensure_ascii, indent, separators, sort_keys): `indent` none: one line; a
// string: each level indented by it (an int n is n spaces).
struct JsonStyle {
  bool ensure_ascii = false;
  std::optional<std::string> indent;
  std::optional<std::pair<std::string, std::string>> separators;
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonStyle& style, size_t max_bytes);

}  // namespace gpt::jinja
