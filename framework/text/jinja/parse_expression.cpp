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

// Whether Jinja2's optimizer may fold `e` to a constant when it compiles the template (its
// nodes' as_const): literals and what is built of them, but not names, calls, or the filters
// that read the context (map, select, reject, selectattr, rejectattr, random).
bool foldable(const Expr* e) {
  if (!e) return true;
  switch (e->kind) {
    case ExprKind::kName:
    case ExprKind::kCall:
      return false;
    case ExprKind::kFilter:
      if (e->name == "map" || e->name == "select" || e->name == "reject" ||
          e->name == "selectattr" || e->name == "rejectattr" || e->name == "random" || !e->args[0])
        return false;
      break;
    default:
      break;
  }
  if (e->star || e->star_star) return false;
  for (const ExprPtr& a : e->args)
    if (!foldable(a.get())) return false;
  for (const Keyword& k : e->kwargs)
    if (!foldable(k.value.get())) return false;
  return true;
}

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

// `operand` (word operand)*, left-associative: or, and.
ExprPtr Parser::parse_logic(ExprKind kind, const char* word, ExprPtr (Parser::*operand)()) {
  int line = current().line;
  ExprPtr left = (this->*operand)();
  while (skip_name(word)) {
    left = binary(kind, line, std::move(left), (this->*operand)());
    line = current().line;
  }
  return left;
}

ExprPtr Parser::parse_or() {
  return parse_logic(ExprKind::kOr, "or", &Parser::parse_and);
}

ExprPtr Parser::parse_and() {
  return parse_logic(ExprKind::kAnd, "and", &Parser::parse_not);
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

// `operand` (op operand)*, left-associative, for the operators of `ops`: + -, * / // %, **.
ExprPtr Parser::parse_arithmetic(std::initializer_list<std::pair<const char*, BinaryOp>> ops,
                                 ExprPtr (Parser::*operand)()) {
  int line = current().line;
  ExprPtr left = (this->*operand)();
  while (true) {
    const auto op =
        std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return at_op(o.first); });
    if (op == ops.end()) return left;
    next();
    left = binary(ExprKind::kBinary, line, std::move(left), (this->*operand)());
    left->op = op->second;
    left->negative_base_quirk = left->op == BinaryOp::kPow && foldable(left->args[0].get()) &&
                                !foldable(left->args[1].get());
    line = current().line;
  }
}

ExprPtr Parser::parse_math1() {
  return parse_arithmetic({{"+", BinaryOp::kAdd}, {"-", BinaryOp::kSub}}, &Parser::parse_concat);
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
  return parse_arithmetic({{"*", BinaryOp::kMul},
                           {"/", BinaryOp::kDiv},
                           {"//", BinaryOp::kFloorDiv},
                           {"%", BinaryOp::kMod}},
                          &Parser::parse_pow);
}

ExprPtr Parser::parse_pow() {
  return parse_arithmetic({{"**", BinaryOp::kPow}}, &Parser::parse_unary_filtered);
}

ExprPtr Parser::parse_unary_filtered() {
  return parse_unary(true);
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
