// The filters of Jinja2 that work on one value (trim, lower, int, round, default, indent, tojson,
// ...), each as jinja2/filters.py defines it with autoescape off, plus transformers' tojson; the
// sequence filters are in filters_sequence.cpp. A filter Jinja2 has and this interpreter does not
// is an error naming it when it is evaluated.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <cmath>
#include <set>

#include "framework/json.h"
#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

const std::set<std::string> kUnsupportedFilters = {"filesizeformat", "groupby",   "pprint",
                                                   "random",         "striptags", "urlencode",
                                                   "urlize",         "wordwrap",  "xmlattr"};

bool is_int(const Value& v) {
  return v.is(Kind::kInt) || v.is(Kind::kBool);
}

// Python's len().
int64_t length_of(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(code_point_count(v.str()));
  if (v.is_sequence()) return static_cast<int64_t>(v.items().size());
  if (v.is(Kind::kDict)) return static_cast<int64_t>(v.dict().entries.size());
  if (v.is(Kind::kUndefined)) return 0;
  fail("object of type '" + type_name(v) + "' has no len()");
}

// Python's round(x, ndigits) of a float: the decimal text correctly rounded half-to-even (what
// printf's %.*f gives), read back.
double round_float(double x, int64_t digits) {
  if (!std::isfinite(x) || digits > 330) return x;
  if (digits < 0) unsupported("round() to a negative precision");
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(digits), x);
  return std::strtod(buf, nullptr);
}

// int(x) of a float: truncation; Python raises for NaN (ValueError) and infinity (OverflowError).
std::optional<int64_t> float_to_int(double f) {
  if (std::isnan(f)) return std::nullopt;
  if (std::isinf(f)) fail("cannot convert float infinity to integer");
  if (f >= 0x1p63 || f < -0x1p63) fail("integer out of the 64-bit range");
  return static_cast<int64_t>(f);
}

}  // namespace

Value Renderer::filter(const std::string& name, const Value& v, const Args& args) {
  const std::string what = "filter '" + name + "'";
  auto bind = [&](std::vector<const char*> names) { return Bound(args, std::move(names), what); };
  scan_text(v, args);
  if (std::optional<Value> r = sequence_filter(name, v, args)) return *r;
  if (name == "trim") {
    const Bound b = bind({"chars"});
    const Value chars = b.get_or(0, Value::none());
    const std::string s = str(v);
    if (chars.is(Kind::kNone)) return text(py_strip(s, nullptr, true, true), v.markup());
    return text(py_strip(s, &as_text(chars, "strip arg"), true, true), v.markup());
  }
  if (name == "lower" || name == "upper" || name == "capitalize") {
    bind({});
    const std::string s = str(v);
    return text(name == "lower"   ? py_lower(s)
                : name == "upper" ? py_upper(s)
                                  : py_capitalize(s),
                v.markup());
  }
  if (name == "title") {  // each run between [-\s({\[<] : its first character upper, the rest lower
    bind({});
    const std::u32string cs = to_code_points(str(v));
    auto separator = [](char32_t c) {
      return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || py_isspace(c);
    };
    std::string out;
    for (size_t i = 0; i < cs.size();) {
      size_t j = i;
      while (j < cs.size() && separator(cs[j]) == separator(cs[i])) ++j;
      const std::u32string_view run = std::u32string_view(cs).substr(i, j - i);
      if (separator(cs[i]))
        out += to_utf8(run);
      else
        out += py_upper(to_utf8(run.substr(0, 1))) + py_lower(to_utf8(run.substr(1)));
      i = j;
    }
    return text(std::move(out));
  }
  if (name == "replace") {
    const Bound b = bind({"old", "new", "count"});
    if (!b.get(0) || !b.get(1)) fail(what + " takes the arguments old and new");
    const Value count = b.get_or(2, Value::none());
    return text(py_replace(str(v), str(*b.get(0)), str(*b.get(1)),
                           count.is(Kind::kNone) ? -1 : as_index(count, what), kMaxStringBytes));
  }
  if (name == "string") {
    bind({});
    return v.is_string() ? v : text(str(v));
  }
  if (name == "length" || name == "count") {
    bind({});
    return Value::integer(length_of(v));
  }
  if (name == "default" || name == "d") {
    const Bound b = bind({"default_value", "boolean"});
    const bool use_default =
        v.is_undefined() || (truthy(b.get_or(1, Value::boolean(false))) && !truthy(v));
    return use_default ? b.get_or(0, text("")) : v;
  }
  if (name == "int") {
    const Bound b = bind({"default", "base"});
    const Value fallback = b.get_or(0, Value::integer(0));
    if (v.is_undefined()) fail(v.why());
    if (is_int(v)) return Value::integer(v.as_int());
    std::optional<int64_t> i;
    if (v.is_string()) {
      i = py_parse_int(v.str(), static_cast<int>(as_index(b.get_or(1, Value::integer(10)), what)));
      if (!i)
        if (std::optional<double> f = py_parse_float(v.str())) i = float_to_int(*f);
    } else if (v.is(Kind::kFloat)) {
      i = float_to_int(v.as_float());
    }
    return i ? Value::integer(*i) : fallback;
  }
  if (name == "float") {
    const Bound b = bind({"default"});
    if (v.is_undefined()) fail(v.why());
    if (v.is_number()) return Value::real(v.as_float());
    if (v.is_string())
      if (std::optional<double> f = py_parse_float(v.str())) return Value::real(*f);
    return b.get_or(0, Value::real(0.0));
  }
  if (name == "abs") {
    bind({});
    if (is_int(v)) return negate(v, v.as_int() < 0);
    if (v.is(Kind::kFloat)) return Value::real(std::fabs(v.as_float()));
    fail("bad operand type for abs(): '" + type_name(v) + "'");
  }
  if (name == "round") {
    const Bound b = bind({"precision", "method"});
    const int64_t precision = as_index(b.get_or(0, Value::integer(0)), what);
    const Value method = b.get_or(1, text("common"));
    if (!method.is_string() ||
        (method.str() != "common" && method.str() != "ceil" && method.str() != "floor"))
      fail("method must be common, ceil or floor");
    if (v.is_undefined()) fail(v.why());
    if (!v.is_number()) fail("type " + type_name(v) + " doesn't define __round__ method");
    if (method.str() == "common") {
      if (is_int(v) && precision >= 0) return Value::integer(v.as_int());
      if (is_int(v)) unsupported("round() of an int to a negative precision");
      return Value::real(round_float(v.as_float(), precision));
    }
    // math.floor or math.ceil of value * 10**precision, divided back: a float.
    const Value scale = binary(BinaryOp::kPow, Value::integer(10), Value::integer(precision));
    const Value scaled = binary(BinaryOp::kMul, v, scale);
    const double r =
        method.str() == "floor" ? std::floor(scaled.as_float()) : std::ceil(scaled.as_float());
    if (!std::isfinite(r)) fail("cannot convert float infinity to integer");
    return binary(BinaryOp::kDiv, Value::real(r), scale);
  }
  if (name == "indent") {
    const Bound b = bind({"width", "first", "blank"});
    const Value width = b.get_or(0, Value::integer(4));
    std::string indention;
    if (width.is_string()) {
      indention = width.str();
    } else {
      const int64_t n = as_index(width, what);
      if (n > static_cast<int64_t>(kMaxStringBytes)) fail("indent too wide");
      indention.assign(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
    }
    if (!v.is_string())
      fail(v.is_undefined()
               ? v.why()
               : "unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
    const std::vector<std::string> lines = py_splitlines(v.str() + "\n", false);
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) out += "\n";
      // The first line only with first=True (even when empty); the others unless empty,
      // or always with blank=True.
      if (i == 0 ? truthy(b.get_or(1, Value::boolean(false)))
                 : !lines[i].empty() || truthy(b.get_or(2, Value::boolean(false))))
        out += indention;
      out += lines[i];
      if (out.size() > kMaxStringBytes) fail("indent: the result is too long");
    }
    return text(std::move(out), v.markup());
  }
  if (name == "center") {
    const Bound b = bind({"width"});
    return text(py_pad(str(v), as_index(b.get_or(0, Value::integer(80)), what), U' ', '^'),
                v.markup());
  }
  if (name == "wordcount") {
    bind({});
    int64_t words = 0;
    bool in_word = false;
    for (char32_t c : to_code_points(str(v))) {
      const bool w = py_is_word_char(c);
      words += w && !in_word;
      in_word = w;
    }
    return Value::integer(words);
  }
  if (name == "safe") {
    bind({});
    return text(str(v), true);
  }
  if (name == "e" || name == "escape" || name == "forceescape") {
    bind({});
    if (v.markup() && name != "forceescape") return v;
    return text(html_escape(str(v)), true);
  }
  if (name == "format") {
    if (!args.positional.empty() && !args.keywords.empty())
      fail("can't handle positional and keyword arguments at the same time");
    Value values;
    if (!args.keywords.empty()) {
      auto d = std::make_shared<Dict>();
      for (const auto& [k, x] : args.keywords) d->set(text(k), x);
      values = Value::dict(std::move(d));
    } else {
      values = list(args.positional, Kind::kTuple);
    }
    return percent_format(v.is_string() ? v : text(str(v)), values);
  }
  if (name == "tojson") {
    const Bound b = bind({"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonStyle style;
    style.ensure_ascii = truthy(b.get_or(0, Value::boolean(false)));
    style.sort_keys = truthy(b.get_or(3, Value::boolean(false)));
    const Value indent = b.get_or(1, Value::none());
    if (indent.is_string()) {
      style.indent = indent.str();
    } else if (!indent.is(Kind::kNone)) {
      const int64_t n = as_index(indent, what);
      if (n > 1024) fail("tojson: indent too wide");
      style.indent = std::string(static_cast<size_t>(std::max<int64_t>(n, 0)), ' ');
    }
    const Value separators = b.get_or(2, Value::none());
    if (!separators.is(Kind::kNone)) {
      if (!(separators.is(Kind::kList) || separators.is(Kind::kTuple)) ||
          separators.items().size() != 2)
        fail("tojson: separators must be a pair of strings");
      style.separators.emplace(as_text(separators.items()[0], "a separator"),
                               as_text(separators.items()[1], "a separator"));
    }
    std::string json = to_json(v, style, kMaxStringBytes);
    return text(std::move(json));
  }
  if (name == "attr") {
    const Bound b = bind({"name"});
    if (!b.get(0)) fail(what + " takes the attribute's name");
    if (v.is_undefined()) fail(v.why());
    const std::string& attr = as_text(*b.get(0), what);
    bool found;
    Value a = attribute(v, attr, found);
    if (found) return a;
    return Value::undefined(py_repr(object_name(v)) + " has no attribute " + py_repr(attr));
  }
  if (name == "truncate") {
    const Bound b = bind({"length", "killwords", "end", "leeway"});
    const int64_t length = as_index(b.get_or(0, Value::integer(255)), what);
    const std::string end = str(b.get_or(2, text("...")));
    const int64_t leeway = as_index(b.get_or(3, Value::integer(5)), what);
    const auto end_length = static_cast<int64_t>(code_point_count(end));
    if (length < end_length)
      fail("expected length >= " + std::to_string(end_length) + ", got " + std::to_string(length));
    if (leeway < 0) fail("expected leeway >= 0, got " + std::to_string(leeway));
    if (!v.is_string())
      fail(v.is_undefined() ? v.why() : "object of type '" + type_name(v) + "' has no len()");
    const std::u32string cs = to_code_points(v.str());
    if (static_cast<int64_t>(cs.size()) <= length + leeway) return v;
    std::string head =
        to_utf8(std::u32string_view(cs).substr(0, static_cast<size_t>(length - end_length)));
    if (!truthy(b.get_or(1, Value::boolean(false)))) {
      const size_t space = head.rfind(' ');
      if (space != std::string::npos) head.resize(space);
    }
    return text(head + end);
  }
  if (kUnsupportedFilters.count(name)) unsupported("filter '" + name + "'");
  fail("no filter named " + quoted_excerpt(name));
}

}  // namespace gpt::jinja
