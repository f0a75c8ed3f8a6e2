// The tests of Jinja2 (`x is defined`, `x is string`, `x is divisibleby 3`, ...), each as
// jinja2/tests.py defines it on Python's types: a bool is a number but not an integer, a dict is
// a sequence (it has len() and []), an undefined value is iterable and a sequence.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include "framework/json.h"
#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

bool callable(const Value& v) {
  // Undefined and the loop variable define __call__ in Python (both raise when called).
  return v.is(Kind::kCallable) || v.is_undefined() || v.is(Kind::kLoop);
}

// `a is sameas b`: Python's identity, where it is defined by value (None, True, False, the small
// ints CPython caches) or by object.
bool same_object(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return a.as_bool() == b.as_bool();
    case Kind::kInt:
      if (a.as_int() >= -5 && a.as_int() <= 256) return a.as_int() == b.as_int();
      unsupported("test 'sameas' on an int outside -5..256 (Python's answer depends on caching)");
    case Kind::kFloat:
    case Kind::kString:
    case Kind::kUndefined:
      unsupported("test 'sameas' on a " + type_name(a) + " (Python's answer depends on caching)");
    default:
      return a.identity() == b.identity();
  }
}

}  // namespace

bool Renderer::test(const std::string& name, const Value& v, const Args& args) {
  const std::string what = "test '" + name + "'";
  scan_text(v, args);
  auto one = [&](const char* param) {
    const Bound b(args, {param}, what);
    if (!b.get(0)) fail(what + " missing 1 required positional argument: '" + param + "'");
    return *b.get(0);
  };
  auto none = [&] { Bound(args, {}, what); };
  auto mod_is = [&](const Value& divisor, int64_t remainder) {
    return equal(binary(BinaryOp::kMod, v, divisor), Value::integer(remainder));
  };
  if (name == "defined") return none(), !v.is_undefined();
  if (name == "undefined") return none(), v.is_undefined();
  if (name == "none") return none(), v.is(Kind::kNone);
  if (name == "boolean") return none(), v.is(Kind::kBool);
  if (name == "true") return none(), v.is(Kind::kBool) && v.as_bool();
  if (name == "false") return none(), v.is(Kind::kBool) && !v.as_bool();
  if (name == "integer") return none(), v.is(Kind::kInt);
  if (name == "float") return none(), v.is(Kind::kFloat);
  if (name == "number") return none(), v.is_number();
  if (name == "string") return none(), v.is_string();
  if (name == "mapping") return none(), v.is(Kind::kDict);
  if (name == "escaped") return none(), v.is_string() && v.markup();
  if (name == "callable") return none(), callable(v);
  if (name == "sequence")  // len() and __getitem__
    return none(), v.is_string() || v.is(Kind::kList) || v.is(Kind::kTuple) || v.is(Kind::kRange) ||
                       v.is(Kind::kDict) || v.is_undefined();
  if (name == "iterable")
    return none(), v.is_string() || v.is_sequence() || v.is(Kind::kDict) || v.is(Kind::kIterator) ||
                       v.is_undefined() || v.is(Kind::kLoop);
  if (name == "lower" || name == "upper")
    return none(), py_str_is(str(v), name == "lower" ? StrClass::kLower : StrClass::kUpper);
  if (name == "odd") return none(), mod_is(Value::integer(2), 1);
  if (name == "even") return none(), mod_is(Value::integer(2), 0);
  if (name == "divisibleby") return mod_is(one("num"), 0);
  if (name == "in") return contains(one("seq"), v);
  if (name == "sameas") return same_object(v, one("other"));
  if (name == "filter" || name == "test") {
    none();
    if (!hashable(v)) fail("unhashable type: '" + type_name(v) + "'");
    return v.is_string() && (name == "filter" ? is_jinja_filter(v.str()) : is_jinja_test(v.str()));
  }
  static const std::pair<const char*, CompareOp> kComparisons[] = {
      {"==", CompareOp::kEq},       {"eq", CompareOp::kEq},          {"equalto", CompareOp::kEq},
      {"!=", CompareOp::kNe},       {"ne", CompareOp::kNe},          {">", CompareOp::kGt},
      {"gt", CompareOp::kGt},       {"greaterthan", CompareOp::kGt}, {">=", CompareOp::kGe},
      {"ge", CompareOp::kGe},       {"<", CompareOp::kLt},           {"lt", CompareOp::kLt},
      {"lessthan", CompareOp::kLt}, {"<=", CompareOp::kLe},          {"le", CompareOp::kLe}};
  for (const auto& [n, op] : kComparisons)
    if (name == n) return compare(op, v, one("b"));
  fail("no test named " + quoted_excerpt(name));
}

}  // namespace gpt::jinja
