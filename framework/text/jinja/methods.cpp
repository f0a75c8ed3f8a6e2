// Methods templates call on Python's str, dict, list and tuple (message.content.strip(),
// tools.items(), ...), with Python's arguments and results. The immutable sandbox refuses the
// methods that modify a list or dict (append, update, ...: calling one is an error, as Jinja2's
// SecurityError) but allows list.pop() and list.clear(). A method Python has and this interpreter
// does not is an error naming it.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>
#include <set>

#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

const std::set<std::string> kStrMethods = {
    "capitalize",   "center",       "count",   "endswith",   "find",       "format",  "index",
    "isalnum",      "isalpha",      "isascii", "isdecimal",  "isdigit",    "islower", "isnumeric",
    "isspace",      "isupper",      "join",    "ljust",      "lower",      "lstrip",  "partition",
    "removeprefix", "removesuffix", "replace", "rfind",      "rindex",     "rjust",   "rpartition",
    "rsplit",       "rstrip",       "split",   "splitlines", "startswith", "strip",   "title",
    "upper",        "zfill"};
const std::set<std::string> kStrUnsupported = {
    "casefold", "encode",    "expandtabs", "format_map", "isidentifier", "isprintable",
    "istitle",  "maketrans", "swapcase",   "translate",  "unescape",     "striptags"};
// Markup's methods that escape their str arguments and give Markup (markupsafe).
const std::set<std::string> kMarkupEscaping = {
    "capitalize", "title",  "lower", "upper", "replace",   "ljust",      "rjust", "lstrip",
    "rstrip",     "center", "strip", "zfill", "partition", "rpartition", "join"};
const std::set<std::string> kNumberAttributes = {
    "as_integer_ratio", "bit_count", "bit_length", "conjugate", "denominator", "from_bytes", "imag",
    "numerator",        "real",      "to_bytes",   "fromhex",   "hex",         "is_integer"};

std::optional<int64_t> optional_index(const Args& a, size_t i, const std::string& what) {
  if (i >= a.positional.size() || a.positional[i].is(Kind::kNone)) return std::nullopt;
  return as_index(a.positional[i], what);
}

}  // namespace

std::optional<Value> Renderer::method(const Value& obj, const std::string& name) {
  const std::string type = type_name(obj);
  auto refuse = [&] {
    return Value::undefined(
        "access to attribute " + py_repr(name) + " of " + py_repr(type) + " object is unsafe.",
        true);
  };
  switch (obj.kind()) {
    case Kind::kString:
      if (kStrMethods.count(name)) return bound_method(obj, name);
      if (kStrUnsupported.count(name)) unsupported("method '" + name + "' of " + type);
      return std::nullopt;
    case Kind::kDict:
      if (name == "get" || name == "items" || name == "keys" || name == "values" || name == "copy")
        return bound_method(obj, name);
      if (name == "clear" || name == "pop" || name == "popitem" || name == "setdefault" ||
          name == "update")
        return refuse();
      if (name == "fromkeys") unsupported("method 'fromkeys' of dict");
      return std::nullopt;
    case Kind::kList:
      if (name == "count" || name == "index" || name == "pop" || name == "clear" || name == "copy")
        return bound_method(obj, name);
      if (name == "append" || name == "extend" || name == "insert" || name == "remove" ||
          name == "reverse" || name == "sort")
        return refuse();
      return std::nullopt;
    case Kind::kTuple:
      if (name == "count" || name == "index") return bound_method(obj, name);
      return std::nullopt;
    case Kind::kBool:
    case Kind::kInt:
    case Kind::kFloat:
      if (kNumberAttributes.count(name)) unsupported("attribute '" + name + "' of " + type);
      return std::nullopt;
    case Kind::kRange:
      if (name == "start" || name == "stop" || name == "step" || name == "count" || name == "index")
        unsupported("attribute '" + name + "' of range");
      return std::nullopt;
    case Kind::kIterator:
      if (name == "send" || name == "throw" || name == "close" || name.starts_with("gi_"))
        unsupported("attribute '" + name + "' of a generator");
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Value Renderer::call_method(const Value& obj, const std::string& name, const Args& args) {
  const std::string what = type_name(obj) + "." + name + "()";
  scan_text(obj, args);
  const auto& p = args.positional;
  const bool keywords_allowed =
      name == "split" || name == "rsplit" || name == "splitlines" || name == "format";
  if (!keywords_allowed && !args.keywords.empty()) fail(what + " takes no keyword arguments");
  auto arity = [&](size_t least, size_t most) {
    if (p.size() < least || p.size() > most)
      fail(what + " takes " +
           (least == most ? "exactly " : "from " + std::to_string(least) + " to ") +
           std::to_string(most) + " arguments (" + std::to_string(p.size()) + " given)");
  };
  if (obj.is(Kind::kDict)) {
    const Dict& d = obj.dict();
    if (name == "get") {
      arity(1, 2);
      if (!hashable(p[0])) fail("unhashable type: '" + type_name(p[0]) + "'");
      const Value* v = d.find(p[0]);
      return v ? *v : p.size() > 1 ? p[1] : Value::none();
    }
    arity(0, 0);
    if (name == "copy") return Value::dict(std::make_shared<Dict>(d));
    std::vector<Value> items;
    for (const auto& [k, v] : d.entries)
      items.push_back(name == "keys" ? k : name == "values" ? v : list({k, v}, Kind::kTuple));
    return list(std::move(items), name == "keys"     ? Kind::kDictKeys
                                  : name == "values" ? Kind::kDictValues
                                                     : Kind::kDictItems);
  }
  if (obj.is(Kind::kList) || obj.is(Kind::kTuple)) {
    std::vector<Value>& items = obj.seq().items;
    if (name == "count") {
      arity(1, 1);
      return Value::integer(std::count_if(items.begin(), items.end(),
                                          [&](const Value& v) { return equal(v, p[0]); }));
    }
    if (name == "index") {
      arity(1, 3);
      const auto n = static_cast<int64_t>(items.size());
      auto bound = [&](std::optional<int64_t> i, int64_t fallback) {
        int64_t x = i.value_or(fallback);
        if (x < 0) x = std::max<int64_t>(x + n, 0);
        return std::min(x, n);
      };
      for (int64_t i = bound(optional_index(args, 1, what), 0),
                   e = bound(optional_index(args, 2, what), n);
           i < e; ++i)
        if (equal(items[static_cast<size_t>(i)], p[0])) return Value::integer(i);
      fail(repr(p[0]) + " is not in " + type_name(obj));
    }
    if (name == "copy") {
      arity(0, 0);
      return list(items);
    }
    if (name == "clear") {
      arity(0, 0);
      items.clear();
      return Value::none();
    }
    arity(0, 1);  // pop
    if (items.empty()) fail("pop from empty list");
    const auto n = static_cast<int64_t>(items.size());
    int64_t i = p.empty() ? n - 1 : as_index(p[0], what);
    if (i < 0) i += n;
    if (i < 0 || i >= n) fail("pop index out of range");
    Value v = items[static_cast<size_t>(i)];
    items.erase(items.begin() + i);
    return v;
  }
  // str
  const std::string& s = obj.str();
  const bool markup = obj.markup() && kMarkupEscaping.count(name);
  auto arg_text = [&](size_t i) -> std::string {
    const std::string& t = as_text(p[i], what);
    return markup && !p[i].markup() ? html_escape(t) : t;
  };
  auto result = [&](std::string r) { return text(std::move(r), markup); };
  if (name == "format") return str_format(obj, args);
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    arity(0, 0);
    return result(name == "upper"   ? py_upper(s)
                  : name == "lower" ? py_lower(s)
                  : name == "title" ? py_title(s)
                                    : py_capitalize(s));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    arity(0, 1);
    const bool chars = !p.empty() && !p[0].is(Kind::kNone);
    const std::string set = chars ? arg_text(0) : "";
    return result(py_strip(s, chars ? &set : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const Bound b(args, {"sep", "maxsplit"}, what);
    const Value sep = b.get_or(0, Value::none());
    const std::string sep_text = sep.is(Kind::kNone) ? "" : as_text(sep, what);
    std::vector<Value> parts;
    for (std::string& part :
         py_split(s, sep.is(Kind::kNone) ? nullptr : &sep_text,
                  as_index(b.get_or(1, Value::integer(-1)), what), name == "rsplit"))
      parts.push_back(text(std::move(part), obj.markup()));
    return list(std::move(parts));
  }
  if (name == "splitlines") {
    const Bound b(args, {"keepends"}, what);
    std::vector<Value> lines;
    for (std::string& line : py_splitlines(s, truthy(b.get_or(0, Value::boolean(false)))))
      lines.push_back(text(std::move(line), obj.markup()));
    return list(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    arity(1, 3);
    const std::optional<int64_t> start = optional_index(args, 1, what),
                                 end = optional_index(args, 2, what);
    const bool suffix = name == "endswith";
    if (p[0].is(Kind::kTuple)) {
      for (const Value& a : p[0].items())
        if (py_affix(s, as_text(a, what), start, end, suffix)) return Value::boolean(true);
      return Value::boolean(false);
    }
    if (!p[0].is_string())
      fail(name + " first arg must be str or a tuple of str, not " + type_name(p[0]));
    return Value::boolean(py_affix(s, p[0].str(), start, end, suffix));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    arity(1, 3);
    const std::optional<int64_t> start = optional_index(args, 1, what),
                                 end = optional_index(args, 2, what);
    const std::string& sub = as_text(p[0], what);
    if (name == "count") return Value::integer(py_count(s, sub, start, end));
    const int64_t at = py_find(s, sub, start, end, name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) fail("substring not found");
    return Value::integer(at);
  }
  if (name == "replace") {
    arity(2, 3);
    return result(py_replace(s, arg_text(0), arg_text(1), p.size() > 2 ? as_index(p[2], what) : -1,
                             kMaxStringBytes));
  }
  if (name == "join") {
    arity(1, 1);
    std::string out;
    size_t i = 0;
    for (const Value& item : to_list(p[0])) {
      if (!item.is_string())
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(item) +
             " found");
      if (i++ > 0) out += s;
      out += markup && !item.markup() ? html_escape(item.str()) : item.str();
      if (out.size() > kMaxStringBytes) fail("str.join: the result is too long");
    }
    return result(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    arity(1, 1);
    const std::string& affix = as_text(p[0], what);
    if (name == "removeprefix")
      return text(s.starts_with(affix) ? s.substr(affix.size()) : s, obj.markup());
    return text(s.ends_with(affix) ? s.substr(0, s.size() - affix.size()) : s, obj.markup());
  }
  if (name == "partition" || name == "rpartition") {
    arity(1, 1);
    const std::string sep = arg_text(0);
    if (sep.empty()) fail("empty separator");
    const size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return list(name == "partition" ? std::vector<Value>{result(s), result(""), result("")}
                                      : std::vector<Value>{result(""), result(""), result(s)},
                  Kind::kTuple);
    return list({result(s.substr(0, at)), result(sep), result(s.substr(at + sep.size()))},
                Kind::kTuple);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    arity(1, name == "zfill" ? 1 : 2);
    const int64_t width = as_index(p[0], what);
    if (name == "zfill") {
      const bool sign = !s.empty() && (s[0] == '+' || s[0] == '-');
      std::string body = py_pad(s.substr(sign ? 1 : 0), width - (sign ? 1 : 0), U'0', '>');
      return result(sign ? s.substr(0, 1) + body : body);
    }
    char32_t fill = U' ';
    if (p.size() > 1) {
      const std::u32string f = to_code_points(arg_text(1));
      if (f.size() != 1) fail("The fill character must be exactly one character long");
      fill = f[0];
    }
    return result(py_pad(s, width, fill, name == "center" ? '^' : name == "ljust" ? '<' : '>'));
  }
  arity(0, 0);  // the is...() predicates
  static const std::pair<const char*, StrClass> kClasses[] = {
      {"isalnum", StrClass::kAlnum},     {"isalpha", StrClass::kAlpha},
      {"isascii", StrClass::kAscii},     {"isdecimal", StrClass::kDecimal},
      {"isdigit", StrClass::kDigit},     {"islower", StrClass::kLower},
      {"isnumeric", StrClass::kNumeric}, {"isspace", StrClass::kSpace},
      {"isupper", StrClass::kUpper}};
  for (const auto& [n, c] : kClasses)
    if (name == n) return Value::boolean(py_str_is(s, c));
  unsupported("method '" + name + "' of str");
}

}  // namespace gpt::jinja
