// The filters of Jinja2 over sequences (join, first, last, sort, unique, select, map, ...), each
// as jinja2/filters.py defines it. Those Jinja2 writes as generators (select, reject, selectattr,
// rejectattr, map, unique, items, batch, slice, and reverse of a sequence) are lazy here too: they
// do their work as they are consumed, can be consumed once, and print as an address in Python
// (an error here; |list makes them a list).
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <algorithm>
#include <unordered_set>
#include <utility>

#include "framework/check.h"
#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

// A key equal to Python's hash-and-== for the hashable values filters compare (unique's set):
// equal numbers share a key (1, 1.0, True), a str is its text.
std::optional<std::string> set_key(const Value& v) {
  switch (v.kind()) {
    case Kind::kString:
      return "s" + v.str();
    case Kind::kBool:
    case Kind::kInt:
      return GPT_MSG("n" << v.as_int());
    case Kind::kFloat: {
      const double f = v.as_float();
      if (f != f) return std::nullopt;  // NaN equals nothing
      if (f == static_cast<double>(static_cast<int64_t>(f)) && f > -0x1p63 && f < 0x1p63)
        return GPT_MSG("n" << static_cast<int64_t>(f));
      return GPT_MSG("f" << py_float_repr(f));
    }
    case Kind::kNone:
      return "none";
    case Kind::kUndefined:
      return "undefined";
    case Kind::kTuple: {
      std::string key = GPT_MSG("t" << v.items().size());
      for (const Value& item : v.items()) {
        const std::optional<std::string> k = set_key(item);
        if (!k) return std::nullopt;
        key += GPT_MSG(":" << k->size() << ":" << *k);
      }
      return key;
    }
    default: {  // objects hash by identity
      char buf[32];
      std::snprintf(buf, sizeof buf, "p%p", static_cast<const void*>(v.identity()));
      return std::string(buf);
    }
  }
}

// The items of (key, item) pairs sorted by key as Python's sorted(..., reverse) does: stable,
// and with reverse the equal keys still in their first order.
std::vector<Value> sorted_by_key(std::vector<std::pair<Value, Value>> keyed, bool reverse) {
  if (reverse) std::reverse(keyed.begin(), keyed.end());
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto& a, const auto& c) { return less(a.first, c.first); });
  if (reverse) std::reverse(keyed.begin(), keyed.end());
  std::vector<Value> out;
  for (auto& p : keyed) out.push_back(std::move(p.second));
  return out;
}

const char* reversed_type(const Value& v) {
  switch (v.kind()) {
    case Kind::kList:
      return "list_reverseiterator";
    case Kind::kRange:
      return "range_iterator";
    case Kind::kDict:
    case Kind::kDictKeys:
      return "dict_reversekeyiterator";
    case Kind::kDictValues:
      return "dict_reversevalueiterator";
    case Kind::kDictItems:
      return "dict_reverseitemiterator";
    default:
      return "reversed";
  }
}

}  // namespace

std::optional<Value> Renderer::sequence_filter(const std::string& name, const Value& v,
                                               const Args& args) {
  const std::string what = "filter '" + name + "'";
  auto bind = [&](std::vector<const char*> names) { return Bound(args, std::move(names), what); };
  // ignore_case: a str key compared lowercased unless case_sensitive.
  auto keyer = [this](bool case_sensitive) {
    return [this, case_sensitive](Value k) {
      return !case_sensitive && k.is_string() ? text(py_lower(k.str())) : k;
    };
  };
  if (name == "join") {
    const Bound b = bind({"d", "attribute"});
    const std::string separator = str(b.get_or(0, text("")));
    const Value attribute = b.get_or(1, Value::none());
    std::string out;
    bool first = true;
    for (const Value& item : to_list(v)) {
      if (!first) out += separator;
      first = false;
      out += str(attribute.is(Kind::kNone) ? item : attribute_path(item, attribute));
      if (out.size() > kMaxStringBytes) fail("join: the result is too long");
    }
    return text(std::move(out));
  }
  if (name == "first") {
    bind({});
    Value item;
    return iterate(v)(item) ? item : Value::undefined("No first item, sequence was empty.");
  }
  if (name == "last") {
    bind({});
    if (v.is_undefined()) return Value::undefined("No last item, sequence was empty.");
    if (v.is(Kind::kIterator) || !(v.is_string() || v.is_sequence() || v.is(Kind::kDict)))
      fail(GPT_MSG("'" << type_name(v) << "' object is not reversible"));
    std::vector<Value> items = to_list(v);
    return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
  }
  if (name == "list") {
    bind({});
    return list(to_list(v));
  }
  if (name == "reverse") {
    bind({});
    if (v.is_string()) {
      std::u32string cs = to_code_points(v.str());
      std::reverse(cs.begin(), cs.end());
      return text(to_utf8(cs), v.markup());
    }
    if (v.is(Kind::kIterator)) {
      std::vector<Value> items = to_list(v);
      std::reverse(items.begin(), items.end());
      return list(std::move(items));
    }
    if (!v.is_undefined() && !v.is_sequence() && !v.is(Kind::kDict))
      fail("argument must be iterable");
    auto items = std::make_shared<std::vector<Value>>(to_list(v));
    return generator(
        v,
        [items, i = items->size()](Value& out) mutable {
          if (i == 0) return false;
          out = (*items)[--i];
          return true;
        },
        reversed_type(v));
  }
  if (name == "items") {
    bind({});
    return generator(v, [this, v, next = Cursor(), started = false](Value& out) mutable {
      if (!started) {
        started = true;
        if (v.is_undefined()) return false;
        if (!v.is(Kind::kDict)) fail("Can only get item pairs from a mapping.");
        next = iterate(v);
      }
      Value key;
      if (!next || !next(key)) return false;
      out = list({key, *v.dict().find(key)}, Kind::kTuple);
      return true;
    });
  }
  if (name == "dictsort") {
    const Bound b = bind({"case_sensitive", "by", "reverse"});
    const Value by = b.get_or(1, text("key"));
    if (!by.is_string() || (by.str() != "key" && by.str() != "value"))
      fail("You can only sort by either \"key\" or \"value\"");
    if (!v.is(Kind::kDict))
      fail(v.is_undefined() ? v.why()
                            : GPT_MSG("'" << type_name(v) << "' object has no attribute 'items'"));
    const auto key_of = keyer(truthy(b.get_or(0, Value::boolean(false))));
    const size_t pos = by.str() == "key" ? 0 : 1;
    std::vector<std::pair<Value, Value>> keyed;  // (key, item)
    for (const auto& [k, x] : v.dict().entries)
      keyed.emplace_back(key_of(pos == 0 ? k : x), list({k, x}, Kind::kTuple));
    return list(sorted_by_key(std::move(keyed), truthy(b.get_or(2, Value::boolean(false)))));
  }
  if (name == "sort") {
    const Bound b = bind({"reverse", "case_sensitive", "attribute"});
    const auto key_of = keyer(truthy(b.get_or(1, Value::boolean(false))));
    const Value attribute = b.get_or(2, Value::none());
    std::vector<Value> paths;  // "age,name": sorted by age, then name
    const std::string comma = ",";
    if (attribute.is_string())
      for (std::string& p : py_split(attribute.str(), &comma, -1, false)) paths.push_back(text(p));
    else
      paths.push_back(attribute);
    std::vector<std::pair<Value, Value>> keyed;
    for (const Value& item : to_list(v)) {
      std::vector<Value> key;
      for (const Value& p : paths) key.push_back(key_of(attribute_path(item, p)));
      keyed.emplace_back(list(std::move(key)), item);
    }
    return list(sorted_by_key(std::move(keyed), truthy(b.get_or(0, Value::boolean(false)))));
  }
  if (name == "unique") {
    const Bound b = bind({"case_sensitive", "attribute"});
    const auto key_of = keyer(truthy(b.get_or(0, Value::boolean(false))));
    const Value attribute = b.get_or(1, Value::none());
    return generator(v, [this, next = iterate(v), key_of, attribute,
                         seen = std::unordered_set<std::string>()](Value& out) mutable {
      while (next(out)) {
        const Value key = key_of(attribute_path(out, attribute));
        if (!hashable(key)) fail("unhashable type: '" + type_name(key) + "'");
        const std::optional<std::string> k = set_key(key);
        if (!k || seen.insert(*k).second) return true;
      }
      return false;
    });
  }
  if (name == "min" || name == "max") {
    const Bound b = bind({"case_sensitive", "attribute"});
    const auto key_of = keyer(truthy(b.get_or(0, Value::boolean(false))));
    const Value attribute = b.get_or(1, Value::none());
    Cursor next = iterate(v);
    Value best;
    if (!next(best)) return Value::undefined("No aggregated item, sequence was empty.");
    Value best_key = key_of(attribute_path(best, attribute));
    for (Value item; next(item);) {
      step();
      Value key = key_of(attribute_path(item, attribute));
      if (order(key, best_key, name == "min" ? "<" : ">") == (name == "min" ? -1 : 1)) {
        best = item;
        best_key = key;
      }
    }
    return best;
  }
  if (name == "sum") {
    const Bound b = bind({"attribute", "start"});
    Value total = b.get_or(1, Value::integer(0));
    if (total.is_string()) fail("sum() can't sum strings [use ''.join(seq) instead]");
    const Value attribute = b.get_or(0, Value::none());
    for (const Value& item : to_list(v))
      total = binary(BinaryOp::kAdd, total, attribute_path(item, attribute));
    return total;
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attribute = name.ends_with("attr"), rejecting = name.starts_with("reject");
    return generator(v, [this, v, args, by_attribute, rejecting, next = Cursor(),
                         started = false](Value& out) mutable {
      if (!started) {
        started = true;
        if (!truthy(v)) return false;
        if (by_attribute && args.positional.empty()) fail("Missing parameter for attribute name");
        next = iterate(v);
      }
      if (!next) return false;
      const size_t off = by_attribute ? 1 : 0;
      Args test_args{{}, args.keywords};
      for (size_t i = off + 1; i < args.positional.size(); ++i)
        test_args.positional.push_back(args.positional[i]);
      while (next(out)) {
        const Value subject = by_attribute ? attribute_path(out, args.positional[0]) : out;
        const bool passed = args.positional.size() > off
                                ? test(str(args.positional[off]), subject, test_args)
                                : truthy(subject);
        if (passed != rejecting) return true;
      }
      return false;
    });
  }
  if (name == "map") {
    return generator(v, [this, v, args, next = Cursor(), started = false](Value& out) mutable {
      if (!started) {
        started = true;
        if (!truthy(v)) return false;
        if (args.positional.empty()) {
          bool has_attribute = false;
          for (const auto& [k, _] : args.keywords) {
            if (k != "attribute" && k != "default")
              fail("Unexpected keyword argument " + py_repr(k));
            has_attribute = has_attribute || k == "attribute";
          }
          if (!has_attribute) fail("map requires a filter argument");
        }
        next = iterate(v);
      }
      Value item;
      if (!next || !next(item)) return false;
      if (!args.positional.empty()) {
        Args rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()),
                  args.keywords};
        out = filter(str(args.positional[0]), item, rest);
        return true;
      }
      Value attribute, fallback = Value::none();
      for (const auto& [k, x] : args.keywords) (k == "attribute" ? attribute : fallback) = x;
      out = attribute_path(item, attribute, fallback.is(Kind::kNone) ? nullptr : &fallback);
      return true;
    });
  }
  if (name == "batch" || name == "slice") {
    const Bound b = bind({name == "batch" ? "linecount" : "slices", "fill_with"});
    if (!b.get(0)) fail(what + " takes a count");
    const int64_t n = as_index(*b.get(0), what);
    const Value fill = b.get_or(1, Value::none());
    if (name == "batch") {  // Python's loop: a full batch is given when the next item comes
      return generator(v, [this, next = iterate(v), n, fill, batch = std::vector<Value>(),
                           done = false](Value& out) mutable {
        for (Value item; !done;) {
          if (!next(item)) {
            done = true;
            break;
          }
          if (static_cast<int64_t>(batch.size()) == n) {
            out = list(std::exchange(batch, {item}));
            return true;
          }
          batch.push_back(std::move(item));
        }
        if (batch.empty()) return false;
        if (!fill.is(Kind::kNone))
          while (static_cast<int64_t>(batch.size()) < n && batch.size() < kMaxListItems)
            batch.push_back(fill);
        out = list(std::exchange(batch, {}));
        return true;
      });
    }
    if (n == 0) fail("integer division or modulo by zero");
    return generator(v, [this, v, n, fill, items = std::vector<Value>(), k = int64_t{0},
                         offset = int64_t{0}, started = false](Value& out) mutable {
      if (!started) {
        started = true;
        items = to_list(v);
      }
      if (k >= n) return false;
      if (n > static_cast<int64_t>(kMaxListItems)) fail("slice: too many slices");
      const auto length = static_cast<int64_t>(items.size());
      const int64_t per = length / n, extra = length % n;
      const int64_t start = offset + k * per;
      if (k < extra) ++offset;
      const int64_t end = offset + (k + 1) * per;
      std::vector<Value> part(items.begin() + start, items.begin() + end);
      if (!fill.is(Kind::kNone) && k >= extra) part.push_back(fill);
      ++k;
      out = list(std::move(part));
      return true;
    });
  }
  return std::nullopt;
}

}  // namespace gpt::jinja
