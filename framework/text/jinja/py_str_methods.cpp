// Python's str methods (strip, split, replace, find, ...) and repr() of a str, on UTF-8 text (see
// py_text.h). Searching works on bytes, which for valid UTF-8 finds exactly the code-point
// matches; indexes given to and returned from the methods are code points, as in Python.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>
#include <cstdint>

#include "framework/text/jinja/failure.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"
#include "framework/text/unicode_text.h"

namespace gpt::jinja {
namespace {

bool in_set(char32_t c, const std::u32string* chars) {
  return chars ? chars->find(c) != std::u32string::npos : py_isspace(c);
}

// The bounds [start, end) of str.find's and str.count's slice over n code points, as CPython
// adjusts them: negative ones count from the end, end is clamped to n, start is not (a start past
// the end finds nothing, not even ""). Empty when start > end.
struct Bounds {
  size_t start, end;
  bool empty;
};
Bounds search_bounds(std::optional<int64_t> start, std::optional<int64_t> end, size_t n) {
  const auto len = static_cast<int64_t>(n);
  auto from_end = [&](int64_t x) { return x < 0 ? std::max<int64_t>(x + len, 0) : x; };
  const int64_t b = from_end(start.value_or(0));
  const int64_t e = std::min(from_end(end.value_or(len)), len);
  if (b > e) return {0, 0, true};
  return {static_cast<size_t>(b), static_cast<size_t>(e), false};
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

}  // namespace

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::u32string cs = to_code_points(s);
  const std::u32string set = chars ? to_code_points(*chars) : std::u32string();
  const std::u32string* p = chars ? &set : nullptr;
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && in_set(cs[b], p)) ++b;
  if (right)
    while (e > b && in_set(cs[e - 1], p)) --e;
  return to_utf8(std::u32string_view(cs).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right) {
  std::vector<std::string> parts;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (sep) {
    if (sep->empty()) fail("empty separator");
    if (!from_right) {
      size_t at = 0;
      for (size_t found; maxsplit > 0 && (found = s.find(*sep, at)) != std::string_view::npos;
           --maxsplit) {
        parts.emplace_back(s.substr(at, found - at));
        at = found + sep->size();
      }
      parts.emplace_back(s.substr(at));
      return parts;
    }
    size_t end = s.size();
    for (; maxsplit > 0 && end >= sep->size(); --maxsplit) {
      const size_t found = s.rfind(*sep, end - sep->size());
      if (found == std::string_view::npos) break;
      parts.emplace_back(s.substr(found + sep->size(), end - found - sep->size()));
      end = found;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // Runs of whitespace; the remainder after maxsplit keeps its far end's whitespace.
  const std::u32string cs = to_code_points(s);
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < cs.size() && py_isspace(cs[i])) ++i;
      if (i == cs.size()) break;
      if (maxsplit == 0) {
        parts.push_back(to_utf8(std::u32string_view(cs).substr(i)));
        break;
      }
      size_t j = i;
      while (j < cs.size() && !py_isspace(cs[j])) ++j;
      parts.push_back(to_utf8(std::u32string_view(cs).substr(i, j - i)));
      --maxsplit;
      i = j;
    }
    return parts;
  }
  size_t e = cs.size();
  while (true) {
    while (e > 0 && py_isspace(cs[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit == 0) {
      parts.push_back(to_utf8(std::u32string_view(cs).substr(0, e)));
      break;
    }
    size_t b = e;
    while (b > 0 && !py_isspace(cs[b - 1])) --b;
    parts.push_back(to_utf8(std::u32string_view(cs).substr(b, e - b)));
    --maxsplit;
    e = b;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  const std::u32string cs = to_code_points(s);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cs.size();) {
    if (!is_line_break(cs[i])) {
      ++i;
      continue;
    }
    const size_t eol = (cs[i] == '\r' && i + 1 < cs.size() && cs[i + 1] == '\n') ? i + 2 : i + 1;
    lines.push_back(to_utf8(std::u32string_view(cs).substr(start, (keepends ? eol : i) - start)));
    start = i = eol;
  }
  if (start < cs.size()) lines.push_back(to_utf8(std::u32string_view(cs).substr(start)));
  return lines;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view with,
                       int64_t count, size_t max_bytes) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  auto append = [&](std::string_view piece) {
    if (out.size() + piece.size() > max_bytes) fail("str.replace: the result is too long");
    out += piece;
  };
  if (old.empty()) {  // inserted before every character and at the end
    const std::u32string cs = to_code_points(s);
    size_t i = 0;
    for (; i <= cs.size() && count > 0; ++i, --count) {
      append(with);
      if (i < cs.size()) append(to_utf8(std::u32string_view(cs).substr(i, 1)));
    }
    if (i < cs.size()) append(to_utf8(std::u32string_view(cs).substr(i)));
    return out;
  }
  size_t at = 0;
  for (size_t found; count > 0 && (found = s.find(old, at)) != std::string_view::npos; --count) {
    append(s.substr(at, found - at));
    append(with);
    at = found + old.size();
  }
  append(s.substr(at));
  return out;
}

int64_t py_find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                std::optional<int64_t> end, bool from_right) {
  const auto [b, e, none] = search_bounds(start, end, code_point_count(s));
  if (none) return -1;
  const size_t bb = byte_offset(s, b), eb = byte_offset(s, e);
  const std::string_view range = s.substr(bb, eb - bb);
  const size_t found = from_right ? range.rfind(sub) : range.find(sub);
  if (found == std::string_view::npos) return -1;
  return static_cast<int64_t>(b + code_point_count(range.substr(0, found)));
}

int64_t py_count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                 std::optional<int64_t> end) {
  const auto [b, e, none] = search_bounds(start, end, code_point_count(s));
  if (none) return 0;
  const size_t bb = byte_offset(s, b), eb = byte_offset(s, e);
  const std::string_view range = s.substr(bb, eb - bb);
  if (sub.empty()) return static_cast<int64_t>(code_point_count(range) + 1);
  int64_t n = 0;
  for (size_t at = range.find(sub); at != std::string_view::npos;
       at = range.find(sub, at + sub.size()))
    ++n;
  return n;
}

bool py_affix(std::string_view s, std::string_view affix, std::optional<int64_t> start,
              std::optional<int64_t> end, bool suffix) {
  const auto [b, e, none] = search_bounds(start, end, code_point_count(s));
  if (none) return false;
  const size_t bb = byte_offset(s, b), eb = byte_offset(s, e);
  const std::string_view range = s.substr(bb, eb - bb);
  return suffix ? range.ends_with(affix) : range.starts_with(affix);
}

std::string py_pad(std::string_view s, int64_t width, char32_t fill, char align) {
  const auto n = static_cast<int64_t>(code_point_count(s));
  if (width <= n) return std::string(s);
  if (width - n > static_cast<int64_t>(kMaxStringBytes / 4)) fail("padding too wide");
  const int64_t total = width - n;
  // str.center's split of an odd margin: the extra character goes left when width is odd.
  const int64_t left = align == '<' ? 0 : align == '>' ? total : total / 2 + (total & width & 1);
  std::string fill_text;
  utf8_append(fill_text, fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill_text;
  out += s;
  for (int64_t i = left; i < total; ++i) out += fill_text;
  return out;
}

std::string py_repr(std::string_view s) {
  const std::u32string cs = to_code_points(s);
  const bool has_single = cs.find(U'\'') != std::u32string::npos;
  const bool has_double = cs.find(U'"') != std::u32string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  static const char hex[] = "0123456789abcdef";
  std::string out(1, quote);
  for (char32_t c : cs) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !py_isprintable(c))) {
      const int digits = c < 0x100 ? 2 : c < 0x10000 ? 4 : 8;
      out += '\\';
      out += digits == 2 ? 'x' : digits == 4 ? 'u' : 'U';
      for (int k = digits - 1; k >= 0; --k) out += hex[(c >> (4 * k)) & 15];
    } else {
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace gpt::jinja
