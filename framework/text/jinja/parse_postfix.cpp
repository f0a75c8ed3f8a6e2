// Postfixes of the chat-template parser's expressions, rule for rule Jinja2's (see parser.h):
// .attr and [item] (slices too), calls with their arguments (keywords, *args, **kwargs), filters
// and tests. Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include "framework/check.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/parser.h"

namespace gpt::jinja {
namespace {

ExprPtr getitem(int line, ExprPtr node, ExprPtr index) {
  ExprPtr e = make_expr(ExprKind::kGetitem, line);
  add_arg(*e, std::move(node));
  add_arg(*e, std::move(index));
  return e;
}

}  // namespace

ExprPtr Parser::parse_call(ExprPtr callee) {
  ExprPtr call = make_expr(ExprKind::kCall, current().line);
  add_arg(*call, std::move(callee));
  parse_call_args(*call);
  return call;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_op(".") || at_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      node = parse_filter(std::move(node));
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token token = next();
  if (token.value == ".") {
    const Token attr = next();
    if (attr.type == Tok::kName) {
      ExprPtr e = make_expr(ExprKind::kGetattr, token.line);
      e->name = attr.value;
      add_arg(*e, std::move(node));
      return e;
    }
    if (attr.type != Tok::kInteger) fail(attr.line, "expected name or number");
    ExprPtr index = make_expr(ExprKind::kLiteral, attr.line);
    index->literal = Value::integer(attr.integer);
    return getitem(token.line, std::move(node), std::move(index));
  }
  std::vector<ExprPtr> args;
  while (!at_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  ExprPtr index;
  if (args.size() == 1) {
    index = std::move(args[0]);
  } else {
    index = make_expr(ExprKind::kTuple, token.line);
    for (ExprPtr& a : args) add_arg(*index, std::move(a));
  }
  return getitem(token.line, std::move(node), std::move(index));
}

ExprPtr Parser::parse_subscribed() {
  const int line = current().line;
  std::vector<ExprPtr> args;
  if (skip_op(":")) {
    args.push_back(nullptr);
  } else {
    ExprPtr node = parse_expression();
    if (!skip_op(":")) return node;
    args.push_back(std::move(node));
  }
  if (at_op(":") || at_op("]") || at_op(","))
    args.push_back(nullptr);
  else
    args.push_back(parse_expression());
  if (skip_op(":"))
    args.push_back(at_op("]") || at_op(",") ? nullptr : parse_expression());
  else
    args.push_back(nullptr);
  ExprPtr e = make_expr(ExprKind::kSlice, line);
  for (ExprPtr& a : args) add_arg(*e, std::move(a));
  return e;
}

void Parser::parse_call_args(Expr& call) {
  const int line = current().line;
  expect_op("(");
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) fail(line, "invalid syntax for function call expression");
  };
  while (!at_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (at_op(")")) break;  // a trailing comma
    }
    if (skip_op("*")) {
      ensure(!call.star && !call.star_star);
      call.star = counted(call, parse_expression());
    } else if (skip_op("**")) {
      ensure(!call.star_star);
      call.star_star = counted(call, parse_expression());
    } else if (at(Tok::kName) && look().type == Tok::kOperator && look().value == "=") {
      ensure(!call.star_star);
      std::string key = next().value;
      next();
      call.kwargs.push_back(Keyword{std::move(key), counted(call, parse_expression())});
    } else {
      ensure(!call.star && !call.star_star && call.kwargs.empty());
      add_arg(call, parse_expression());
    }
    require_comma = true;
  }
  expect_op(")");
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (at_op("|") || start_inline) {
    if (!start_inline) next();
    const Token& name = expect(Tok::kName, "a filter name");
    ExprPtr e = make_expr(ExprKind::kFilter, name.line);
    e->name = name.value;
    while (skip_op(".")) (e->name += '.') += expect(Tok::kName, "a name").value;
    add_arg(*e, std::move(node));
    if (at_op("(")) parse_call_args(*e);
    node = std::move(e);
    start_inline = false;
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const int line = next().line;  // "is"
  const bool negated = skip_name("not");
  ExprPtr e = make_expr(ExprKind::kTest, line);
  e->name = expect(Tok::kName, "a test name").value;
  while (skip_op(".")) (e->name += '.') += expect(Tok::kName, "a name").value;
  add_arg(*e, std::move(node));
  const Token& t = current();
  const bool operand_starts = t.type == Tok::kName || t.type == Tok::kString ||
                              t.type == Tok::kInteger || t.type == Tok::kFloat ||
                              (t.type == Tok::kOperator && (t.value == "[" || t.value == "{"));
  if (at_op("(")) {
    parse_call_args(*e);
  } else if (operand_starts && !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) fail(t.line, "you cannot chain multiple tests with is");
    add_arg(*e, parse_postfix(parse_primary()));
  }
  if (!negated) return e;
  ExprPtr n = make_expr(ExprKind::kNot, line);
  add_arg(*n, std::move(e));
  return n;
}

}  // namespace gpt::jinja
