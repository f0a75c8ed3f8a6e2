// Python's two string formattings for the chat-template interpreter: printf-style (`"%s" % x`,
// the format filter) and str.format ("{} {name!r:>8}"), with markupsafe's escaping when the
// format is Markup. Numbers go through C's printf, whose output Python's %-formatting and format
// specs reproduce for the conversions supported here; others (%#o, grouping, nested specs) are
// errors naming them.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "framework/check.h"
#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

struct Spec {
  char fill = ' ';
  char align = 0;  // '<', '>', '^', '=' or none
  char sign = 0;   // '+', ' ', '-' or none
  bool zero = false;
  int64_t width = -1, precision = -1;
  char type = 0;
};

std::string printf_number(const Spec& s, const Value& v) {
  std::string c = "%";
  if (s.sign == '+' || s.sign == ' ') c += s.sign;
  if (s.zero) c += '0';
  if (s.align == '<') c += '-';
  if (s.width >= 0) c += std::to_string(s.width);
  const bool integral = std::string("dioxXc").find(s.type) != std::string::npos;
  if (s.precision >= 0) {
    c += '.';
    c += std::to_string(s.precision);
  }
  char buf[1200];
  if (integral) {
    c += "ll";
    c += s.type == 'i' ? 'd' : s.type;
    std::snprintf(buf, sizeof buf, c.c_str(), static_cast<long long>(v.as_int()));
  } else {
    c += s.type;
    std::snprintf(buf, sizeof buf, c.c_str(), v.as_float());
  }
  return buf;
}

// A number's text placed in the spec's width: after its sign with '=' (or a '0' flag).
std::string align_number(const std::string& body, Spec s) {
  if (s.zero && !s.align) {
    s.fill = '0';
    s.align = '=';
  }
  const auto fill = static_cast<char32_t>(s.fill);
  if (s.align == '=' && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
    return body.substr(0, 1) + py_pad(body.substr(1), s.width - 1, fill, '>');
  return py_pad(body, s.width, fill, s.align == '=' || !s.align ? '>' : s.align);
}

void check_widths(const Spec& s) {
  if (s.width > 1000 || s.precision > 1000) unsupported("a format width or precision over 1000");
}

}  // namespace

// printf-style: "%[(key)][flags][width][.precision]conversion".
Value Renderer::percent_format(const Value& format, const Value& values) {
  const std::string& f = format.str();
  scan(f.size());
  const bool markup = format.markup();
  std::vector<Value> positional;
  const Value* mapping = nullptr;
  if (values.is(Kind::kTuple)) {
    positional = values.items();
  } else {
    positional.push_back(values);
    if (values.is(Kind::kDict)) mapping = &values;
  }
  size_t next = 0;
  std::string out;
  auto take = [&]() -> Value {
    if (next >= positional.size()) fail("not enough arguments for format string");
    return positional[next++];
  };
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) fail("incomplete format");
    std::optional<Value> value;
    if (f[i] == '(') {
      const size_t close = f.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      const Value* v = mapping->dict().find(text(f.substr(i + 1, close - i - 1)));
      if (!v) fail("KeyError: " + py_repr(f.substr(i + 1, close - i - 1)));
      value = *v;
      i = close + 1;
    }
    Spec s;
    for (; i < f.size() && std::string("-+ #0").find(f[i]) != std::string::npos; ++i) {
      if (f[i] == '-') s.align = '<';
      if (f[i] == '+' || (f[i] == ' ' && s.sign != '+')) s.sign = f[i];
      if (f[i] == '0') s.zero = true;
      if (f[i] == '#') unsupported("the '#' flag of %-formatting");
    }
    auto number = [&](int64_t& into) {
      if (i < f.size() && f[i] == '*') {
        into = as_index(take(), "* wants int");
        ++i;
        return;
      }
      if (i >= f.size() || f[i] < '0' || f[i] > '9') return;
      into = 0;
      for (; i < f.size() && f[i] >= '0' && f[i] <= '9'; ++i)
        into = std::min<int64_t>(into * 10 + (f[i] - '0'), 100000);
    };
    number(s.width);
    if (i < f.size() && f[i] == '.') {
      ++i;
      s.precision = 0;
      number(s.precision);
    }
    while (i < f.size() && (f[i] == 'h' || f[i] == 'l' || f[i] == 'L')) ++i;
    if (i >= f.size()) fail("incomplete format");
    check_widths(s);
    s.type = f[i];
    if (s.type == '%') {
      out += '%';
      continue;
    }
    const Value v = value ? *value : take();
    std::string piece;
    if (s.type == 's' || s.type == 'r' || s.type == 'a') {
      if (s.type == 'a') unsupported("the %a conversion");
      std::string t = s.type == 's' ? str(v) : repr(v);
      if (markup && !(s.type == 's' && v.markup())) t = html_escape(t);
      if (s.precision >= 0)
        t = to_utf8(to_code_points(t).substr(0, static_cast<size_t>(s.precision)));
      piece = py_pad(t, s.width, U' ', s.align == '<' ? '<' : '>');
    } else if (std::string("diouxXeEfFgGc").find(s.type) != std::string::npos) {
      if (s.type == 'c') unsupported("the %c conversion");
      if (s.type == 'u' || s.type == 'i') s.type = 'd';
      const bool integral = std::string("doxX").find(s.type) != std::string::npos;
      if (!v.is_number())
        fail(GPT_MSG("%" << s.type << " format: a real number is required, not " << type_name(v)));
      Value n = v;
      if (integral && v.is(Kind::kFloat)) {
        if (s.type != 'd')
          fail(GPT_MSG("%" << s.type << " format: an integer is required, not float"));
        if (!std::isfinite(v.as_float())) fail("cannot convert float infinity or NaN to integer");
        n = Value::integer(static_cast<int64_t>(v.as_float()));
      }
      if (s.zero && s.align == '<') s.zero = false;
      piece = printf_number(s, n);
    } else {
      fail("unsupported format character " + py_repr(std::string(1, s.type)));
    }
    out += piece;
    if (out.size() > kMaxStringBytes) fail("%-formatting: the result is too long");
  }
  if (next < positional.size() && !mapping)
    fail("not all arguments converted during string formatting");
  return text(std::move(out), markup);
}

// str.format: "{field!conversion:spec}" with "{{" and "}}" for braces; fields are positions,
// names, automatic numbers, with .attr and [key] after them.
Value Renderer::str_format(const Value& format, const Args& args) {
  const std::string& f = format.str();
  std::string out;
  int automatic = 0;  // 0: not yet, 1: automatic numbering, 2: manual
  size_t next_auto = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') {
        out += '}';
        ++i;
        continue;
      }
      fail("Single '}' encountered in format string");
    }
    if (f[i] != '{') {
      out += f[i];
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) fail("expected '}' before end of string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    if (field.find('{') != std::string::npos) unsupported("nested fields in a format spec");
    std::string spec_text, conversion;
    if (const size_t colon = field.find(':'); colon != std::string::npos) {
      spec_text = field.substr(colon + 1);
      field.resize(colon);
    }
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
      if (conversion != "s" && conversion != "r")
        fail("Unknown conversion specifier " + conversion);
    }
    size_t end = field.find_first_of(".[");
    const std::string head = field.substr(0, end);
    Value v;
    if (head.empty() || (head.find_first_not_of("0123456789") == std::string::npos)) {
      const bool auto_field = head.empty();
      if (automatic == (auto_field ? 2 : 1))
        fail("cannot switch between automatic field numbering and manual field specification");
      automatic = auto_field ? 1 : 2;
      const size_t index = auto_field ? next_auto++ : std::stoul(head.substr(0, 9));
      if (index >= args.positional.size())
        fail("Replacement index " + std::to_string(index) +
             " out of range for positional args tuple");
      v = args.positional[index];
    } else {
      const auto it = std::find_if(args.keywords.begin(), args.keywords.end(),
                                   [&](const auto& k) { return k.first == head; });
      if (it == args.keywords.end()) fail("KeyError: " + py_repr(head));
      v = it->second;
    }
    while (end != std::string::npos && end < field.size()) {
      if (field[end] == '.') {
        const size_t next = field.find_first_of(".[", end + 1);
        v = getattr(v, field.substr(end + 1, next == std::string::npos ? std::string::npos
                                                                       : next - end - 1));
        end = next;
      } else {
        const size_t bracket = field.find(']', end);
        if (bracket == std::string::npos) fail("Missing ']' in format string");
        const std::string key = field.substr(end + 1, bracket - end - 1);
        v = getitem(v, key.find_first_not_of("0123456789") == std::string::npos && !key.empty()
                           ? Value::integer(std::stoll(key.substr(0, 18)))
                           : text(key));
        end = bracket + 1 < field.size() ? bracket + 1 : std::string::npos;
      }
    }
    if (conversion == "r") v = text(repr(v));
    if (conversion == "s") v = text(str(v));
    std::string piece;
    if (spec_text.empty()) {
      piece = str(v);
    } else {
      Spec s;
      size_t k = 0;
      const std::string& t = spec_text;
      if (t.size() >= 2 && std::string("<>^=").find(t[1]) != std::string::npos) {
        s.fill = t[0];
        s.align = t[1];
        k = 2;
      } else if (std::string("<>^=").find(t[0]) != std::string::npos) {
        s.align = t[k++];
      }
      if (k < t.size() && (t[k] == '+' || t[k] == '-' || t[k] == ' ')) s.sign = t[k++];
      if (k < t.size() && t[k] == '#') unsupported("the '#' option of a format spec");
      if (k < t.size() && t[k] == '0') {
        s.zero = true;
        ++k;
      }
      auto digits = [&](int64_t& into) {
        if (k >= t.size() || t[k] < '0' || t[k] > '9') return;
        into = 0;
        for (; k < t.size() && t[k] >= '0' && t[k] <= '9'; ++k)
          into = std::min<int64_t>(into * 10 + (t[k] - '0'), 100000);
      };
      digits(s.width);
      if (k < t.size() && (t[k] == ',' || t[k] == '_')) unsupported("grouping in a format spec");
      if (k < t.size() && t[k] == '.') {
        ++k;
        s.precision = 0;
        digits(s.precision);
      }
      if (k < t.size()) s.type = t[k++];
      if (k != t.size() || (s.fill & 0x80)) unsupported("the format spec " + py_repr(spec_text));
      check_widths(s);
      if (v.is_string() && (s.type == 0 || s.type == 's')) {
        if (s.sign || s.zero || s.align == '=') fail("invalid format spec for a string");
        std::string t2 = v.str();
        if (s.precision >= 0)
          t2 = to_utf8(to_code_points(t2).substr(0, static_cast<size_t>(s.precision)));
        piece = py_pad(t2, s.width, static_cast<char32_t>(s.fill), s.align ? s.align : '<');
      } else if (v.is_number() && s.type == 0 && (!v.is(Kind::kFloat) || s.precision < 0)) {
        // No type: an int as 'd' (a bool too, once a spec is given), a float as its repr.
        std::string body =
            v.is(Kind::kFloat) ? py_float_repr(v.as_float()) : std::to_string(v.as_int());
        if (s.sign && s.sign != '-' && body[0] != '-') body = std::string(1, s.sign) + body;
        piece = align_number(body, s);
      } else if (v.is_number() && s.type != 0 &&
                 std::string("dxXofFeEgG").find(s.type) != std::string::npos) {
        const bool integral = std::string("dxXo").find(s.type) != std::string::npos;
        if (integral && v.is(Kind::kFloat))
          fail("Unknown format code '" + std::string(1, s.type) + "' for object of type 'float'");
        Spec bare = s;
        bare.width = -1;
        bare.zero = false;
        bare.align = 0;
        piece = align_number(printf_number(bare, integral ? v : Value::real(v.as_float())), s);
      } else {
        unsupported("the format spec " + py_repr(spec_text) + " for a " + type_name(v));
      }
    }
    out += format.markup() && !(v.is_string() && v.markup()) ? html_escape(piece) : piece;
    if (out.size() > kMaxStringBytes) fail("str.format: the result is too long");
  }
  return text(std::move(out), format.markup());
}

}  // namespace gpt::jinja
