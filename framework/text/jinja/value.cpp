// Values: construction, truthiness, == and ordering as Python's (see value.h; printing is in
// value_print.cpp). Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include "framework/text/jinja/value.h"

#include <algorithm>
#include <cmath>

#include "framework/text/jinja/failure.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"
#include "framework/text/unicode_text.h"

namespace gpt::jinja {
namespace {

// int == float exactly, as Python compares them (not through a rounded conversion).
int compare_int_float(int64_t i, double f) {
  if (std::isnan(f)) return 2;  // unordered
  if (f >= 0x1p63) return -1;
  if (f < -0x1p63) return 1;
  const double t = std::trunc(f);
  const auto ti = static_cast<int64_t>(t);
  if (i != ti) return i < ti ? -1 : 1;
  return t == f ? 0 : (f > t ? -1 : 1);
}

}  // namespace

int compare_numbers(const Value& a, const Value& b) {
  const bool af = a.is(Kind::kFloat), bf = b.is(Kind::kFloat);
  if (!af && !bf) return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  if (af && bf) {
    const double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : x > y ? 1 : x == y ? 0 : 2;
  }
  if (bf) return compare_int_float(a.as_int(), b.as_float());
  const int c = compare_int_float(b.as_int(), a.as_float());
  return c == 2 ? 2 : -c;
}

namespace {

bool same_items(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!equal(a[i], b[i])) return false;
  return true;
}

bool same_members(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (const Value& x : a)
    if (std::none_of(b.begin(), b.end(), [&](const Value& y) { return equal(x, y); })) return false;
  return true;
}

}  // namespace

int64_t& value_work() {
  thread_local int64_t work = 0;
  return work;
}

size_t Dict::index_of(const Value& key) const {
  if (key.is_string()) {
    const auto it = string_keys.find(key.str());
    return it == string_keys.end() ? entries.size() : it->second;
  }
  for (size_t i = 0; i < entries.size(); ++i)
    if (!entries[i].first.is_string() && equal(entries[i].first, key)) return i;
  return entries.size();
}

const Value* Dict::find(const Value& key) const {
  const size_t i = index_of(key);
  return i < entries.size() ? &entries[i].second : nullptr;
}

void Dict::set(Value key, Value value) {
  depth = std::max({depth, depth_of(key) + 1, depth_of(value) + 1});
  if (depth > kMaxValueDepth) fail("a value nested deeper than " + std::to_string(kMaxValueDepth));
  if (const size_t i = index_of(key); i < entries.size()) {
    entries[i].second = std::move(value);
    return;
  }
  if (entries.size() >= kMaxListItems)
    fail("a dict of more than " + std::to_string(kMaxListItems) + " items");
  if (key.is_string()) string_keys.emplace(key.str(), entries.size());
  entries.emplace_back(std::move(key), std::move(value));
}

Value* Namespace::find(const std::string& name) {
  for (auto& [n, v] : attrs)
    if (n == name) return &v;
  return nullptr;
}

Value Value::undefined(std::string why, bool unsafe) {
  Value v;
  auto t = std::make_shared<Text>();
  t->s = std::move(why);
  v.obj_ = std::move(t);
  v.flag_ = unsafe;
  return v;
}

const std::string& Value::why() const {
  static const std::string none = "a value is undefined";
  return obj_ ? static_cast<const Text&>(*obj_).s : none;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.i_ = b ? 1 : 0;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::real(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s, bool markup) {
  if (s.size() > kMaxStringBytes)
    fail("a string of more than " + std::to_string(kMaxStringBytes) + " bytes");
  Value v;
  v.kind_ = Kind::kString;
  auto t = std::make_shared<Text>();
  t->s = std::move(s);
  v.obj_ = std::move(t);
  v.flag_ = markup;
  return v;
}

Value Value::sequence(Kind kind, std::vector<Value> items) {
  if (items.size() > kMaxListItems)
    fail("a list of more than " + std::to_string(kMaxListItems) + " items");
  auto s = std::make_shared<Seq>();
  for (const Value& item : items) s->depth = std::max(s->depth, depth_of(item) + 1);
  if (s->depth > kMaxValueDepth)
    fail("a value nested deeper than " + std::to_string(kMaxValueDepth));
  s->items = std::move(items);
  return object(kind, std::move(s));
}

Value Value::range(int64_t start, int64_t stop, int64_t step) {
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    items.push_back(integer(i));
    if (items.size() > static_cast<size_t>(kMaxRangeItems))
      fail("range() of more than " + std::to_string(kMaxRangeItems) + " items");
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  Value v = sequence(Kind::kRange, std::move(items));
  Seq& s = v.seq();
  s.start = start;
  s.stop = stop;
  s.step = step;
  return v;
}

Value Value::dict(std::shared_ptr<Dict> d) {
  return object(Kind::kDict, std::move(d));
}

Value Value::iterator(std::shared_ptr<Iterator> it) {
  if (it->depth > kMaxValueDepth) fail("filters over filters nested too deep");
  return object(Kind::kIterator, std::move(it));
}

Value Value::object(Kind kind, std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = kind;
  v.obj_ = std::move(o);
  return v;
}

Value Value::namespace_ref(Namespace* ns) {
  // Aliasing a null owner: a pointer that does not own (the rendering owns namespaces).
  return object(Kind::kNamespace, std::shared_ptr<Object>(std::shared_ptr<Object>(), ns));
}

int depth_of(const Value& v) {
  if (v.is_sequence()) return v.seq().depth;
  if (v.is(Kind::kDict)) return v.dict().depth;
  if (v.is(Kind::kIterator)) return v.iter().depth;
  return 0;
}

std::string type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return v.markup() ? "Markup" : "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kRange:
      return "range";
    case Kind::kDictKeys:
      return "dict_keys";
    case Kind::kDictValues:
      return "dict_values";
    case Kind::kDictItems:
      return "dict_items";
    case Kind::kDict:
      return "dict";
    case Kind::kIterator:
      return v.iter().type_name;
    case Kind::kNamespace:
      return "Namespace";
    default:
      return v.as<Opaque>().type_name();
  }
}

std::string object_name(const Value& v) {
  return v.is(Kind::kNone) ? "None" : type_name(v) + " object";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return v.as_int() != 0;
    case Kind::kFloat:
      return v.as_float() != 0.0;
    case Kind::kString:
      return !v.str().empty();
    case Kind::kDict:
      return !v.dict().entries.empty();
    default:
      return v.is_sequence() ? !v.items().empty() : true;
  }
}

bool equal(const Value& a, const Value& b) {
  ++value_work();
  if (a.is_string() && b.is_string())
    value_work() += static_cast<int64_t>(std::min(a.str().size(), b.str().size()) / kBytesPerStep);
  if (a.is_number() && b.is_number()) return compare_numbers(a, b) == 0;
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return a.str() == b.str();
    case Kind::kList:
    case Kind::kTuple:
    case Kind::kRange:
      return same_items(a.items(), b.items());
    case Kind::kDictKeys:
    case Kind::kDictItems:
      return same_members(a.items(), b.items());
    case Kind::kDict: {
      const Dict &x = a.dict(), &y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

int order(const Value& a, const Value& b, const char* op) {
  ++value_work();
  if (a.is_string() && b.is_string())
    value_work() += static_cast<int64_t>(std::min(a.str().size(), b.str().size()) / kBytesPerStep);
  if (a.is_undefined() || b.is_undefined()) fail((a.is_undefined() ? a : b).why());
  if (a.is_number() && b.is_number()) return compare_numbers(a, b);
  if (a.is_string() && b.is_string()) return a.str() < b.str() ? -1 : a.str() == b.str() ? 0 : 1;
  if ((a.is(Kind::kList) && b.is(Kind::kList)) || (a.is(Kind::kTuple) && b.is(Kind::kTuple))) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal(x[i], y[i])) return order(x[i], y[i], op);
    return x.size() < y.size() ? -1 : x.size() == y.size() ? 0 : 1;
  }
  fail(std::string("'") + op + "' not supported between instances of '" + type_name(a) + "' and '" +
       type_name(b) + "'");
}

bool less(const Value& a, const Value& b) {
  return order(a, b, "<") == -1;
}

namespace {
Value from_json_at(const Json& j, int depth) {
  if (depth > kMaxValueDepth) fail("JSON nested deeper than " + std::to_string(kMaxValueDepth));
  switch (j.type()) {
    case Json::value_t::null:
      return Value::none();
    case Json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case Json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) fail("a JSON integer out of the 64-bit range");
      return Value::integer(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float:
      return Value::real(j.get<double>());
    case Json::value_t::string: {
      const auto& s = j.get_ref<const std::string&>();
      if (first_invalid_utf8(s) != std::string::npos) fail("a JSON string that is not UTF-8");
      return Value::string(s);
    }
    case Json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const Json& e : j) items.push_back(from_json_at(e, depth + 1));
      return Value::sequence(Kind::kList, std::move(items));
    }
    case Json::value_t::object: {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, e] : j.items()) {
        if (first_invalid_utf8(k) != std::string::npos) fail("a JSON key that is not UTF-8");
        d->set(Value::string(k), from_json_at(e, depth + 1));
      }
      return Value::dict(std::move(d));
    }
    default:
      fail("a JSON value of an unknown kind");
  }
}
}  // namespace

Value from_json(const Json& j) {
  return from_json_at(j, 0);
}

}  // namespace gpt::jinja
