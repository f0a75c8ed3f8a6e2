// Statements: text, output, if, for, set, macros and call blocks, filter and set blocks, with,
// break and continue, and the budget every rendering is held to (see interpreter.h).
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>
#include <utility>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/iteration.h"
#include "framework/text/jinja/lexer.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

std::shared_ptr<Scope> child_of(const std::shared_ptr<Scope>& parent) {
  auto s = std::make_shared<Scope>();
  s->parent = parent;
  return s;
}

}  // namespace

Value* Scope::find(const std::string& name) {
  for (auto& [n, v] : vars)
    if (n == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  if (Value* old = find(name))
    *old = std::move(v);
  else
    vars.emplace_back(name, std::move(v));
}

Bound::Bound(const Args& args, std::vector<const char*> names, const std::string& what)
    : values_(names.size()), given_(names.size(), false) {
  if (args.positional.size() > names.size())
    fail(what + " takes at most " + std::to_string(names.size()) + " arguments (" +
         std::to_string(args.positional.size()) + " given)");
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    given_[i] = true;
  }
  for (const auto& keyword : args.keywords) {
    const std::string& key = keyword.first;
    const Value& value = keyword.second;
    const auto it =
        std::find_if(names.begin(), names.end(), [&](const char* n) { return key == n; });
    if (it == names.end())
      fail(what + " got an unexpected keyword argument " + quoted_excerpt(key));
    const auto i = static_cast<size_t>(it - names.begin());
    if (given_[i]) fail(what + " got multiple values for argument '" + key + "'");
    values_[i] = value;
    given_[i] = true;
  }
}

Renderer::Level::Level(Renderer& r, int line)
    : r_(r), saved_line_(r.line_), uncaught_(std::uncaught_exceptions()) {
  if (line > 0) r.line_ = line;
  if (++r.eval_depth_ > kMaxEvalDepth) {
    --r.eval_depth_;
    fail("the template recurses deeper than " + std::to_string(kMaxEvalDepth) + " levels");
  }
}

Renderer::Level::~Level() {
  --r_.eval_depth_;
  if (std::uncaught_exceptions() == uncaught_) r_.line_ = saved_line_;
}

void Renderer::step() {
  steps_ += 1 + std::exchange(value_work(), 0);
  if (steps_ > kMaxSteps)
    fail("the template ran more than " + std::to_string(kMaxSteps) + " steps");
}

void Renderer::scan(size_t bytes) {
  steps_ += static_cast<int64_t>(bytes / kBytesPerStep);
  step();
}

void Renderer::scan_text(const Value& v, const Args& args) {
  size_t bytes = v.is_string() ? v.str().size() : 0;
  for (const Value& a : args.positional)
    if (a.is_string()) bytes += a.str().size();
  for (const auto& [_, a] : args.keywords)
    if (a.is_string()) bytes += a.str().size();
  scan(bytes);
}

void Renderer::count_iteration() {
  if (++iterations_ > kMaxLoopIterations)
    fail("loops ran more than " + std::to_string(kMaxLoopIterations) + " iterations");
}

void Renderer::charge(size_t bytes) {
  produced_ += static_cast<int64_t>(bytes);
  if (produced_ > kMaxProducedBytes)
    fail("the template made more than " + std::to_string(kMaxProducedBytes >> 20) +
         " MiB of strings and lists");
}

Value Renderer::text(std::string s, bool markup) {
  charge(s.size());
  return Value::string(std::move(s), markup);
}

Value Renderer::list(std::vector<Value> items, Kind kind) {
  charge(items.size() * sizeof(Value));
  return Value::sequence(kind, std::move(items));
}

std::string Renderer::str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string s = to_str(v, kMaxStringBytes);
  charge(s.size());
  return s;
}

std::string Renderer::repr(const Value& v) {
  std::string s;
  append_repr(s, v, kMaxStringBytes);
  charge(s.size());
  return s;
}

Namespace* Renderer::new_namespace() {
  namespaces_.push_back(std::make_unique<Namespace>());
  return namespaces_.back().get();
}

void Renderer::append(std::string& out, std::string_view piece) {
  if (out.size() + piece.size() > kMaxStringBytes)
    fail("the rendered text is longer than " + std::to_string(kMaxStringBytes) + " bytes");
  charge(piece.size());
  out += piece;
}

std::string Renderer::render(const Body& body, std::vector<std::pair<std::string, Value>> vars) {
  value_work() = 0;
  auto root = std::make_shared<Scope>();
  root->vars = std::move(vars);
  std::string out;
  try {
    exec(body, root, out);
  } catch (const Failure& f) {
    pinned_.clear();
    fail_at(line_, shown_excerpt(f.what(), 400));
  }
  pinned_.clear();
  return out;
}

Flow Renderer::exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
  for (const StmtPtr& s : body) {
    const Flow flow = exec_stmt(*s, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

// A block's text, rendered in a scope of its own; `flow` says whether a break or continue in it
// ended it (it then ends the enclosing loop's iteration too).
std::string Renderer::render_block(const Body& body, const std::shared_ptr<Scope>& parent,
                                   Flow& flow) {
  std::string text;
  flow = exec(body, child_of(parent), text);
  return text;
}

Flow Renderer::exec_stmt(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  Level level(*this, s.line);
  step();
  switch (s.kind) {
    case StmtKind::kText:
      append(out, s.text);
      return Flow::kNormal;
    case StmtKind::kPrint:
      for (const ExprPtr& e : s.exprs) append(out, str(eval(*e, *scope)));
      return Flow::kNormal;
    case StmtKind::kIf:
      for (size_t i = 0; i < s.exprs.size(); ++i)
        if (truthy(eval(*s.exprs[i], *scope))) return exec(s.bodies[i], scope, out);
      return s.bodies.size() > s.exprs.size() ? exec(s.bodies.back(), scope, out) : Flow::kNormal;
    case StmtKind::kFor:
      return exec_for(s, scope, out);
    case StmtKind::kSet:
      assign(s.targets[0], eval(*s.exprs[0], *scope), *scope);
      return Flow::kNormal;
    case StmtKind::kSetBlock:
    case StmtKind::kFilterBlock: {
      Flow flow;
      std::string body = render_block(s.bodies[0], scope, flow);
      if (flow != Flow::kNormal) return flow;
      Value v = text(std::move(body));
      if (s.filter) {
        block_value_ = v;
        v = eval(*s.filter, *scope);
      }
      if (s.kind == StmtKind::kSetBlock)
        assign(s.targets[0], v, *scope);
      else
        append(out, str(v));
      return Flow::kNormal;
    }
    case StmtKind::kMacro:
      scope->set(s.macro->name, make_macro(*s.macro, scope));
      return Flow::kNormal;
    case StmtKind::kCallBlock:
      append(out, str(eval_call(*s.exprs[0], *scope, make_macro(*s.macro, scope))));
      return Flow::kNormal;
    case StmtKind::kWith: {
      std::vector<Value> values;
      for (const ExprPtr& e : s.exprs) values.push_back(eval(*e, *scope));
      auto inner = child_of(scope);
      for (size_t i = 0; i < values.size(); ++i) assign(s.targets[i], values[i], *inner);
      return exec(s.bodies[0], inner, out);
    }
    case StmtKind::kGeneration: {
      Flow flow;
      append(out, render_block(s.bodies[0], scope, flow));
      return Flow::kNormal;
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

Flow Renderer::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  Cursor source = iterate(eval(*s.exprs[0], *scope));
  if (s.exprs.size() > 1) {  // for x in items if test: items filtered in a scope of their own
    const Expr* test = s.exprs[1].get();
    const Target* target = &s.targets[0];
    source = [this, source = std::move(source), test, target, scope](Value& item) {
      while (source(item)) {
        step();
        auto test_scope = child_of(scope);
        assign(*target, item, *test_scope);
        if (truthy(eval(*test, *test_scope))) return true;
      }
      return false;
    };
  }
  auto loop = std::make_shared<LoopState>(std::move(source));
  const Value loop_value = Value::object(Kind::kLoop, loop);
  bool iterated = false;
  while (loop->advance()) {
    count_iteration();
    iterated = true;
    auto body_scope = child_of(scope);
    body_scope->set("loop", loop_value);
    assign(s.targets[0], loop->current(), *body_scope);
    if (exec(s.bodies[0], body_scope, out) == Flow::kBreak) break;
  }
  if (!iterated) return exec(s.bodies[1], child_of(scope), out);
  return Flow::kNormal;
}

// --- macros

namespace {

struct MacroValue : Opaque {
  const MacroDef* def;
  std::weak_ptr<Scope> closure;  // pinned by the renderer for the rendering
  std::string type_name() const override { return "Macro"; }
  std::optional<std::string> repr() const override { return "<Macro " + py_repr(def->name) + ">"; }
};

}  // namespace

Value Renderer::make_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure) {
  pinned_.push_back(closure);
  auto m = std::make_shared<MacroValue>();
  m->def = &def;
  m->closure = closure;
  return Value::object(Kind::kCallable, std::move(m));
}

bool is_macro(const Value& v) {
  return v.is(Kind::kCallable) && dynamic_cast<const MacroValue*>(v.identity()) != nullptr;
}

// Jinja2's Macro.__call__: positional arguments first, then keywords for the rest; caller,
// varargs and kwargs only where the body reads them; a missing argument is its default
// (evaluated in the macro's scope, after every given one is bound) or undefined.
Value Renderer::call_macro_value(const Value& macro, Args args) {
  const auto& m = macro.as<MacroValue>();
  const MacroDef& def = *m.def;
  if (call_depth_ >= kMaxCallDepth)
    fail("macros nested deeper than " + std::to_string(kMaxCallDepth) + " calls");
  struct Depth {
    int& d;
    explicit Depth(int& depth) : d(++depth) {}
    ~Depth() { --d; }
  } depth(call_depth_);
  auto scope = child_of(m.closure.lock());
  const size_t n = def.params.size();
  auto take_keyword = [&](const std::string& name) -> std::optional<Value> {
    for (auto it = args.keywords.begin(); it != args.keywords.end(); ++it) {
      if (it->first != name) continue;
      Value v = std::move(it->second);
      args.keywords.erase(it);
      return v;
    }
    return std::nullopt;
  };
  std::vector<std::optional<Value>> values(n);
  for (size_t i = 0; i < n && i < args.positional.size(); ++i) values[i] = args.positional[i];
  bool found_caller = std::find(def.params.begin(), def.params.end(), "caller") != def.params.end();
  if (args.positional.size() < n) {
    found_caller = false;
    for (size_t i = args.positional.size(); i < n; ++i) {
      values[i] = take_keyword(def.params[i]);
      found_caller = found_caller || def.params[i] == "caller";
    }
  }
  if (def.uses_caller && !found_caller) {
    std::optional<Value> caller = take_keyword("caller");
    scope->set("caller", caller && !caller->is(Kind::kNone)
                             ? *caller
                             : Value::undefined("No caller defined"));
  }
  const std::string what = "macro '" + def.name + "'";
  if (def.uses_kwargs) {
    auto d = std::make_shared<Dict>();
    for (auto& [k, v] : args.keywords) d->set(text(k), std::move(v));
    scope->set("kwargs", Value::dict(std::move(d)));
  } else if (!args.keywords.empty()) {
    if (take_keyword("caller"))
      fail(what + " was invoked with two values for the special caller argument");
    fail(what + " takes no keyword argument " + quoted_excerpt(args.keywords.front().first));
  }
  if (def.uses_varargs) {
    std::vector<Value> rest;
    for (size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->set("varargs", list(std::move(rest), Kind::kTuple));
  } else if (args.positional.size() > n) {
    fail(what + " takes not more than " + std::to_string(n) + " argument(s)");
  }
  for (size_t i = 0; i < n; ++i)
    if (values[i]) scope->set(def.params[i], *values[i]);
  const size_t first_default = n - def.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (values[i]) continue;
    scope->set(def.params[i], i >= first_default ? eval(*def.defaults[i - first_default], *scope)
                                                 : Value::undefined("parameter '" + def.params[i] +
                                                                    "' was not provided"));
  }
  std::string out;
  exec(def.body, scope, out);
  return text(std::move(out));
}

}  // namespace gpt::jinja
