// Python's decoding of a Jinja2 string literal, for the chat-template lexer (see lexer.h):
// Jinja2 writes the characters past ASCII as \\x.., \\u.. or \\U.. escapes and decodes the result
// with Python's unicode-escape codec, so a backslash escapes as in Python (\\n, \\t, \\', octal
// \\101, \\x41, \\u00e9, \\U0001F600, a backslash-newline is nothing) and an unknown escape stays
// as written. Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <cstring>

#include "framework/check.h"
#include "framework/text/jinja/lexer.h"
#include "framework/text/jinja/py_text.h"
#include "framework/text/unicode_text.h"

namespace gpt::jinja {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

}  // namespace

std::string decode_string_literal(std::string_view body, int line) {
  std::string escaped;
  static const char hex[] = "0123456789abcdef";
  for (char32_t c : to_code_points(body)) {
    if (c < 0x80) {
      escaped += static_cast<char>(c);
      continue;
    }
    const int digits = c < 0x100 ? 2 : c < 0x10000 ? 4 : 8;
    escaped += digits == 2 ? "\\x" : digits == 4 ? "\\u" : "\\U";
    for (int k = digits - 1; k >= 0; --k) escaped += hex[(c >> (4 * k)) & 15];
  }
  std::string value;
  auto hex_value = [&](size_t at, int n) {
    char32_t v = 0;
    for (int k = 0; k < n; ++k) {
      const char c = at + k < escaped.size() ? static_cast<char>(escaped[at + k] | 32) : 0;
      const int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
      if (d < 0)
        fail_at(line, std::string("string: truncated \\") +
                          (n == 2   ? "x"
                           : n == 4 ? "u"
                                    : "U") +
                          " escape");
      v = v * 16 + static_cast<char32_t>(d);
    }
    return v;
  };
  for (size_t k = 0; k < escaped.size(); ++k) {
    if (escaped[k] != '\\') {
      value += escaped[k];
      continue;
    }
    if (++k == escaped.size()) fail_at(line, "string: \\ at the end");
    const char e = escaped[k];
    static const char kEscapes[] = "\\'\"abfnrtv";
    static const char kMeanings[] = "\\'\"\a\b\f\n\r\t\v";
    const char* simple = e != 0 ? std::strchr(kEscapes, e) : nullptr;
    if (e == '\n') continue;  // a line continuation
    if (simple) {
      value += kMeanings[simple - kEscapes];
    } else if (e >= '0' && e <= '7') {
      char32_t v = 0;
      int n = 0;
      for (; n < 3 && k < escaped.size() && escaped[k] >= '0' && escaped[k] <= '7'; ++n, ++k)
        v = v * 8 + static_cast<char32_t>(escaped[k] - '0');
      --k;
      utf8_append(value, v);
    } else if (e == 'x' || e == 'u' || e == 'U') {
      const int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      const char32_t v = hex_value(k + 1, n);
      k += static_cast<size_t>(n);
      if (v > 0x10FFFF) fail_at(line, "string: illegal Unicode character");
      if (v >= 0xD800 && v <= 0xDFFF)
        fail_at(line, "unsupported string escape of a lone surrogate");
      utf8_append(value, v);
    } else if (e == 'N') {
      fail_at(line, "unsupported string escape \\N{...}");
    } else {
      value += '\\';
      value += e;
    }
  }
  return value;
}

}  // namespace gpt::jinja
