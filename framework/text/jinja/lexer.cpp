// Jinja2's lexer with trim_blocks and lstrip_blocks (see lexer.h). The rules, from Jinja2's:
//  - newlines are normalised to "\n" and one trailing newline of the template is dropped;
//  - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}", "-}}", "-#}" all after it;
//  - lstrip_blocks: spaces and tabs (any whitespace but a newline) from the start of a line up
//    to a "{%" or "{#" are dropped, unless the tag starts "{%+"; not before "{{";
//  - trim_blocks: the first newline after "%}" or "#}" is dropped, unless it ends "+%}";
//  - "{% raw %}" ... "{% endraw %}" is text; a tag's end counts only outside brackets.
// "Whitespace" is Python's (str.isspace: Unicode), as Jinja2's regular expressions use it.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include "framework/text/jinja/lexer.h"

#include <array>
#include <cstring>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/jinja/py_text.h"
#include "framework/text/unicode_text.h"

namespace gpt::jinja {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : s_(normalize(source)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      size_t open = s_.find('{', pos_);
      while (open != std::string::npos &&
             (open + 1 >= s_.size() || std::strchr("{%#", s_[open + 1]) == nullptr))
        open = s_.find('{', open + 1);
      if (open == std::string::npos) {
        data(s_.substr(pos_), pos_);
        pos_ = s_.size();
        break;
      }
      const char kind = s_[open + 1];
      const char sign =
          open + 2 < s_.size() && (s_[open + 2] == '-' || s_[open + 2] == '+') ? s_[open + 2] : 0;
      const size_t raw_end = kind == '%' ? raw_begin_end(open) : 0;
      text_before_tag(open, sign, /*lstrip=*/kind != '{');
      const int line = line_at(open);
      pos_ = open + 2 + (sign ? 1 : 0);
      if (raw_end) {
        raw(raw_end, line);
      } else if (kind == '#') {
        comment(line);
      } else {
        emit(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, line);
        tag(kind == '{', line);
      }
    }
    emit(Tok::kEof, line_at(s_.size()));
    return std::move(tokens_);
  }

 private:
  static std::string normalize(const std::string& source) {
    std::string out;
    out.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        out += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        out += source[i];
      }
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
  }

  int line_at(size_t at) {
    for (; line_pos_ < at; ++line_pos_) line_ += s_[line_pos_] == '\n';
    return line_;
  }

  void emit(Tok type, int line, std::string value = "") {
    tokens_.push_back(Token{type, line, std::move(value)});
  }

  void data(std::string text, size_t at) {
    if (!text.empty()) emit(Tok::kData, line_at(at), std::move(text));
  }

  bool space_at(size_t i, size_t* length = nullptr) const {
    size_t n = 0;
    const bool space = i < s_.size() && py_isspace(utf8_decode(s_, i, n));
    if (length) *length = n;
    return space;
  }

  size_t skip_spaces(size_t i) const {
    for (size_t n; space_at(i, &n);) i += n;
    return i;
  }

  // The text from pos_ to a tag at `open`: all trailing whitespace gone after a '-' sign; with
  // lstrip (a block, comment or raw tag without '+'), the whitespace between the line's start
  // and the tag (when the text is all whitespace since its last newline, or since the last tag
  // if that ended a line).
  void text_before_tag(size_t open, char sign, bool lstrip) {
    std::string text = s_.substr(pos_, open - pos_);
    if (sign == '-') {
      std::string stripped = py_strip(text, nullptr, false, true);
      text.swap(stripped);
    } else if (sign != '+' && lstrip) {
      const size_t newline = text.rfind('\n');
      const size_t line_start = newline == std::string::npos ? 0 : newline + 1;
      const bool at_line_start = line_start > 0 || pos_ == 0 || s_[pos_ - 1] == '\n';
      if (at_line_start && line_start < text.size() &&
          py_strip(std::string_view(text).substr(line_start), nullptr, true, false).empty())
        text.resize(line_start);
    }
    data(std::move(text), pos_);
  }

  // Where "{% raw %}" at `open` ends (its regex: {%(-|+|)\s*raw\s*(-%}\s*|%})), or 0.
  size_t raw_begin_end(size_t open) const {
    size_t i = open + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    i = skip_spaces(i);
    if (s_.compare(i, 3, "raw") != 0) return 0;
    i = skip_spaces(i + 3);
    if (s_.compare(i, 3, "-%}") == 0) return skip_spaces(i + 3);
    if (s_.compare(i, 2, "%}") == 0) return i + 2;
    return 0;
  }

  void raw(size_t body, int line) {
    // The first "{%" "-"|"+"? \s* "endraw" \s* ("+%}" | "-%}" \s* | "%}" "\n"?).
    for (size_t at = s_.find("{%", body); at != std::string::npos; at = s_.find("{%", at + 1)) {
      size_t i = at + 2;
      const char sign = i < s_.size() && (s_[i] == '-' || s_[i] == '+') ? s_[i] : 0;
      i = skip_spaces(i + (sign ? 1 : 0));
      if (s_.compare(i, 6, "endraw") != 0) continue;
      i = skip_spaces(i + 6);
      size_t end;
      if (s_.compare(i, 3, "+%}") == 0)
        end = i + 3;
      else if (s_.compare(i, 3, "-%}") == 0)
        end = skip_spaces(i + 3);
      else if (s_.compare(i, 2, "%}") == 0)
        end = i + 2 + (i + 2 < s_.size() && s_[i + 2] == '\n');
      else
        continue;
      pos_ = body;
      text_before_tag(at, sign, true);
      pos_ = end;
      return;
    }
    fail_at(line, "missing end of raw directive");
  }

  void comment(int line) {
    const size_t close = s_.find("#}", pos_);
    if (close == std::string::npos) fail_at(line, "missing end of comment tag");
    const char before = close > pos_ ? s_[close - 1] : 0;
    if (before == '-')
      pos_ = skip_spaces(close + 2);
    else if (before == '+')
      pos_ = close + 2;
    else
      pos_ = close + 2 + (close + 2 < s_.size() && s_[close + 2] == '\n');
  }

  // The tag's end at pos_ (only when no bracket is open): "-}}" or "}}"; "+%}", "-%}", "%}".
  bool tag_end(bool variable) {
    const char* close = variable ? "}}" : "%}";
    if (s_.compare(pos_, 3, std::string("-") + close) == 0) {
      pos_ = skip_spaces(pos_ + 3);
      return true;
    }
    if (!variable && s_.compare(pos_, 3, "+%}") == 0) {
      pos_ += 3;
      return true;
    }
    if (s_.compare(pos_, 2, close) == 0) {
      pos_ += 2;
      if (!variable && pos_ < s_.size() && s_[pos_] == '\n') ++pos_;  // trim_blocks
      return true;
    }
    return false;
  }

  void tag(bool variable, int open_line) {
    std::vector<char> brackets;  // the closers expected
    while (true) {
      if (pos_ >= s_.size())
        fail_at(open_line, std::string("unexpected end of template: the ") +
                               (variable ? "{{" : "{%") + " opened here is not closed");
      const int line = line_at(pos_);
      if (brackets.empty() && tag_end(variable)) {
        emit(variable ? Tok::kVarEnd : Tok::kBlockEnd, line);
        return;
      }
      if (space_at(pos_)) {
        pos_ = skip_spaces(pos_);
      } else if (number(line)) {
      } else if (name(line)) {
      } else if (s_[pos_] == '\'' || s_[pos_] == '"') {
        string_literal(line);
      } else {
        operator_token(line, brackets);
      }
    }
  }

  // D(_D)* where D is a run of digits: the end, or `at` when no digit is there.
  size_t digit_group(size_t at) const {
    size_t i = at;
    while (i < s_.size() && is_digit(s_[i])) ++i;
    if (i == at) return at;
    while (i + 1 < s_.size() && s_[i] == '_' && is_digit(s_[i + 1]))
      for (++i; i < s_.size() && is_digit(s_[i]);) ++i;
    return i;
  }

  // [eE][+-]?D(_D)*: the end, or `at`.
  size_t exponent(size_t at) const {
    if (at >= s_.size() || (s_[at] != 'e' && s_[at] != 'E')) return at;
    size_t i = at + 1;
    if (i < s_.size() && (s_[i] == '+' || s_[i] == '-')) ++i;
    const size_t end = digit_group(i);
    return end == i ? at : end;
  }

  bool number(int line);
  bool name(int line);
  void string_literal(int line);
  void operator_token(int line, std::vector<char>& brackets);

  const std::string s_;
  size_t pos_ = 0;
  size_t line_pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

bool Lexer::number(int line) {
  if (!is_digit(s_[pos_])) return false;
  auto without_underscores = [](std::string text) {
    std::erase(text, '_');
    return text;
  };
  // Float first (its regex has a lookbehind: not right after a '.'): D.D[E] or D E.
  if (pos_ == 0 || s_[pos_ - 1] != '.') {
    const size_t whole = digit_group(pos_);
    size_t end = 0;
    if (whole < s_.size() && s_[whole] == '.') {
      const size_t fraction = digit_group(whole + 1);
      if (fraction > whole + 1) end = exponent(fraction);
    }
    if (!end && exponent(whole) > whole) end = exponent(whole);
    if (end) {
      Token t{Tok::kFloat, line, ""};
      t.real = std::strtod(without_underscores(s_.substr(pos_, end - pos_)).c_str(), nullptr);
      tokens_.push_back(std::move(t));
      pos_ = end;
      return true;
    }
  }
  // 0b.., 0o.., 0x.. (each digit optionally after one '_'), [1-9](_?D)*, 0(_?0)*.
  auto run = [&](size_t i, auto valid) {
    for (size_t k; (k = i + (i < s_.size() && s_[i] == '_')) < s_.size() && valid(s_[k]);)
      i = k + 1;
    return i;
  };
  auto binary = [](char c) { return c == '0' || c == '1'; };
  auto octal = [](char c) { return c >= '0' && c <= '7'; };
  auto hex = [](char c) { return is_digit(c) || ((c | 32) >= 'a' && (c | 32) <= 'f'); };
  auto zero = [](char c) { return c == '0'; };
  size_t end = pos_ + 1;
  int base = 10;
  const char p = pos_ + 1 < s_.size() ? static_cast<char>(s_[pos_ + 1] | 32) : 0;
  if (s_[pos_] == '0' && (p == 'b' || p == 'o' || p == 'x')) {
    base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
    end = base == 2 ? run(pos_ + 2, binary) : base == 8 ? run(pos_ + 2, octal) : run(pos_ + 2, hex);
    if (end == pos_ + 2) {  // no digits: just "0"
      end = pos_ + 1;
      base = 10;
    }
  } else {
    end = s_[pos_] == '0' ? run(pos_ + 1, zero) : run(pos_ + 1, is_digit);
  }
  std::string digits = without_underscores(s_.substr(pos_, end - pos_));
  if (base != 10) digits = digits.substr(2);
  uint64_t v = 0;
  for (char c : digits) {
    const unsigned d = is_digit(c) ? c - '0' : (c | 32) - 'a' + 10;
    if (v > (static_cast<uint64_t>(INT64_MAX) - d) / static_cast<unsigned>(base))
      fail_at(line, "integer literal out of the 64-bit range");
    v = v * static_cast<unsigned>(base) + d;
  }
  Token t{Tok::kInteger, line, ""};
  t.integer = static_cast<int64_t>(v);
  tokens_.push_back(std::move(t));
  pos_ = end;
  return true;
}

bool Lexer::name(int line) {
  auto start = [](char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; };
  if (!start(s_[pos_]) && s_[pos_] != '_') return false;
  size_t end = pos_;
  while (end < s_.size() && (start(s_[end]) || s_[end] == '_' || is_digit(s_[end]))) ++end;
  if (end < s_.size() && static_cast<unsigned char>(s_[end]) >= 0x80 && !space_at(end))
    fail_at(line, "unsupported non-ASCII name in a tag");
  emit(Tok::kName, line, s_.substr(pos_, end - pos_));
  pos_ = end;
  return true;
}

// A string literal: its text between the quotes, decoded as Jinja2 does (string_literal.cpp).
void Lexer::string_literal(int line) {
  const char quote = s_[pos_];
  size_t i = pos_ + 1;
  while (i < s_.size() && s_[i] != quote) i += s_[i] == '\\' ? 2 : 1;
  if (i >= s_.size()) fail_at(line, "unterminated string");
  std::string value =
      decode_string_literal(std::string_view(s_).substr(pos_ + 1, i - pos_ - 1), line);
  pos_ = i + 1;
  emit(Tok::kString, line, std::move(value));
}

void Lexer::operator_token(int line, std::vector<char>& brackets) {
  static const std::array<const char*, 6> kTwo = {"//", "**", "==", "!=", ">=", "<="};
  for (const char* op : kTwo) {
    if (s_.compare(pos_, 2, op) == 0) {
      emit(Tok::kOperator, line, op);
      pos_ += 2;
      return;
    }
  }
  const char c = s_[pos_];
  if (static_cast<unsigned char>(c) >= 0x80)
    fail_at(line, "unsupported non-ASCII character in a tag");
  if (c == 0 || std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr)
    fail_at(line, "unexpected char " + quoted_excerpt(std::string(1, c)));
  if (c == '{' || c == '(' || c == '[') brackets.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
  if (c == '}' || c == ')' || c == ']') {
    if (brackets.empty()) fail_at(line, std::string("unexpected '") + c + "'");
    if (brackets.back() != c)
      fail_at(line, std::string("unexpected '") + c + "', expected '" + brackets.back() + "'");
    brackets.pop_back();
  }
  emit(Tok::kOperator, line, std::string(1, c));
  ++pos_;
}

}  // namespace

void fail_at(int line, const std::string& what) {
  fail_input(GPT_MSG("chat template line " << line << ": " << what));
}

std::vector<Token> tokenize(const std::string& source) {
  return Lexer(source).run();
}

}  // namespace gpt::jinja
