// Python's float repr and its int() and float() of a string (see py_text.h).
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <locale.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>

#include "framework/text/jinja/failure.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

// What int() and float() first do to their text: any Unicode decimal digit becomes its ASCII
// digit, any whitespace a space, any other non-ASCII character one that no number has; then the
// spaces around are dropped. None when spaces remain inside (never a number).
std::string ascii_number_text(std::string_view s) {
  std::string out;
  for (char32_t c : to_code_points(s)) {
    if (c < 0x80)
      out += py_isspace(c) ? ' ' : static_cast<char>(c);
    else if (py_isspace(c))
      out += ' ';
    else if (py_isdecimal(c))
      out += static_cast<char>('0' + py_decimal_value(c));
    else
      out += '?';
  }
  const size_t b = out.find_first_not_of(' ');
  if (b == std::string::npos) return "";
  return out.substr(b, out.find_last_not_of(' ') + 1 - b);
}

// Digits of `base` with single underscores between them (and after a base prefix when
// `leading_underscore`); the underscores removed. None if the text breaks that rule.
std::optional<std::string> digits_without_underscores(std::string_view s, int base,
                                                      bool leading_underscore) {
  std::string out;
  bool previous_digit = leading_underscore;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      if (!previous_digit || i + 1 == s.size()) return std::nullopt;
      previous_digit = false;
      continue;
    }
    int v = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'z' ? c - 'a' + 10
            : c >= 'A' && c <= 'Z' ? c - 'A' + 10
                                   : 99;
    if (v >= base) return std::nullopt;
    out += c;
    previous_digit = true;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

locale_t c_locale() {
  static const locale_t c = newlocale(LC_ALL_MASK, "C", static_cast<locale_t>(nullptr));
  return c;
}

}  // namespace

std::string py_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string_view t(buf, static_cast<size_t>(r.ptr - buf));
  std::string out;
  if (t[0] == '-') {
    out = "-";
    t.remove_prefix(1);
  }
  const size_t e = t.find('e');
  std::string digits(1, t[0]);
  if (e > 1) digits += t.substr(2, e - 2);
  const int exponent = std::atoi(std::string(t.substr(e + 1)).c_str());
  const int point = exponent + 1;  // digits d1 d2 ... mean 0.d1d2... x 10^point
  const auto n = static_cast<int>(digits.size());
  if (point > -4 && point <= 16) {  // Python's repr: positional notation in this range
    if (point <= 0) return out + "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    if (point >= n) return out + digits + std::string(static_cast<size_t>(point - n), '0') + ".0";
    return out + digits.substr(0, static_cast<size_t>(point)) + "." +
           digits.substr(static_cast<size_t>(point));
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  const int shown = exponent < 0 ? -exponent : exponent;
  out += exponent < 0 ? "e-" : "e+";
  if (shown < 10) out += '0';
  return out + std::to_string(shown);
}

std::optional<int64_t> py_parse_int(std::string_view text, int base) {
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  std::string s = ascii_number_text(text);
  bool negative = false;
  std::string_view v = s;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    negative = v[0] == '-';
    v.remove_prefix(1);
  }
  bool prefixed = false;
  auto prefix = [&](char p) {
    return v.size() >= 2 && v[0] == '0' && (v[1] == p || v[1] == p - 32);
  };
  const int detected = prefix('x') ? 16 : prefix('o') ? 8 : prefix('b') ? 2 : 10;
  if (detected != 10 && (base == 0 || base == detected)) {
    v.remove_prefix(2);
    prefixed = true;
    base = detected;
  }
  if (base == 0) {
    base = 10;
    // Base 0 refuses leading zeros on a non-zero decimal ("010"), as Python's literals do.
    if (v.size() > 1 && v[0] == '0' && v.find_first_not_of("0_") != std::string_view::npos)
      return std::nullopt;
  }
  const std::optional<std::string> digits = digits_without_underscores(v, base, prefixed);
  if (!digits) return std::nullopt;
  uint64_t magnitude = 0;
  for (char c : *digits) {
    const int d = c <= '9' ? c - '0' : (c | 32) - 'a' + 10;
    if (magnitude > (UINT64_MAX - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base))
      fail("integer out of the 64-bit range");
    magnitude = magnitude * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
  }
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  if (magnitude > limit) fail("integer out of the 64-bit range");
  return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
}

std::optional<double> py_parse_float(std::string_view text) {
  const std::string s = ascii_number_text(text);
  std::string_view v = s;
  std::string sign;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    sign = v[0] == '-' ? "-" : "";
    v.remove_prefix(1);
  }
  std::string lower;
  for (char c : v) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
  if (lower == "inf" || lower == "infinity") return sign == "-" ? -HUGE_VAL : HUGE_VAL;
  if (lower == "nan") return std::nan("");
  // digits [. digits] | . digits, then an optional exponent; '_' only between digits.
  const size_t e = lower.find('e');
  const std::string_view mantissa = std::string_view(lower).substr(0, e);
  const size_t point = mantissa.find('.');
  std::string clean = sign;
  auto digit_run = [&](std::string_view run, bool may_be_empty) {
    if (run.empty()) return may_be_empty;
    const std::optional<std::string> d = digits_without_underscores(run, 10, false);
    if (!d) return false;
    clean += *d;
    return true;
  };
  if (point == std::string_view::npos) {
    if (!digit_run(mantissa, false)) return std::nullopt;
  } else {
    const std::string_view whole = mantissa.substr(0, point), fraction = mantissa.substr(point + 1);
    if (whole.empty() && fraction.empty()) return std::nullopt;
    if (!digit_run(whole, true)) return std::nullopt;
    clean += '.';
    if (!digit_run(fraction, true)) return std::nullopt;
  }
  if (e != std::string::npos) {
    std::string_view exponent = std::string_view(lower).substr(e + 1);
    clean += 'e';
    if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
      clean += exponent[0];
      exponent.remove_prefix(1);
    }
    if (!digit_run(exponent, false)) return std::nullopt;
  }
  return strtod_l(clean.c_str(), nullptr, c_locale());
}

}  // namespace gpt::jinja
