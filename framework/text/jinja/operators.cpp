// Python's operators for the chat-template interpreter: arithmetic with Python's int and float
// rules (floor division and modulo take the divisor's sign, / always gives a float, ** of ints
// stays exact), sequence concatenation and repetition, markupsafe's escaping when a Markup is
// added to a str, comparisons and `in` (see interpreter.h). Ints are 64-bit: a result past that
// range fails, where Python would grow the int.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>
#include <cmath>

#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

const char* symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    default:
      return "** or pow()";
  }
}

[[noreturn]] void unsupported_operands(BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::kAdd && (a.is_string() || a.is(Kind::kList) || a.is(Kind::kTuple)))
    fail("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " +
         type_name(a));
  fail(std::string("unsupported operand type(s) for ") + symbol(op) + ": '" + type_name(a) +
       "' and '" + type_name(b) + "'");
}

[[noreturn]] void overflow() {
  fail("integer result out of the 64-bit range");
}

// An int result from a __builtin_*_overflow: `overflowed` its return, r its result.
Value checked(bool overflowed, const int64_t& r) {
  if (overflowed) overflow();
  return Value::integer(r);
}

bool is_int(const Value& v) {
  return v.is(Kind::kInt) || v.is(Kind::kBool);
}

int64_t int_pow(int64_t base, int64_t exponent) {
  int64_t result = 1;
  while (exponent > 0) {
    if ((exponent & 1) && __builtin_mul_overflow(result, base, &result)) overflow();
    exponent >>= 1;
    if (exponent > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return result;
}

// CPython's float_divmod: the floor quotient and the remainder with the divisor's sign.
std::pair<double, double> float_divmod(double x, double y) {
  if (y == 0.0) fail("float division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return {floordiv, mod};
}

double float_pow(double x, double y) {
  if (x == 0.0 && y < 0.0) fail("0.0 cannot be raised to a negative power");
  if (x < 0.0 && std::isfinite(x) && std::isfinite(y) && y != std::floor(y))
    unsupported("complex numbers (a negative number to a fractional power)");
  const double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) fail("numerical result out of range");
  return r;
}

}  // namespace

Value Renderer::negate(const Value& v, bool minus) {
  if (v.is_undefined()) fail(v.why());
  if (is_int(v)) {
    if (minus && v.as_int() == INT64_MIN) overflow();
    return Value::integer(minus ? -v.as_int() : v.as_int());
  }
  if (v.is(Kind::kFloat)) return Value::real(minus ? -v.as_float() : v.as_float());
  fail(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" + type_name(v) +
       "'");
}

Value Renderer::binary(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) fail((a.is_undefined() ? a : b).why());
  const bool numbers = a.is_number() && b.is_number();
  const bool ints = is_int(a) && is_int(b);
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      if (ints) return checked(__builtin_add_overflow(a.as_int(), b.as_int(), &r), r);
      if (numbers) return Value::real(a.as_float() + b.as_float());
      if (a.is_string() && b.is_string()) {
        if (!a.markup() && !b.markup()) return text(a.str() + b.str());
        // markupsafe: the side that is not Markup is escaped, and the sum is Markup.
        return text((a.markup() ? a.str() : html_escape(a.str())) +
                        (b.markup() ? b.str() : html_escape(b.str())),
                    true);
      }
      if ((a.is(Kind::kList) && b.is(Kind::kList)) || (a.is(Kind::kTuple) && b.is(Kind::kTuple))) {
        std::vector<Value> items = a.items();
        items.insert(items.end(), b.items().begin(), b.items().end());
        return list(std::move(items), a.kind());
      }
      break;
    case BinaryOp::kSub:
      if (ints) return checked(__builtin_sub_overflow(a.as_int(), b.as_int(), &r), r);
      if (numbers) return Value::real(a.as_float() - b.as_float());
      break;
    case BinaryOp::kMul: {
      if (ints) return checked(__builtin_mul_overflow(a.as_int(), b.as_int(), &r), r);
      if (numbers) return Value::real(a.as_float() * b.as_float());
      const Value& seq = is_int(a) ? b : a;
      const Value& count = is_int(a) ? a : b;
      if (!is_int(count) || !(seq.is_string() || seq.is(Kind::kList) || seq.is(Kind::kTuple)))
        break;
      const int64_t n = std::max<int64_t>(count.as_int(), 0);
      const size_t unit = seq.is_string() ? seq.str().size() : seq.items().size() * sizeof(Value);
      if (unit > 0 && static_cast<uint64_t>(n) > kMaxStringBytes / unit)
        fail("a repetition (*) longer than " + std::to_string(kMaxStringBytes) + " bytes");
      if (seq.is_string()) {
        std::string s;
        for (int64_t i = 0; i < n; ++i) s += seq.str();
        return text(std::move(s), seq.markup());
      }
      std::vector<Value> items;
      for (int64_t i = 0; i < n; ++i)
        items.insert(items.end(), seq.items().begin(), seq.items().end());
      return list(std::move(items), seq.kind());
    }
    case BinaryOp::kDiv:
      if (!numbers) break;
      if (b.as_float() == 0.0) fail("division by zero");
      return Value::real(a.as_float() / b.as_float());
    case BinaryOp::kFloorDiv:
    case BinaryOp::kMod:
      if (ints) {
        const int64_t x = a.as_int(), y = b.as_int();
        if (y == 0) fail("integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) {
          if (op == BinaryOp::kMod) return Value::integer(0);
          overflow();
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::integer(op == BinaryOp::kFloorDiv ? q : m);
      }
      if (numbers) {
        const auto [q, m] = float_divmod(a.as_float(), b.as_float());
        return Value::real(op == BinaryOp::kFloorDiv ? q : m);
      }
      if (op == BinaryOp::kMod && a.is_string()) return percent_format(a, b);
      break;
    case BinaryOp::kPow:
      if (ints && b.as_int() >= 0) return Value::integer(int_pow(a.as_int(), b.as_int()));
      if (numbers) return Value::real(float_pow(a.as_float(), b.as_float()));
      break;
  }
  unsupported_operands(op, a, b);
}

bool Renderer::compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return equal(a, b);
    case CompareOp::kNe:
      return !equal(a, b);
    case CompareOp::kIn:
      return contains(b, a);
    case CompareOp::kNotIn:
      return !contains(b, a);
    case CompareOp::kLt:
      return order(a, b, "<") == -1;
    case CompareOp::kLe: {
      const int c = order(a, b, "<=");
      return c == -1 || c == 0;
    }
    case CompareOp::kGt:
      return order(a, b, ">") == 1;
    case CompareOp::kGe: {
      const int c = order(a, b, ">=");
      return c == 1 || c == 0;
    }
  }
  return false;
}

bool Renderer::contains(const Value& container, const Value& item) {
  if (container.is_string()) scan(container.str().size());
  if (item.is_string()) scan(item.str().size());
  switch (container.kind()) {
    case Kind::kUndefined:
      return false;  // iterating an undefined value finds nothing
    case Kind::kString:
      if (!item.is_string())
        fail("'in <string>' requires string as left operand, not " + type_name(item));
      return container.str().find(item.str()) != std::string::npos;
    case Kind::kDict:
      if (!hashable(item)) fail("unhashable type: '" + type_name(item) + "'");
      return container.dict().find(item) != nullptr;
    case Kind::kIterator: {
      Cursor next = iterate(container);
      for (Value v; next(v);)
        if (equal(v, item)) return true;
      return false;
    }
    default:
      if (container.is_sequence()) {
        for (const Value& v : container.items())
          if (equal(v, item)) return true;
        return false;
      }
      fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

}  // namespace gpt::jinja
