// Python's iteration for the chat-template interpreter: iter() of each kind of value, list(),
// lazy generators, unpacking assignment, and the loop variable (see iteration.h).
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include "framework/text/jinja/iteration.h"

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {

Cursor Renderer::iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
      return [](Value&) { return false; };
    case Kind::kString: {
      scan(v.str().size());
      auto chars = std::make_shared<std::u32string>(to_code_points(v.str()));
      return [this, chars, i = size_t{0}](Value& out) mutable {
        if (i >= chars->size()) return false;
        out = text(to_utf8(chars->substr(i++, 1)));
        return true;
      };
    }
    case Kind::kDict: {
      const Value dict = v;
      return [dict, i = size_t{0}](Value& out) mutable {
        if (i >= dict.dict().entries.size()) return false;
        out = dict.dict().entries[i++].first;
        return true;
      };
    }
    case Kind::kIterator: {
      const Value it = v;
      return [it](Value& out) { return it.iter().next(out); };
    }
    default:
      if (v.is_sequence()) {
        const Value seq = v;  // a list's items are read live, as Python's list iterator does
        return [seq, i = size_t{0}](Value& out) mutable {
          if (i >= seq.items().size()) return false;
          out = seq.items()[i++];
          return true;
        };
      }
      if (v.is(Kind::kLoop)) unsupported("iteration over a loop variable");
      fail(GPT_MSG("'" << type_name(v) << "' object is not iterable"));
  }
}

std::vector<Value> Renderer::to_list(const Value& v) {
  if (v.is(Kind::kList) || v.is(Kind::kTuple)) return v.items();
  std::vector<Value> items;
  Cursor next = iterate(v);
  for (Value item; next(item);) {
    step();
    if (items.size() >= kMaxListItems)
      fail("a list of more than " + std::to_string(kMaxListItems) + " items");
    items.push_back(std::move(item));
  }
  charge(items.size() * sizeof(Value));
  return items;
}

Value Renderer::generator(const Value& source, Cursor next, const std::string& type_name) {
  auto it = std::make_shared<Iterator>();
  it->type_name = type_name;
  it->depth = depth_of(source) + 1;
  it->next = [this, next = std::move(next), done = false](Value& out) mutable {
    if (done) return false;
    Level level(*this, 0);  // errors inside name the line consuming the generator
    step();
    if (!next(out)) done = true;
    return !done;
  };
  return Value::iterator(std::move(it));
}

void Renderer::assign(const Target& t, const Value& v, Scope& scope) {
  if (!t.tuple && t.attr.empty()) {
    scope.set(t.name, v);
    return;
  }
  if (!t.attr.empty()) {
    const Value ns = lookup(t.name, scope);
    if (!ns.is(Kind::kNamespace)) fail("cannot assign attribute on non-namespace object");
    if (Value* old = ns.ns().find(t.attr))
      *old = v;
    else
      ns.ns().attrs.emplace_back(t.attr, v);
    return;
  }
  Cursor next = iterate(v);
  std::vector<Value> items;
  for (Value item; items.size() <= t.items.size() && next(item);) items.push_back(item);
  if (items.size() > t.items.size())
    fail("too many values to unpack (expected " + std::to_string(t.items.size()) + ")");
  if (items.size() < t.items.size())
    fail("not enough values to unpack (expected " + std::to_string(t.items.size()) + ", got " +
         std::to_string(items.size()) + ")");
  for (size_t i = 0; i < items.size(); ++i) assign(t.items[i], items[i], scope);
}

// --- the loop variable

bool LoopState::advance() {
  Value next;
  if (!ahead_.empty()) {
    next = std::move(ahead_.front());
    ahead_.pop_front();
  } else if (done_ || !source_(next)) {
    done_ = true;
    return false;
  }
  if (index0_ >= 0) {
    previous_ = std::move(current_);
    has_previous_ = true;
  }
  current_ = std::move(next);
  ++index0_;
  return true;
}

bool LoopState::peek(Value& out) {
  if (ahead_.empty()) {
    Value v;
    if (done_ || !source_(v)) {
      done_ = true;
      return false;
    }
    ahead_.push_back(std::move(v));
  }
  out = ahead_.front();
  return true;
}

int64_t LoopState::length() {
  if (!length_) {
    for (Value v; !done_ && source_(v);) {
      if (ahead_.size() >= kMaxListItems)
        fail("a loop of more than " + std::to_string(kMaxListItems) + " items");
      ahead_.push_back(std::move(v));
    }
    done_ = true;
    length_ = index0_ + 1 + static_cast<int64_t>(ahead_.size());
  }
  return *length_;
}

std::optional<std::string> LoopState::repr() const {
  auto* self = const_cast<LoopState*>(this);
  return GPT_MSG("<LoopContext " << index0_ + 1 << "/" << self->length() << ">");
}

std::optional<Value> LoopState::attribute(const std::string& name, const Value& self) {
  Value next;
  if (name == "index0") return Value::integer(index0_);
  if (name == "index") return Value::integer(index0_ + 1);
  if (name == "length") return Value::integer(length());
  if (name == "revindex") return Value::integer(length() - index0_);
  if (name == "revindex0") return Value::integer(length() - index0_ - 1);
  if (name == "first") return Value::boolean(index0_ == 0);
  if (name == "last") return Value::boolean(!peek(next));
  if (name == "depth") return Value::integer(1);
  if (name == "depth0") return Value::integer(0);
  if (name == "previtem")
    return has_previous_ ? previous_ : Value::undefined("there is no previous item");
  if (name == "nextitem") return peek(next) ? next : Value::undefined("there is no next item");
  if (name == "cycle" || name == "changed") return bound_method(self, name);
  return std::nullopt;
}

Value LoopState::call(const std::string& name, const Args& args) {
  if (!args.keywords.empty()) fail("loop." + name + "() takes no keyword arguments");
  if (name == "cycle") {
    if (args.positional.empty()) fail("no items for cycling given");
    return args.positional[static_cast<size_t>(index0_) % args.positional.size()];
  }
  const Value now = Value::sequence(Kind::kTuple, args.positional);
  if (last_changed_ && equal(*last_changed_, now)) return Value::boolean(false);
  last_changed_ = now;
  return Value::boolean(true);
}

}  // namespace gpt::jinja
