// Code points, character classes and case mapping with Python 3.11's rules (see py_text.h).
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include "framework/text/jinja/py_text.h"

#include <unicode/ucasemap.h>
#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include <memory>

#include "framework/text/jinja/failure.h"
#include "framework/text/unicode_text.h"

namespace gpt::jinja {
namespace {

// Python 3.11's unicodedata is Unicode 14.0; ICU may know later characters, which Python treats
// as unassigned (not printable, no case, no class).
bool known_to_python(char32_t c) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  return age[0] != 0 && (age[0] < 14 || (age[0] == 14 && age[1] == 0));
}

int8_t category(char32_t c) {
  return known_to_python(c) ? u_charType(static_cast<UChar32>(c))
                            : static_cast<int8_t>(U_UNASSIGNED);
}

bool has_property(char32_t c, UProperty p) {
  return known_to_python(c) && u_hasBinaryProperty(static_cast<UChar32>(c), p);
}

bool cased(char32_t c) {
  return has_property(c, UCHAR_CASED);
}

bool case_ignorable(char32_t c) {
  return has_property(c, UCHAR_CASE_IGNORABLE);
}

struct CaseMapCloser {
  void operator()(UCaseMap* m) const { ucasemap_close(m); }
};

enum class Mapping { kUpper, kLower, kTitle };

// The full (SpecialCasing) mapping of one character, appended.
void append_mapped(char32_t c, Mapping m, std::u32string& out) {
  if (c < 0x80) {
    if (m == Mapping::kLower)
      out += (c >= 'A' && c <= 'Z') ? c + 32 : c;
    else
      out += (c >= 'a' && c <= 'z') ? c - 32 : c;
    return;
  }
  if (!known_to_python(c)) {
    out += c;
    return;
  }
  UChar src[2];
  int32_t n = 0;
  U16_APPEND_UNSAFE(src, n, static_cast<UChar32>(c));
  UChar dst[16];
  UErrorCode err = U_ZERO_ERROR;
  int32_t len = 0;
  if (m == Mapping::kUpper) {
    len = u_strToUpper(dst, 16, src, n, "", &err);
  } else if (m == Mapping::kLower) {
    len = u_strToLower(dst, 16, src, n, "", &err);
  } else {
    // The whole one-character string is one "word" whose first character is titlecased.
    thread_local std::unique_ptr<UCaseMap, CaseMapCloser> title_map = [] {
      UErrorCode e = U_ZERO_ERROR;
      return std::unique_ptr<UCaseMap, CaseMapCloser>(
          ucasemap_open("", U_TITLECASE_WHOLE_STRING | U_TITLECASE_NO_BREAK_ADJUSTMENT, &e));
    }();
    len = title_map ? ucasemap_toTitle(title_map.get(), dst, 16, src, n, &err) : 0;
    if (!title_map) err = U_INTERNAL_PROGRAM_ERROR;
  }
  if (U_FAILURE(err) || len > 16) {
    out += c;
    return;
  }
  for (int32_t i = 0; i < len;) {
    UChar32 d;
    U16_NEXT_UNSAFE(dst, i, d);
    out += static_cast<char32_t>(d);
  }
}

// Python's lower() of the character at i: GREEK CAPITAL SIGMA becomes final sigma after a cased
// letter (skipping case-ignorable ones) that no cased letter follows.
void append_lower_at(const std::u32string& s, size_t i, std::u32string& out) {
  if (s[i] != 0x3A3) {
    append_mapped(s[i], Mapping::kLower, out);
    return;
  }
  size_t j = i;
  while (j > 0 && case_ignorable(s[j - 1])) --j;
  bool final_sigma = j > 0 && cased(s[j - 1]);
  if (final_sigma) {
    size_t k = i + 1;
    while (k < s.size() && case_ignorable(s[k])) ++k;
    final_sigma = k == s.size() || !cased(s[k]);
  }
  out += final_sigma ? U'\u03C2' : U'\u03C3';
}

}  // namespace

std::u32string to_code_points(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0, n = 0; i < s.size(); i += n) out += utf8_decode(s, i, n);
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

size_t byte_offset(std::string_view s, size_t index) {
  size_t i = 0;
  for (; i < s.size() && index > 0; ++i)
    if (i + 1 == s.size() || (static_cast<unsigned char>(s[i + 1]) & 0xC0) != 0x80) --index;
  return i;
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

bool py_isprintable(char32_t c) {
  if (c == ' ') return true;
  switch (category(c)) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

bool py_isalpha(char32_t c) {
  const int8_t k = category(c);
  return k == U_UPPERCASE_LETTER || k == U_LOWERCASE_LETTER || k == U_TITLECASE_LETTER ||
         k == U_MODIFIER_LETTER || k == U_OTHER_LETTER;
}

bool py_isdecimal(char32_t c) {
  return category(c) == U_DECIMAL_DIGIT_NUMBER;
}

int py_decimal_value(char32_t c) {
  return u_charDigitValue(static_cast<UChar32>(c));
}

bool py_isdigit(char32_t c) {
  if (!known_to_python(c)) return false;
  const int32_t t = u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE);
  return t == U_NT_DECIMAL || t == U_NT_DIGIT;
}

bool py_isnumeric(char32_t c) {
  return known_to_python(c) &&
         u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE) != U_NT_NONE;
}

bool py_is_word_char(char32_t c) {
  return c == '_' || py_isalpha(c) || py_isdecimal(c) || py_isdigit(c) || py_isnumeric(c);
}

bool py_str_is(std::string_view s, StrClass what) {
  const std::u32string cs = to_code_points(s);
  if (what == StrClass::kAscii) {
    for (char32_t c : cs)
      if (c >= 0x80) return false;
    return true;
  }
  if (what == StrClass::kLower || what == StrClass::kUpper) {
    const UProperty same = what == StrClass::kLower ? UCHAR_LOWERCASE : UCHAR_UPPERCASE;
    const UProperty other = what == StrClass::kLower ? UCHAR_UPPERCASE : UCHAR_LOWERCASE;
    bool any = false;
    for (char32_t c : cs) {
      if (has_property(c, other) || category(c) == U_TITLECASE_LETTER) return false;
      any = any || has_property(c, same);
    }
    return any;
  }
  if (cs.empty()) return false;
  for (char32_t c : cs) {
    bool ok = false;
    switch (what) {
      case StrClass::kSpace:
        ok = py_isspace(c);
        break;
      case StrClass::kAlpha:
        ok = py_isalpha(c);
        break;
      case StrClass::kAlnum:
        ok = py_isalpha(c) || py_isdecimal(c) || py_isdigit(c) || py_isnumeric(c);
        break;
      case StrClass::kDecimal:
        ok = py_isdecimal(c);
        break;
      case StrClass::kDigit:
        ok = py_isdigit(c);
        break;
      default:
        ok = py_isnumeric(c);
        break;
    }
    if (!ok) return false;
  }
  return true;
}

std::string py_upper(std::string_view s) {
  std::u32string out;
  for (char32_t c : to_code_points(s)) append_mapped(c, Mapping::kUpper, out);
  return to_utf8(out);
}

std::string py_lower(std::string_view s) {
  const std::u32string cs = to_code_points(s);
  std::u32string out;
  for (size_t i = 0; i < cs.size(); ++i) append_lower_at(cs, i, out);
  return to_utf8(out);
}

std::string py_capitalize(std::string_view s) {
  const std::u32string cs = to_code_points(s);
  std::u32string out;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (i == 0)
      append_mapped(cs[0], Mapping::kTitle, out);
    else
      append_lower_at(cs, i, out);
  }
  return to_utf8(out);
}

std::string py_title(std::string_view s) {
  const std::u32string cs = to_code_points(s);
  std::u32string out;
  bool previous_cased = false;
  for (size_t i = 0; i < cs.size(); ++i) {
    if (previous_cased)
      append_lower_at(cs, i, out);
    else
      append_mapped(cs[i], Mapping::kTitle, out);
    previous_cased = cased(cs[i]);
  }
  return to_utf8(out);
}

}  // namespace gpt::jinja
