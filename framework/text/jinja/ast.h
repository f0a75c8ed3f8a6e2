// The parsed chat template (framework/text/jinja/): expressions and statements as Jinja2's parser
// builds them (jinja2.nodes), reduced to what the interpreter evaluates. Each node keeps its
// template line for messages.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framework/text/jinja/value.h"

namespace gpt::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind : uint8_t {
  kLiteral,   // literal
  kName,      // name
  kList,      // args: the items
  kTuple,     // args: the items
  kDict,      // args: key, value, key, value, ...
  kGetattr,   // args[0].name
  kGetitem,   // args[0][args[1]]
  kSlice,     // a subscript's start:stop:step; args: three, null where missing
  kCall,      // args[0](args[1...], kwargs, *star, **star_star)
  kFilter,    // args[0] | name(args[1...], kwargs); args[0] null in filter and set blocks
  kTest,      // args[0] is name(args[1...], kwargs)
  kNeg,       // -args[0]
  kPos,       // +args[0]
  kNot,       // not args[0]
  kAnd,       // args[0] and args[1]
  kOr,        // args[0] or args[1]
  kBinary,    // args[0] op args[1]
  kConcat,    // args[0] ~ args[1] ~ ...
  kCompare,   // args[0] compare_ops[0] args[1] compare_ops[1] args[2] ...
  kCondExpr,  // args[0] if args[1] else args[2] (null: no else)
};

enum class BinaryOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Expr {
  ExprKind kind;
  int line;
  int height = 1;  // of the tree below, at most kMaxExprHeight
  Value literal;
  std::string name;
  BinaryOp op = BinaryOp::kAdd;
  std::vector<ExprPtr> args;
  std::vector<Keyword> kwargs;
  std::vector<CompareOp> compare_ops;
  ExprPtr star, star_star;  // kCall, kFilter, kTest: *args and **kwargs
  // kBinary **: Jinja2's optimizer folds a constant left operand to its value and its compiler
  // writes a negative one without parentheses, so Python reads `-2 ** x` as -(2 ** x) when the
  // right operand is not constant too (then both fold first and the sign stays with the base).
  bool negative_base_quirk = false;
};

// What a for loop or set assigns to: a name, a namespace's attribute (ns.attr), or a tuple.
struct Target {
  std::string name;
  std::string attr;           // non-empty: name.attr of a namespace
  std::vector<Target> items;  // a tuple's
  bool tuple = false;
  int line = 0;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // of the last defaults.size() params
  Body body;
  // Whether the body reads these names (Jinja2 then lets calls pass extra arguments or a caller).
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

enum class StmtKind : uint8_t {
  kText,         // text
  kPrint,        // {{ exprs[0] }} or {% print exprs... %}
  kIf,           // exprs: the if's and each elif's test; bodies: one each, then the else
  kFor,          // targets[0] in exprs[0] [if exprs[1]]; bodies: the loop, the else
  kSet,          // targets[0] = exprs[0]
  kSetBlock,     // targets[0] = bodies[0] rendered, through `filter` when not null
  kMacro,        // macro
  kCallBlock,    // exprs[0] (a call) given macro as its caller
  kFilterBlock,  // bodies[0] rendered through `filter`
  kWith,         // targets = exprs, then bodies[0] in a new scope
  kBreak,
  kContinue,
  kGeneration,  // transformers' {% generation %}: bodies[0] rendered as is
};

struct Stmt {
  StmtKind kind;
  int line;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Target> targets;
  std::vector<Body> bodies;
  ExprPtr filter;
  std::unique_ptr<MacroDef> macro;
};

// Whether Jinja2 (with transformers' tojson) has a filter or a test of that name.
bool is_jinja_filter(const std::string& name);
bool is_jinja_test(const std::string& name);

// The statements of `source`; a syntax error, or a filter or test Jinja2 does not have (outside
// an if, as Jinja2 checks at compile time), is a one-line input error naming the line.
Body parse_template(const std::string& source);

}  // namespace gpt::jinja
