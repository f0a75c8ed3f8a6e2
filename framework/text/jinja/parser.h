// The chat-template parser (framework/text/jinja/), internal to it: a recursive-descent parser
// that mirrors Jinja2's (jinja2/parser.py) rule for rule, so that a template parses into the same
// structure (operator precedence, where a filter or test binds, what ends a tuple) and the same
// templates are refused. Statements are in parser.cpp, expressions in parse_expression.cpp and
// parse_postfix.cpp, the checks Jinja2 makes when it compiles in parse_checks.cpp.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "framework/text/jinja/ast.h"
#include "framework/text/jinja/lexer.h"

namespace gpt::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_all();

  // --- expressions (parse_expression.cpp)
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple(bool simplified = false, bool with_condexpr = true,
                      std::initializer_list<const char*> extra_end_names = {},
                      bool explicit_parentheses = false);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  // A chain of "| filter(args)" over `node` (null in filter and set blocks); with start_inline
  // the first filter comes without its '|'.
  ExprPtr parse_filter(ExprPtr node, bool start_inline = false);

 private:
  // --- statements (parser.cpp)
  Body subparse(std::initializer_list<const char*> end_names);
  Body parse_statements(std::initializer_list<const char*> end_names, bool drop_needle);
  StmtPtr parse_statement();
  StmtPtr parse_set(int line);
  StmtPtr parse_for(int line);
  StmtPtr parse_if(int line);
  StmtPtr parse_with(int line);
  StmtPtr parse_macro(int line);
  StmtPtr parse_call_block(int line);
  StmtPtr parse_print(int line);
  void parse_signature(MacroDef& def);
  void parse_macro_body(MacroDef& def, const char* end_name);
  Target parse_assign_target(bool with_tuple, bool name_only,
                             std::initializer_list<const char*> extra_end_names,
                             bool with_namespace);

  // --- expressions (parse_expression.cpp)
  ExprPtr parse_condexpr();
  ExprPtr parse_logic(ExprKind kind, const char* word, ExprPtr (Parser::*operand)());
  ExprPtr parse_arithmetic(std::initializer_list<std::pair<const char*, BinaryOp>> ops,
                           ExprPtr (Parser::*operand)());
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_unary_filtered();
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  void parse_call_args(Expr& call);
  ExprPtr parse_test(ExprPtr node);

 public:
  // --- the token stream
  const Token& current() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  const Token& next() { return tokens_[pos_ + 1 < tokens_.size() ? pos_++ : pos_]; }
  bool at(Tok type) const { return current().type == type; }
  bool at_name(const char* name) const { return at(Tok::kName) && current().value == name; }
  bool at_op(const char* op) const { return at(Tok::kOperator) && current().value == op; }
  bool skip_name(const char* name);
  bool skip_op(const char* op);
  const Token& expect(Tok type, const char* what);
  void expect_name(const char* name);
  void expect_op(const char* op);
  [[noreturn]] void fail(int line, const std::string& what) const;
  [[noreturn]] void fail_unexpected(const char* expected) const;
  // What a token is, as Jinja2's messages describe it.
  static std::string describe(const Token& t);

  // Counts the parse's nesting (kMaxParseDepth) while in scope.
  class Nesting {
   public:
    explicit Nesting(Parser& p);
    ~Nesting() { --p_.depth_; }
    Nesting(const Nesting&) = delete;
    Nesting& operator=(const Nesting&) = delete;

   private:
    Parser& p_;
  };

 private:
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
};

ExprPtr make_expr(ExprKind kind, int line);
// `child` counted in the height of `parent` (kMaxExprHeight), and appended to its args.
ExprPtr counted(Expr& parent, ExprPtr child);
void add_arg(Expr& parent, ExprPtr child);

// The checks Jinja2 makes when it compiles a template (parse_checks.cpp).
void check_template(const Body& body);
// Which of varargs, kwargs and caller the body of `m` reads (parse_checks.cpp).
void find_special_names(const Body& body, MacroDef& m);

}  // namespace gpt::jinja
