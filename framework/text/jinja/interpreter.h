// The chat-template interpreter (framework/text/jinja/), internal to it: renders a parsed template
// as Jinja2's compiled code would, in the environment transformers sets up (an
// ImmutableSandboxedEnvironment with autoescape off). Scopes follow Jinja2's frames: a for loop's
// body gets a fresh scope each iteration, macros, call blocks, with, filter and set blocks get
// their own, if does not; a macro reads the scope it was defined in, as it is when called.
// Every rendering counts its steps, loop iterations and bytes made against limits.h.
//
// render.cpp: statements, loops, macros. evaluate.cpp: expressions, names, attributes, items,
// calls. operators.cpp: + - * / // % ** ~ == < in. iteration.cpp: Python's iter() and the loop
// variable. filters*.cpp, tests.cpp, methods.cpp, format.cpp, globals.cpp: what templates call.
// Hand-written: no C++ Jinja library is packaged for Debian, and the point is to reproduce
// Python's Jinja2 exactly (its scoping, Python's str, int and float semantics, its errors); the
// behaviour is checked against Jinja2 itself (tests/text/test_chat_template_vs_jinja2.py).
#pragma once

#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "framework/text/jinja/ast.h"
#include "framework/text/jinja/failure.h"
#include "framework/text/jinja/value.h"

namespace gpt::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
  Value* find(const std::string& name);  // this scope's own, or null
  void set(const std::string& name, Value v);
};

// A call's arguments, evaluated.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

// Arguments bound to a Python signature's parameters by position, then keyword; `what` names the
// callee in messages ("filter 'indent'"). Too many or unknown arguments fail as Python's TypeError.
class Bound {
 public:
  Bound(const Args& args, std::vector<const char*> names, const std::string& what);
  const Value* get(size_t i) const { return given_[i] ? &values_[i] : nullptr; }
  Value get_or(size_t i, Value fallback) const { return given_[i] ? values_[i] : fallback; }

 private:
  std::vector<Value> values_;
  std::vector<bool> given_;
};

// A global function (range, namespace, raise_exception, ...) or a method bound to its receiver
// (a str's, dict's, list's or the loop's): printing one would show an address in Python.
struct Builtin : Opaque {
  std::string name;
  std::optional<Value> receiver;  // a method's object
  std::string type_name() const override {
    return receiver ? "builtin_function_or_method" : "function";
  }
  std::optional<std::string> repr() const override { return std::nullopt; }
};

// Python's iter(): the next item, or false at the end.
using Cursor = std::function<bool(Value&)>;

enum class Flow : uint8_t { kNormal, kBreak, kContinue };

class Renderer {
 public:
  // `now`: the time strftime_now reads (the rendering's start, from the system clock).
  explicit Renderer(std::timespec now) : now_(now) {}
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Renders the template with `vars` (messages, tools, ...) in its root scope; a Failure becomes
  // the input error "chat template line N: ...".
  std::string render(const Body& body, std::vector<std::pair<std::string, Value>> vars);

  // --- the budget (limits.h)
  void step();
  void scan(size_t bytes);  // text about to be read through: kBytesPerStep bytes a step
  void scan_text(const Value& v, const Args& args);  // v's and the str arguments' text
  void count_iteration();
  void charge(size_t bytes);
  Value text(std::string s, bool markup = false);  // a new string, its bytes charged
  Value list(std::vector<Value> items, Kind kind = Kind::kList);
  std::string str(const Value& v);  // str(v), charged
  std::string repr(const Value& v);
  Namespace* new_namespace();  // owned by the rendering

  // --- expressions (evaluate.cpp)
  Value eval(const Expr& e, Scope& scope);
  // Jinja2's sandboxed getattr (obj.name: the attribute, else the item) and getitem (obj[key]:
  // the item, else the attribute); an undefined value, saying why, when neither exists.
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  // The attribute alone (the attr filter's lookup); `found` false when Python has none.
  Value attribute(const Value& obj, const std::string& name, bool& found);
  // make_attrgetter's lookup of "a.b.0" (dotted, digits as indexes), as filters take `attribute`;
  // an undefined step becomes `fallback` when one is given.
  Value attribute_path(const Value& item, const Value& path, const Value* fallback = nullptr);
  Value call(const Value& callee, Args args);

  // --- operators (operators.cpp)
  Value binary(BinaryOp op, const Value& a, const Value& b);
  bool compare(CompareOp op, const Value& a, const Value& b);
  bool contains(const Value& container, const Value& item);
  Value negate(const Value& v, bool minus);

  // --- iteration (iteration.cpp)
  Cursor iterate(const Value& v);
  std::vector<Value> to_list(const Value& v);
  // A lazy generator yielding what `next` gives, one level deeper than `source`.
  Value generator(const Value& source, Cursor next, const std::string& type_name = "generator");
  void assign(const Target& t, const Value& v, Scope& scope);

  // --- what templates call (filters*.cpp, tests.cpp, methods.cpp, format.cpp, globals.cpp)
  Value filter(const std::string& name, const Value& v, const Args& args);
  std::optional<Value> sequence_filter(const std::string& name, const Value& v, const Args& args);
  bool test(const std::string& name, const Value& v, const Args& args);
  // obj.name as a method of a str, dict, list, tuple or loop: the bound method, an unsafe
  // undefined (a mutating one the sandbox refuses), or none when the type has no such attribute.
  std::optional<Value> method(const Value& obj, const std::string& name);
  Value call_method(const Value& obj, const std::string& name, const Args& args);
  Value percent_format(const Value& format, const Value& args);  // str % args
  Value str_format(const Value& format, const Args& args);       // str.format
  std::optional<Value> global(const std::string& name);
  Value call_global(const std::string& name, const Args& args);

  // Counts one level of evaluation (kMaxEvalDepth) and keeps the line of the node being
  // evaluated; on the way out the line is restored unless an error is unwinding, so a Failure's
  // message names the innermost line.
  class Level {
   public:
    Level(Renderer& r, int line);
    ~Level();
    Level(const Level&) = delete;
    Level& operator=(const Level&) = delete;

   private:
    Renderer& r_;
    int saved_line_;
    int uncaught_;
  };

 private:
  Flow exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_stmt(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  std::string render_block(const Body& body, const std::shared_ptr<Scope>& parent, Flow& flow);
  void append(std::string& out, std::string_view piece);
  Value make_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure);
  Value call_macro_value(const Value& macro, Args args);
  Value lookup(const std::string& name, Scope& scope);
  Value eval_node(const Expr& e, Scope& scope);
  Value eval_call(const Expr& e, Scope& scope, std::optional<Value> caller = std::nullopt);
  Args eval_args(const Expr& e, size_t first, Scope& scope);
  Value eval_slice(const Value& obj, const Expr& s, Scope& scope);

  std::timespec now_;
  int line_ = 0;
  int eval_depth_ = 0;
  int call_depth_ = 0;
  int64_t steps_ = 0, iterations_ = 0, produced_ = 0;
  Value block_value_;  // a filter or set block's text: the operand of its filter chain
  std::vector<std::unique_ptr<Namespace>> namespaces_;
  std::vector<std::shared_ptr<Scope>> pinned_;  // the scopes macros were defined in
};

bool is_macro(const Value& v);
// Python's index of a sequence: an int or bool, else TypeError naming `what`.
int64_t as_index(const Value& v, const std::string& what);
// A str argument (TypeError naming `what` otherwise).
const std::string& as_text(const Value& v, const std::string& what);
// Whether Python can hash v (a dict key, a set member).
bool hashable(const Value& v);
// A method value bound to `receiver`.
Value bound_method(const Value& receiver, const std::string& name);

}  // namespace gpt::jinja
