// The chat-template lexer (framework/text/jinja/): template text to tokens with Jinja2's rules
// for the environment transformers renders chat templates in (trim_blocks and lstrip_blocks on,
// default delimiters): text between tags, {{ }}, {% %}, {# #} and {% raw %}, whitespace control
// with '-' and '+', and inside tags names, numbers, strings (Python's escapes) and operators.
// Hand-written to reproduce Jinja2's lexer exactly (what it strips, which newline trim_blocks
// removes), since the rendered text must equal Jinja2's byte for byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::jinja {

enum class Tok : uint8_t {
  kData,        // text between tags, already stripped as the tags ask
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,    // value: the decoded text
  kInteger,   // integer
  kFloat,     // real
  kOperator,  // value: the operator's text ("==", "(", "|", ...)
  kEof,
};

struct Token {
  Tok type;
  int line;  // 1-based, in the template as given
  std::string value;
  int64_t integer = 0;
  double real = 0;
};

// A one-line input error "chat template line N: what".
[[noreturn]] void fail_at(int line, const std::string& what);

// The text of a string literal whose body (between the quotes) is `body`, as Jinja2 decodes it;
// a bad escape is a one-line input error naming the line.
std::string decode_string_literal(std::string_view body, int line);

// The tokens of `source` (valid UTF-8), ending with kEof. A lexical error (an unclosed comment,
// an unexpected character, a bad string escape) is a one-line input error naming the line.
std::vector<Token> tokenize(const std::string& source);

}  // namespace gpt::jinja
