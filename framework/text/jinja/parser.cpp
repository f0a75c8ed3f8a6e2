// Statements of the chat-template parser, rule for rule Jinja2's (see parser.h; the checks Jinja2
// makes when it compiles are in parse_checks.cpp). Hand-written, like the rest of
// framework/text/jinja/ (see interpreter.h).
#include "framework/text/jinja/parser.h"

#include <algorithm>
#include <set>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/jinja/limits.h"

namespace gpt::jinja {
namespace {

StmtPtr make_stmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

Target target_of(const Expr& e) {
  Target t;
  t.line = e.line;
  if (e.kind == ExprKind::kName) {
    t.name = e.name;
  } else if (e.kind == ExprKind::kTuple) {
    t.tuple = true;
    for (const ExprPtr& item : e.args) t.items.push_back(target_of(*item));
  } else {
    fail_at(e.line, e.kind == ExprKind::kLiteral ? "can't assign to a constant"
                                                 : "can't assign to this expression");
  }
  return t;
}

}  // namespace

Parser::Nesting::Nesting(Parser& p) : p_(p) {
  if (++p_.depth_ > kMaxParseDepth)
    p_.fail(p_.current().line,
            "the template nests deeper than " + std::to_string(kMaxParseDepth) + " levels");
}

void Parser::fail(int line, const std::string& what) const {
  fail_at(line, what);
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case Tok::kName:
    case Tok::kOperator:
      return quoted_excerpt(t.value);
    case Tok::kString:
      return "a string";
    case Tok::kInteger:
      return "an integer";
    case Tok::kFloat:
      return "a float";
    case Tok::kBlockEnd:
      return "'%}'";
    case Tok::kVarEnd:
      return "'}}'";
    case Tok::kBlockBegin:
      return "'{%'";
    case Tok::kVarBegin:
      return "'{{'";
    case Tok::kData:
      return "template text";
    default:
      return "the end of the template";
  }
}

void Parser::fail_unexpected(const char* expected) const {
  fail(current().line, std::string("expected ") + expected + ", got " + describe(current()));
}

bool Parser::skip_name(const char* name) {
  if (!at_name(name)) return false;
  next();
  return true;
}

bool Parser::skip_op(const char* op) {
  if (!at_op(op)) return false;
  next();
  return true;
}

const Token& Parser::expect(Tok type, const char* what) {
  if (!at(type)) fail_unexpected(what);
  return next();
}

void Parser::expect_name(const char* name) {
  if (!at_name(name)) fail_unexpected(GPT_MSG("'" << name << "'").c_str());
  next();
}

void Parser::expect_op(const char* op) {
  if (!at_op(op)) fail_unexpected(GPT_MSG("'" << op << "'").c_str());
  next();
}

Body Parser::parse_all() {
  Body body = subparse({});
  check_template(body);
  return body;
}

Body Parser::subparse(std::initializer_list<const char*> end_names) {
  Nesting nesting(*this);
  Body body;
  while (!at(Tok::kEof)) {
    const Token& t = current();
    if (t.type == Tok::kData) {
      StmtPtr s = make_stmt(StmtKind::kText, t.line);
      s->text = next().value;
      body.push_back(std::move(s));
    } else if (t.type == Tok::kVarBegin) {
      StmtPtr s = make_stmt(StmtKind::kPrint, next().line);
      s->exprs.push_back(parse_tuple());
      expect(Tok::kVarEnd, "'}}'");
      body.push_back(std::move(s));
    } else {
      next();  // the block begins
      for (const char* name : end_names)
        if (at_name(name)) return body;
      body.push_back(parse_statement());
      expect(Tok::kBlockEnd, "'%}'");
    }
  }
  return body;
}

Body Parser::parse_statements(std::initializer_list<const char*> end_names, bool drop_needle) {
  skip_op(":");
  expect(Tok::kBlockEnd, "'%}'");
  Body body = subparse(end_names);
  if (at(Tok::kEof)) {
    std::string expected;
    for (const char* name : end_names)
      expected += (expected.empty() ? "'" : " or '") + std::string(name) + "'";
    fail(current().line, "unexpected end of template: expected " + expected);
  }
  if (drop_needle) next();
  return body;
}

StmtPtr Parser::parse_statement() {
  const Token& t = current();
  if (t.type != Tok::kName) fail(t.line, "tag name expected");
  const std::string tag = t.value;
  const int line = t.line;
  if (tag == "for") return parse_for(line);
  if (tag == "if") return parse_if(line);
  if (tag == "set") return parse_set(line);
  if (tag == "macro") return parse_macro(line);
  if (tag == "call") return parse_call_block(line);
  if (tag == "with") return parse_with(line);
  if (tag == "print") return parse_print(line);
  if (tag == "filter") {
    next();
    StmtPtr s = make_stmt(StmtKind::kFilterBlock, line);
    s->filter = parse_filter(nullptr, true);
    s->bodies.push_back(parse_statements({"endfilter"}, true));
    return s;
  }
  if (tag == "generation") {  // transformers' AssistantTracker extension
    next();
    StmtPtr s = make_stmt(StmtKind::kGeneration, line);
    s->bodies.push_back(parse_statements({"endgeneration"}, true));
    return s;
  }
  if (tag == "break" || tag == "continue") {  // the loopcontrols extension
    next();
    return make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
  }
  static const std::set<std::string> kUnsupported = {"block",  "extends", "include",
                                                     "import", "from",    "autoescape"};
  if (kUnsupported.count(tag)) fail(line, "unsupported tag '" + tag + "'");
  fail(line, "unknown tag " + quoted_excerpt(tag));
}

StmtPtr Parser::parse_set(int line) {
  next();
  Target target = parse_assign_target(true, false, {}, true);
  if (skip_op("=")) {
    StmtPtr s = make_stmt(StmtKind::kSet, line);
    s->targets.push_back(std::move(target));
    s->exprs.push_back(parse_tuple());
    return s;
  }
  StmtPtr s = make_stmt(StmtKind::kSetBlock, line);
  s->targets.push_back(std::move(target));
  s->filter = parse_filter(nullptr);
  s->bodies.push_back(parse_statements({"endset"}, true));
  return s;
}

StmtPtr Parser::parse_for(int line) {
  next();
  StmtPtr s = make_stmt(StmtKind::kFor, line);
  s->targets.push_back(parse_assign_target(true, false, {"in"}, false));
  expect_name("in");
  s->exprs.push_back(parse_tuple(false, false, {"recursive"}));
  if (skip_name("if")) s->exprs.push_back(parse_expression());
  if (at_name("recursive")) fail(current().line, "unsupported recursive for loop");
  s->bodies.push_back(parse_statements({"endfor", "else"}, false));
  if (next().value == "endfor")
    s->bodies.emplace_back();
  else
    s->bodies.push_back(parse_statements({"endfor"}, true));
  return s;
}

StmtPtr Parser::parse_if(int line) {
  next();
  StmtPtr s = make_stmt(StmtKind::kIf, line);
  while (true) {
    s->exprs.push_back(parse_tuple(false, false));
    s->bodies.push_back(parse_statements({"elif", "else", "endif"}, false));
    const std::string end = next().value;
    if (end == "elif") continue;
    if (end == "else") s->bodies.push_back(parse_statements({"endif"}, true));
    return s;
  }
}

StmtPtr Parser::parse_with(int line) {
  next();
  StmtPtr s = make_stmt(StmtKind::kWith, line);
  while (!at(Tok::kBlockEnd)) {
    if (!s->targets.empty()) expect_op(",");
    s->targets.push_back(parse_assign_target(true, false, {}, false));
    expect_op("=");
    s->exprs.push_back(parse_expression());
  }
  s->bodies.push_back(parse_statements({"endwith"}, true));
  return s;
}

void Parser::parse_signature(MacroDef& def) {
  expect_op("(");
  while (!at_op(")")) {
    if (!def.params.empty()) expect_op(",");
    def.params.push_back(parse_assign_target(false, true, {}, false).name);
    if (skip_op("="))
      def.defaults.push_back(parse_expression());
    else if (!def.defaults.empty())
      fail(current().line, "non-default argument follows default argument");
  }
  expect_op(")");
}

void Parser::parse_macro_body(MacroDef& def, const char* end_name) {
  def.body = parse_statements({end_name}, true);
  find_special_names(def.body, def);
}

StmtPtr Parser::parse_macro(int line) {
  next();
  StmtPtr s = make_stmt(StmtKind::kMacro, line);
  s->macro = std::make_unique<MacroDef>();
  s->macro->name = parse_assign_target(false, true, {}, false).name;
  parse_signature(*s->macro);
  parse_macro_body(*s->macro, "endmacro");
  return s;
}

StmtPtr Parser::parse_call_block(int line) {
  next();
  StmtPtr s = make_stmt(StmtKind::kCallBlock, line);
  s->macro = std::make_unique<MacroDef>();
  s->macro->name = "caller";
  if (at_op("(")) parse_signature(*s->macro);
  ExprPtr call = parse_expression();
  if (call->kind != ExprKind::kCall) fail(line, "expected a call after 'call'");
  s->exprs.push_back(std::move(call));
  parse_macro_body(*s->macro, "endcall");
  return s;
}

StmtPtr Parser::parse_print(int line) {
  next();
  StmtPtr s = make_stmt(StmtKind::kPrint, line);
  while (!at(Tok::kBlockEnd)) {
    if (!s->exprs.empty()) expect_op(",");
    s->exprs.push_back(parse_expression());
  }
  return s;
}

Target Parser::parse_assign_target(bool with_tuple, bool name_only,
                                   std::initializer_list<const char*> extra_end_names,
                                   bool with_namespace) {
  Target t;
  t.line = current().line;
  if (with_namespace && look().type == Tok::kOperator && look().value == ".") {
    t.name = expect(Tok::kName, "a name").value;
    next();
    t.attr = expect(Tok::kName, "an attribute name").value;
    return t;
  }
  if (name_only) {
    t.name = expect(Tok::kName, "a name").value;
    static const std::set<std::string> kConstants = {"true", "false", "none",
                                                     "True", "False", "None"};
    if (kConstants.count(t.name)) fail(t.line, "can't assign to a constant");
    return t;
  }
  ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end_names) : parse_primary();
  return target_of(*e);
}

Body parse_template(const std::string& source) {
  if (source.size() > kMaxTemplateBytes)
    fail_input("chat template: " + std::to_string(source.size()) + " bytes, more than the " +
               std::to_string(kMaxTemplateBytes) + " a template may have");
  return Parser(tokenize(source)).parse_all();
}

}  // namespace gpt::jinja
