// The loop variable of the chat-template interpreter (framework/text/jinja/), internal to it:
// Jinja2's LoopContext. It reads its items lazily, as Jinja2 does: loop.last and loop.nextitem
// look one item ahead, loop.length and loop.revindex read them all.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#pragma once

#include <deque>
#include <optional>
#include <string>

#include "framework/text/jinja/interpreter.h"

namespace gpt::jinja {

class LoopState : public Opaque {
 public:
  explicit LoopState(Cursor source) : source_(std::move(source)) {}

  bool advance();  // to the next item; false at the end
  const Value& current() const { return current_; }
  // loop.index, loop.last, ...; none for a name LoopContext does not have.
  std::optional<Value> attribute(const std::string& name, const Value& self);
  // loop.cycle(...) and loop.changed(...).
  Value call(const std::string& name, const Args& args);

  std::string type_name() const override { return "LoopContext"; }
  std::optional<std::string> repr() const override;

 private:
  bool peek(Value& out);
  int64_t length();

  Cursor source_;
  std::deque<Value> ahead_;  // read from source_, not yet reached
  bool done_ = false;
  int64_t index0_ = -1;
  std::optional<int64_t> length_;
  Value current_, previous_;
  bool has_previous_ = false;
  std::optional<Value> last_changed_;
};

}  // namespace gpt::jinja
