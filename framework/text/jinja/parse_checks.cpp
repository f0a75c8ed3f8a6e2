// The checks Jinja2 makes when it compiles a chat template, made here after parsing (see
// parser.h): a filter or test Jinja2 does not have (except inside an if or a conditional
// expression, where Jinja2 waits for the call), break or continue outside a loop, a for loop
// assigning to `loop`; and which of varargs, kwargs and caller a macro's body reads.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <set>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/jinja/parser.h"

namespace gpt::jinja {
namespace {

// Jinja2's own filters and tests (transformers adds tojson): a name outside these is refused when
// the template is compiled; one of these the interpreter lacks fails only if it is evaluated.
const std::set<std::string> kJinjaFilters = {
    "abs",       "attr",       "batch",       "capitalize", "center",  "count",
    "d",         "default",    "dictsort",    "e",          "escape",  "filesizeformat",
    "first",     "float",      "forceescape", "format",     "groupby", "indent",
    "int",       "join",       "last",        "length",     "list",    "lower",
    "items",     "map",        "min",         "max",        "pprint",  "random",
    "reject",    "rejectattr", "replace",     "reverse",    "round",   "safe",
    "select",    "selectattr", "slice",       "sort",       "string",  "striptags",
    "sum",       "title",      "trim",        "truncate",   "unique",  "upper",
    "urlencode", "urlize",     "wordcount",   "wordwrap",   "xmlattr", "tojson"};
const std::set<std::string> kJinjaTests = {
    "odd",     "even",   "divisibleby", "defined",  "undefined", "filter", "test",    "none",
    "boolean", "false",  "true",        "integer",  "float",     "lower",  "upper",   "string",
    "mapping", "number", "sequence",    "iterable", "callable",  "sameas", "escaped", "in",
    "==",      "eq",     "equalto",     "!=",       "ne",        ">",      "gt",      "greaterthan",
    "ge",      ">=",     "<",           "lt",       "lessthan",  "<=",     "le"};

// --- what Jinja2 checks at compile time

struct Frame {
  bool soft;     // inside an if or a conditional expression (an unknown filter waits)
  bool in_loop;  // break and continue allowed
};

void check_expr(const Expr* e, bool soft);

void check_exprs(const std::vector<ExprPtr>& exprs, bool soft) {
  for (const ExprPtr& e : exprs) check_expr(e.get(), soft);
}

void check_expr(const Expr* e, bool soft) {
  if (!e) return;
  if (e->kind == ExprKind::kCondExpr) soft = true;
  if (!soft && e->kind == ExprKind::kFilter && !is_jinja_filter(e->name))
    fail_at(e->line, "no filter named " + quoted_excerpt(e->name));
  if (!soft && e->kind == ExprKind::kTest && !is_jinja_test(e->name))
    fail_at(e->line, "no test named " + quoted_excerpt(e->name));
  check_exprs(e->args, soft);
  for (const Keyword& k : e->kwargs) check_expr(k.value.get(), soft);
  check_expr(e->star.get(), soft);
  check_expr(e->star_star.get(), soft);
}

void check_target(const Target& t) {
  if (t.name == "loop" && t.attr.empty())
    fail_at(t.line, "can't assign to the special loop variable in a for-loop target");
  for (const Target& item : t.items) check_target(item);
}

void check_body(const Body& body, Frame frame);

void check_macro(const MacroDef& m) {
  check_exprs(m.defaults, false);
  check_body(m.body, Frame{false, false});
}

void check_body(const Body& body, Frame frame) {
  for (const StmtPtr& s : body) {
    switch (s->kind) {
      case StmtKind::kIf:
        check_exprs(s->exprs, true);
        for (const Body& b : s->bodies) check_body(b, Frame{true, frame.in_loop});
        break;
      case StmtKind::kFor:
        check_target(s->targets[0]);
        check_expr(s->exprs[0].get(), frame.soft);
        if (s->exprs.size() > 1) check_expr(s->exprs[1].get(), false);
        check_body(s->bodies[0], Frame{false, true});
        check_body(s->bodies[1], Frame{false, frame.in_loop});
        break;
      case StmtKind::kMacro:
        check_macro(*s->macro);
        break;
      case StmtKind::kCallBlock:
        check_exprs(s->exprs, frame.soft);
        check_macro(*s->macro);
        break;
      case StmtKind::kGeneration:
        check_body(s->bodies[0], Frame{false, false});
        break;
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        if (!frame.in_loop)
          fail_at(s->line, std::string("'") + (s->kind == StmtKind::kBreak ? "break" : "continue") +
                               "' outside a loop");
        break;
      default:  // text, print, set, set block, filter block, with
        check_exprs(s->exprs, frame.soft);
        check_expr(s->filter.get(), false);
        for (const Body& b : s->bodies) check_body(b, Frame{false, frame.in_loop});
    }
  }
}

// Whether a macro's body reads varargs, kwargs or caller (then calls may pass them).
void find_special_names(const Expr* e, MacroDef& m) {
  if (!e) return;
  if (e->kind == ExprKind::kName) {
    m.uses_varargs = m.uses_varargs || e->name == "varargs";
    m.uses_kwargs = m.uses_kwargs || e->name == "kwargs";
    m.uses_caller = m.uses_caller || e->name == "caller";
  }
  for (const ExprPtr& a : e->args) find_special_names(a.get(), m);
  for (const Keyword& k : e->kwargs) find_special_names(k.value.get(), m);
  find_special_names(e->star.get(), m);
  find_special_names(e->star_star.get(), m);
}

}  // namespace

bool is_jinja_filter(const std::string& name) {
  return kJinjaFilters.count(name) > 0;
}

bool is_jinja_test(const std::string& name) {
  return kJinjaTests.count(name) > 0;
}

void check_template(const Body& body) {
  check_body(body, Frame{false, false});
}

void find_special_names(const Body& body, MacroDef& m) {
  for (const StmtPtr& s : body) {
    for (const ExprPtr& e : s->exprs) find_special_names(e.get(), m);
    find_special_names(s->filter.get(), m);
    for (const Body& b : s->bodies) find_special_names(b, m);
    if (s->macro) {
      for (const ExprPtr& e : s->macro->defaults) find_special_names(e.get(), m);
      find_special_names(s->macro->body, m);
    }
  }
}

}  // namespace gpt::jinja
