// Python's str semantics on UTF-8 text, for the chat-template interpreter (framework/text/jinja/):
// templates index, slice, strip, split and case-map strings as Python 3 does, by code point and
// with Unicode's whitespace and case rules, and print numbers and strings as Python's str() and
// repr() do. Hand-written because Jinja2 is Python and nothing in C++ behaves like its str; the
// Unicode properties come from ICU, limited to the characters Python 3.11 (Unicode 14.0, the
// reference the tests compare with) knows. All text passed in is valid UTF-8 (checked where it
// enters: the template and the conversation's JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::jinja {

// --- code points
std::u32string to_code_points(std::string_view utf8);
std::string to_utf8(std::u32string_view code_points);
size_t code_point_count(std::string_view utf8);
// The byte offset of code point `index` (0 <= index <= count).
size_t byte_offset(std::string_view utf8, size_t index);

// --- character classes (str.isspace() and friends, per character)
bool py_isspace(char32_t c);
bool py_isprintable(char32_t c);
bool py_isalpha(char32_t c);
bool py_isdecimal(char32_t c);
int py_decimal_value(char32_t c);  // of a decimal digit (py_isdecimal)
bool py_isdigit(char32_t c);
bool py_isnumeric(char32_t c);
bool py_is_word_char(char32_t c);  // re's \w: alphanumeric or '_'

// --- whole-string predicates: str.isspace(), str.islower(), ...
enum class StrClass { kSpace, kAlpha, kAlnum, kDecimal, kDigit, kNumeric, kLower, kUpper, kAscii };
bool py_str_is(std::string_view s, StrClass what);

// --- case mapping (full mappings, Greek final sigma as Python's lower())
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);

// --- str methods. `chars` null: whitespace. Indexes are code points.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split / str.rsplit: `sep` null splits at runs of whitespace; maxsplit < 0: no limit.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
// str.replace; count < 0: all. Fails past max_bytes.
std::string py_replace(std::string_view s, std::string_view old, std::string_view with,
                       int64_t count, size_t max_bytes);
// str.find / rfind / count over the slice [start, end) of code points (Python's slice rules for
// negative or missing bounds: give std::nullopt for a missing one). find gives -1 when absent.
int64_t py_find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                std::optional<int64_t> end, bool from_right);
int64_t py_count(std::string_view s, std::string_view sub, std::optional<int64_t> start,
                 std::optional<int64_t> end);
// str.startswith / str.endswith over the slice [start, end).
bool py_affix(std::string_view s, std::string_view affix, std::optional<int64_t> start,
              std::optional<int64_t> end, bool suffix);
// str.center / ljust / rjust with a one-character fill.
std::string py_pad(std::string_view s, int64_t width, char32_t fill, char align);

// --- printing
// repr() of a str: quoted, with Python's escapes for unprintable characters.
std::string py_repr(std::string_view s);
// repr() (and str()) of a float: the shortest text that reads back, in Python's layout.
std::string py_float_repr(double x);
// markupsafe.escape(): & < > ' " as HTML entities.
std::string html_escape(std::string_view s);

// --- reading numbers as int() and float() do (whitespace around, '_' between digits, any
// Unicode decimal digits); none when Python raises ValueError. An int out of 64 bits fails.
std::optional<int64_t> py_parse_int(std::string_view s, int base);
std::optional<double> py_parse_float(std::string_view s);

}  // namespace gpt::jinja
