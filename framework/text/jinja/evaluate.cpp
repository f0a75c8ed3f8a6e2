// Expressions of the chat-template interpreter: names, literals, attributes and items (Jinja2's
// sandboxed getattr and getitem), slices, calls, filters, tests, and the logic operators (see
// interpreter.h).
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <cmath>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/iteration.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

struct SliceIndices {
  int64_t start, stop, step, count;
};

// CPython's PySlice_Unpack and PySlice_AdjustIndices over a sequence of n.
SliceIndices adjust(int64_t n, const std::optional<int64_t>& start,
                    const std::optional<int64_t>& stop, int64_t step) {
  auto clamp = [&](std::optional<int64_t> v, bool is_start) {
    if (!v) return step < 0 ? (is_start ? n - 1 : -1) : (is_start ? 0 : n);
    int64_t x = *v;
    if (x < 0) {
      x = x < -n ? -1 : x + n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  SliceIndices s{clamp(start, true), clamp(stop, false), step, 0};
  if (step < 0 && s.stop < s.start) s.count = (s.start - s.stop - 1) / (-step) + 1;
  if (step > 0 && s.start < s.stop) s.count = (s.stop - s.start - 1) / step + 1;
  return s;
}

}  // namespace

int64_t as_index(const Value& v, const std::string& what) {
  if (v.is(Kind::kInt) || v.is(Kind::kBool)) return v.as_int();
  if (v.is_undefined()) fail(v.why());
  fail(what + ": '" + type_name(v) + "' object cannot be interpreted as an integer");
}

const std::string& as_text(const Value& v, const std::string& what) {
  if (v.is_string()) return v.str();
  if (v.is_undefined()) fail(v.why());
  fail(what + " must be str, not " + type_name(v));
}

bool hashable(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
    case Kind::kDict:
    case Kind::kDictKeys:
    case Kind::kDictItems:
      return false;
    case Kind::kTuple:
      for (const Value& item : v.items())
        if (!hashable(item)) return false;
      return true;
    default:
      return true;
  }
}

Value bound_method(const Value& receiver, const std::string& name) {
  auto b = std::make_shared<Builtin>();
  b->name = name;
  b->receiver = receiver;
  return Value::object(Kind::kCallable, std::move(b));
}

Value Renderer::eval(const Expr& e, Scope& scope) {
  Level level(*this, e.line);
  step();
  return eval_node(e, scope);
}

Value Renderer::lookup(const std::string& name, Scope& scope) {
  for (Scope* s = &scope; s; s = s->parent.get())
    if (Value* v = s->find(name)) return *v;
  if (std::optional<Value> g = global(name)) return *g;
  return Value::undefined(py_repr(name) + " is undefined");
}

Value Renderer::eval_node(const Expr& e, Scope& scope) {
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName:
      return lookup(e.name, scope);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const ExprPtr& a : e.args) items.push_back(eval(*a, scope));
      return list(std::move(items), e.kind == ExprKind::kList ? Kind::kList : Kind::kTuple);
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value key = eval(*e.args[i], scope);
        Value value = eval(*e.args[i + 1], scope);
        if (!hashable(key)) fail("unhashable type: '" + type_name(key) + "'");
        d->set(std::move(key), std::move(value));
      }
      charge(d->entries.size() * 2 * sizeof(Value));
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetattr:
      return getattr(eval(*e.args[0], scope), e.name);
    case ExprKind::kGetitem: {
      const Value obj = eval(*e.args[0], scope);
      if (e.args[1]->kind == ExprKind::kSlice) return eval_slice(obj, *e.args[1], scope);
      return getitem(obj, eval(*e.args[1], scope));
    }
    case ExprKind::kSlice:
      unsupported("slice inside a tuple subscript");
    case ExprKind::kCall:
      return eval_call(e, scope);
    case ExprKind::kFilter: {
      const Value operand = e.args[0] ? eval(*e.args[0], scope) : block_value_;
      return filter(e.name, operand, eval_args(e, 1, scope));
    }
    case ExprKind::kTest: {
      const Value operand = eval(*e.args[0], scope);
      return Value::boolean(test(e.name, operand, eval_args(e, 1, scope)));
    }
    case ExprKind::kNeg:
    case ExprKind::kPos:
      return negate(eval(*e.args[0], scope), e.kind == ExprKind::kNeg);
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*e.args[0], scope)));
    case ExprKind::kAnd:
    case ExprKind::kOr: {  // Python's: the deciding operand itself, not a bool
      Value left = eval(*e.args[0], scope);
      if (truthy(left) == (e.kind == ExprKind::kOr)) return left;
      return eval(*e.args[1], scope);
    }
    case ExprKind::kBinary: {
      const Value left = eval(*e.args[0], scope);
      const Value right = eval(*e.args[1], scope);
      const bool negative = left.is(Kind::kFloat)
                                ? std::signbit(left.as_float()) && !std::isnan(left.as_float())
                                : left.is_number() && left.as_int() < 0;
      if (e.negative_base_quirk && negative)  // -(|left| ** right), as Jinja2's code computes it
        return negate(binary(e.op, negate(left, true), right), true);
      return binary(e.op, left, right);
    }
    case ExprKind::kConcat: {
      std::string s;
      for (const ExprPtr& a : e.args) {
        const std::string part = str(eval(*a, scope));
        if (s.size() + part.size() > kMaxStringBytes) fail("a string made by ~ is too long");
        s += part;
      }
      return text(std::move(s));
    }
    case ExprKind::kCompare: {
      Value left = eval(*e.args[0], scope);
      for (size_t i = 0; i < e.compare_ops.size(); ++i) {
        Value right = eval(*e.args[i + 1], scope);
        if (!compare(e.compare_ops[i], left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case ExprKind::kCondExpr:
      if (truthy(eval(*e.args[1], scope))) return eval(*e.args[0], scope);
      if (e.args[2]) return eval(*e.args[2], scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
  }
  return Value();
}

Args Renderer::eval_args(const Expr& e, size_t first, Scope& scope) {
  Args args;
  for (size_t i = first; i < e.args.size(); ++i) args.positional.push_back(eval(*e.args[i], scope));
  if (e.star) {
    const Value star = eval(*e.star, scope);
    for (Value& v : to_list(star)) args.positional.push_back(std::move(v));
  }
  for (const Keyword& k : e.kwargs) args.keywords.emplace_back(k.name, eval(*k.value, scope));
  if (e.star_star) {
    const Value d = eval(*e.star_star, scope);
    if (!d.is(Kind::kDict)) fail("argument after ** must be a mapping, not " + type_name(d));
    for (const auto& [k, v] : d.dict().entries) {
      const std::string& key = as_text(k, "a keyword argument's name");
      for (const auto& [name, _] : args.keywords)
        if (name == key) fail("got multiple values for keyword argument " + quoted_excerpt(key));
      args.keywords.emplace_back(key, v);
    }
  }
  return args;
}

Value Renderer::eval_call(const Expr& e, Scope& scope, std::optional<Value> caller) {
  const Value callee = eval(*e.args[0], scope);
  Args args = eval_args(e, 1, scope);
  if (caller) args.keywords.emplace_back("caller", std::move(*caller));
  return call(callee, std::move(args));
}

Value Renderer::call(const Value& callee, Args args) {
  if (callee.is_undefined()) fail(callee.why());
  if (!callee.is(Kind::kCallable))
    fail(GPT_MSG("'" << type_name(callee) << "' object is not callable"));
  if (is_macro(callee)) return call_macro_value(callee, std::move(args));
  const Builtin& b = callee.as<Builtin>();
  if (!b.receiver) return call_global(b.name, args);
  if (b.receiver->is(Kind::kLoop)) return b.receiver->as<LoopState>().call(b.name, args);
  return call_method(*b.receiver, b.name, args);
}

Value Renderer::attribute(const Value& obj, const std::string& name, bool& found) {
  found = true;
  if (name.size() > 4 && name.starts_with("__") && name.ends_with("__"))
    return Value::undefined("access to attribute " + py_repr(name) + " of " +
                                py_repr(type_name(obj)) + " object is unsafe.",
                            true);
  if (obj.is(Kind::kNamespace)) {
    if (Value* v = obj.ns().find(name)) return *v;
  } else if (obj.is(Kind::kLoop)) {
    if (std::optional<Value> v = obj.as<LoopState>().attribute(name, obj)) return *v;
  } else if (is_macro(obj)) {
    if (name == "name" || name == "arguments" || name == "catch_kwargs" ||
        name == "catch_varargs" || name == "caller")
      unsupported("attribute '" + name + "' of a macro");
  } else if (std::optional<Value> m = method(obj, name)) {
    return *m;
  }
  found = false;
  return Value();
}

Value Renderer::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail(obj.why());
  bool found;
  Value a = attribute(obj, name, found);
  if (found) return a;
  if (obj.is(Kind::kDict))
    if (const Value* v = obj.dict().find(Value::string(name))) return *v;
  return Value::undefined(py_repr(object_name(obj)) + " has no attribute " + py_repr(name));
}

Value Renderer::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail(obj.why());
  if (obj.is_string()) scan(obj.str().size());  // indexing counts code points
  if (key.is_string()) scan(key.str().size());
  const bool int_key = key.is(Kind::kInt) || key.is(Kind::kBool);
  if (obj.is(Kind::kDict) && hashable(key)) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if (int_key && (obj.is(Kind::kList) || obj.is(Kind::kTuple) || obj.is(Kind::kRange))) {
    const auto n = static_cast<int64_t>(obj.items().size());
    const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    if (i >= 0 && i < n) return obj.items()[static_cast<size_t>(i)];
  } else if (int_key && obj.is_string()) {
    const auto n = static_cast<int64_t>(code_point_count(obj.str()));
    const int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    if (i >= 0 && i < n) {
      const size_t b = byte_offset(obj.str(), static_cast<size_t>(i));
      return text(obj.str().substr(b, byte_offset(obj.str(), static_cast<size_t>(i) + 1) - b),
                  obj.markup());
    }
  }
  if (key.is_string()) {
    bool found;
    Value a = attribute(obj, key.str(), found);
    if (found) return a;
    return Value::undefined(py_repr(object_name(obj)) + " has no attribute " + py_repr(key.str()));
  }
  return Value::undefined(object_name(obj) + " has no element " + repr(key));
}

Value Renderer::eval_slice(const Value& obj, const Expr& s, Scope& scope) {
  std::optional<int64_t> bounds[3];
  bool ints = true;
  for (int i = 0; i < 3; ++i) {
    if (!s.args[i]) continue;
    const Value v = eval(*s.args[i], scope);
    if (v.is(Kind::kInt) || v.is(Kind::kBool))
      bounds[i] = v.as_int();
    else if (!v.is(Kind::kNone))
      ints = false;
  }
  if (obj.is_undefined()) fail(obj.why());
  const bool sliceable =
      obj.is_string() || obj.is(Kind::kList) || obj.is(Kind::kTuple) || obj.is(Kind::kRange);
  if (!sliceable || !ints) return Value::undefined(object_name(obj) + " has no element slice");
  const int64_t step = bounds[2].value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  if (obj.is_string()) {
    scan(obj.str().size());
    const std::u32string cs = to_code_points(obj.str());
    const SliceIndices ix = adjust(static_cast<int64_t>(cs.size()), bounds[0], bounds[1], step);
    std::u32string out;
    for (int64_t k = 0, i = ix.start; k < ix.count; ++k, i += step)
      out += cs[static_cast<size_t>(i)];
    return text(to_utf8(out), obj.markup());
  }
  const auto& items = obj.items();
  const SliceIndices ix = adjust(static_cast<int64_t>(items.size()), bounds[0], bounds[1], step);
  if (obj.is(Kind::kRange)) {
    const Seq& r = obj.seq();
    return Value::range(r.start + ix.start * r.step, r.start + ix.stop * r.step, r.step * step);
  }
  std::vector<Value> out;
  for (int64_t k = 0, i = ix.start; k < ix.count; ++k, i += step)
    out.push_back(items[static_cast<size_t>(i)]);
  return list(std::move(out), obj.kind());
}

Value Renderer::attribute_path(const Value& item, const Value& path, const Value* fallback) {
  if (path.is(Kind::kNone)) return item;
  if (path.is_string()) scan(path.str().size());
  Value v = item;
  auto substitute = [&] {
    if (fallback && v.is_undefined()) v = *fallback;
  };
  if (!path.is_string()) {
    v = getitem(v, path);
    substitute();
    return v;
  }
  std::string rest = path.str();
  while (true) {
    const size_t dot = rest.find('.');
    const std::string part = rest.substr(0, dot);
    if (py_str_is(part, StrClass::kDigit)) {  // Python's str.isdigit, then int()
      const std::optional<int64_t> i = py_parse_int(part, 10);
      if (!i) fail("invalid literal for int() with base 10: " + py_repr(part));
      v = getitem(v, Value::integer(*i));
    } else {
      v = getitem(v, text(part));
    }
    substitute();
    if (dot == std::string::npos) return v;
    rest = rest.substr(dot + 1);
  }
}

}  // namespace gpt::jinja
