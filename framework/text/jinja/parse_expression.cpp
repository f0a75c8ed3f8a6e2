// Expressions of the chat-template parser, rule for rule Jinja2's (see parser.h). Precedence from
// loosest: a if b else c; or; and; not; comparisons and in; + -; ~; * / // %; **; unary - +;
// then a primary with its .attr, [item] and (call) postfixes, filters and tests (those are in
// parse_postfix.cpp). Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>

#include "framework/check.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/parser.h"

namespace gpt::jinja {

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

// Counts `child` in the height of `parent` (evaluating and freeing an expression recurse once
// per level, and a loop like a.b.c... or a + b + c ... builds levels without nesting the parse).
ExprPtr counted(Expr& parent, ExprPtr child) {
  if (child) {
    parent.height = std::max(parent.height, child->height + 1);
    if (parent.height > kMaxExprHeight)
      fail_at(parent.line, GPT_MSG("an expression nested deeper than " << kMaxExprHeight));
  }
  return child;
}

void add_arg(Expr& parent, ExprPtr child) {
  parent.args.push_back(counted(parent, std::move(child)));
}

namespace {

ExprPtr binary(ExprKind kind, int line, ExprPtr left, ExprPtr right) {
  ExprPtr e = make_expr(kind, line);
  add_arg(*e, std::move(left));
  add_arg(*e, std::move(right));
  return e;
}

}  // namespace

ExprPtr Parser::parse_expression(bool with_condexpr) {
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  int line = current().line;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    ExprPtr expr2 = parse_or();
    ExprPtr expr3 = skip_name("else") ? parse_condexpr() : nullptr;
    ExprPtr e = make_expr(ExprKind::kCondExpr, line);
    add_arg(*e, std::move(expr1));
    add_arg(*e, std::move(expr2));
    add_arg(*e, std::move(expr3));
    expr1 = std::move(e);
    line = current().line;
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  int line = current().line;
  ExprPtr left = parse_and();
  while (skip_name("or")) {
    left = binary(ExprKind::kOr, line, std::move(left), parse_and());
    line = current().line;
  }
  return left;
}

ExprPtr Parser::parse_and() {
  int line = current().line;
  ExprPtr left = parse_not();
  while (skip_name("and")) {
    left = binary(ExprKind::kAnd, line, std::move(left), parse_not());
    line = current().line;
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (at_name("not")) {
    Nesting nesting(*this);
    ExprPtr e = make_expr(ExprKind::kNot, next().line);
    add_arg(*e, parse_not());
    return e;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  int line = current().line;
  ExprPtr first = parse_math1();
  ExprPtr e;
  while (true) {
    CompareOp op;
    const std::string& v = current().value;
    if (at(Tok::kOperator) &&
        (v == "==" || v == "!=" || v == "<" || v == "<=" || v == ">" || v == ">=")) {
      op = v == "=="   ? CompareOp::kEq
           : v == "!=" ? CompareOp::kNe
           : v == "<"  ? CompareOp::kLt
           : v == "<=" ? CompareOp::kLe
           : v == ">"  ? CompareOp::kGt
                       : CompareOp::kGe;
      next();
    } else if (skip_name("in")) {
      op = CompareOp::kIn;
    } else if (at_name("not") && look().type == Tok::kName && look().value == "in") {
      next();
      next();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    if (!e) {
      e = make_expr(ExprKind::kCompare, line);
      add_arg(*e, std::move(first));
    }
    e->compare_ops.push_back(op);
    add_arg(*e, parse_math1());
    e->line = line = current().line;  // Jinja2 gives a comparison the line after its last operand
  }
  return e ? std::move(e) : std::move(first);
}

ExprPtr Parser::parse_math1() {
  int line = current().line;
  ExprPtr left = parse_concat();
  while (at_op("+") || at_op("-")) {
    const BinaryOp op = next().value == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
    left = binary(ExprKind::kBinary, line, std::move(left), parse_concat());
    left->op = op;
    line = current().line;
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = current().line;
  ExprPtr first = parse_math2();
  if (!at_op("~")) return first;
  ExprPtr e = make_expr(ExprKind::kConcat, line);
  add_arg(*e, std::move(first));
  while (skip_op("~")) add_arg(*e, parse_math2());
  return e;
}

ExprPtr Parser::parse_math2() {
  int line = current().line;
  ExprPtr left = parse_pow();
  while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
    const std::string v = next().value;
    const BinaryOp op = v == "*"    ? BinaryOp::kMul
                        : v == "/"  ? BinaryOp::kDiv
                        : v == "//" ? BinaryOp::kFloorDiv
                                    : BinaryOp::kMod;
    left = binary(ExprKind::kBinary, line, std::move(left), parse_pow());
    left->op = op;
    line = current().line;
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  int line = current().line;
  ExprPtr left = parse_unary();
  while (skip_op("**")) {
    left = binary(ExprKind::kBinary, line, std::move(left), parse_unary());
    left->op = BinaryOp::kPow;
    line = current().line;
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Nesting nesting(*this);
  const int line = current().line;
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    node = make_expr(next().value == "-" ? ExprKind::kNeg : ExprKind::kPos, line);
    add_arg(*node, parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = current();
  ExprPtr node;
  if (t.type == Tok::kName) {
    if (t.value == "true" || t.value == "false" || t.value == "True" || t.value == "False") {
      node = make_expr(ExprKind::kLiteral, t.line);
      node->literal = Value::boolean(t.value == "true" || t.value == "True");
    } else if (t.value == "none" || t.value == "None") {
      node = make_expr(ExprKind::kLiteral, t.line);
      node->literal = Value::none();
    } else {
      node = make_expr(ExprKind::kName, t.line);
      node->name = t.value;
    }
    next();
  } else if (t.type == Tok::kString) {
    std::string text;
    const int line = t.line;
    while (at(Tok::kString)) text += next().value;  // adjacent strings are one
    node = make_expr(ExprKind::kLiteral, line);
    node->literal = Value::string(std::move(text));
  } else if (t.type == Tok::kInteger || t.type == Tok::kFloat) {
    node = make_expr(ExprKind::kLiteral, t.line);
    node->literal = t.type == Tok::kInteger ? Value::integer(t.integer) : Value::real(t.real);
    next();
  } else if (t.type == Tok::kOperator && t.value == "(") {
    next();
    node = parse_tuple(false, true, {}, true);
    expect_op(")");
  } else if (t.type == Tok::kOperator && t.value == "[") {
    node = parse_list();
  } else if (t.type == Tok::kOperator && t.value == "{") {
    node = parse_dict();
  } else {
    fail(t.line, "unexpected " + describe(t));
  }
  return node;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            std::initializer_list<const char*> extra_end_names,
                            bool explicit_parentheses) {
  int line = current().line;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  auto tuple_end = [&] {
    if (at(Tok::kVarEnd) || at(Tok::kBlockEnd) || at_op(")")) return true;
    for (const char* name : extra_end_names)
      if (at_name(name)) return true;
    return false;
  };
  while (true) {
    if (!args.empty()) expect_op(",");
    if (tuple_end()) break;
    args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (!at_op(",")) break;
    is_tuple = true;
    line = current().line;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parentheses)
      fail(current().line, "expected an expression, got " + describe(current()));
  }
  ExprPtr e = make_expr(ExprKind::kTuple, line);
  for (ExprPtr& a : args) add_arg(*e, std::move(a));
  return e;
}

ExprPtr Parser::parse_list() {
  ExprPtr e = make_expr(ExprKind::kList, next().line);
  while (!at_op("]")) {
    if (!e->args.empty()) expect_op(",");
    if (at_op("]")) break;
    add_arg(*e, parse_expression());
  }
  expect_op("]");
  return e;
}

ExprPtr Parser::parse_dict() {
  ExprPtr e = make_expr(ExprKind::kDict, next().line);
  while (!at_op("}")) {
    if (!e->args.empty()) expect_op(",");
    if (at_op("}")) break;
    add_arg(*e, parse_expression());
    expect_op(":");
    add_arg(*e, parse_expression());
  }
  expect_op("}");
  return e;
}

}  // namespace gpt::jinja
