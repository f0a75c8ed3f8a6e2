// The global functions a chat template can call: Jinja2's range (with the sandbox's limit),
// dict and namespace, and transformers' raise_exception(message) and strftime_now(format)
// (datetime.now().strftime). lipsum, cycler and joiner exist (a template may test them) but are
// errors when called.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#include <ctime>

#include "framework/text/jinja/interpreter.h"
#include "framework/text/jinja/limits.h"
#include "framework/text/jinja/py_text.h"

namespace gpt::jinja {
namespace {

bool known_global(const std::string& name) {
  return name == "range" || name == "dict" || name == "namespace" || name == "raise_exception" ||
         name == "strftime_now" || name == "lipsum" || name == "cycler" || name == "joiner";
}

// datetime.now().strftime(format) for a naive local time: Python itself writes %f (the
// microseconds) and gives %z and %Z nothing, the C library the rest.
std::string py_strftime(const std::string& format, std::time_t seconds, long microseconds) {
  std::tm local{};
  localtime_r(&seconds, &local);
  std::string c_format;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 == format.size()) {
      c_format += format[i];
      continue;
    }
    const char next = format[++i];
    if (next == 'f') {
      char micro[24];
      std::snprintf(micro, sizeof micro, "%06ld", microseconds % 1000000);
      c_format += micro;
    } else if (next != 'z' && next != 'Z') {
      c_format += '%';
      c_format += next;
    }
  }
  if (c_format.empty()) return "";
  std::string out(256 + 4 * c_format.size(), '\0');
  while (true) {
    const size_t n = std::strftime(out.data(), out.size(), c_format.c_str(), &local);
    if (n > 0 || out.size() > 64 * (c_format.size() + 16)) {
      out.resize(n);
      return out;
    }
    out.resize(out.size() * 4);
  }
}

}  // namespace

std::optional<Value> Renderer::global(const std::string& name) {
  if (!known_global(name)) return std::nullopt;
  auto b = std::make_shared<Builtin>();
  b->name = name;
  return Value::object(Kind::kCallable, std::move(b));
}

Value Renderer::call_global(const std::string& name, const Args& args) {
  const std::string what = name + "()";
  const auto& p = args.positional;
  if (name == "range") {
    if (!args.keywords.empty()) fail("range() takes no keyword arguments");
    if (p.empty() || p.size() > 3)
      fail("range expected at most 3 arguments, got " + std::to_string(p.size()));
    const int64_t a = as_index(p[0], what);
    const int64_t start = p.size() == 1 ? 0 : a;
    const int64_t stop = p.size() == 1 ? a : as_index(p[1], what);
    const int64_t step = p.size() == 3 ? as_index(p[2], what) : 1;
    if (step == 0) fail("range() arg 3 must not be zero");
    return Value::range(start, stop, step);
  }
  if (name == "dict" || name == "namespace") {
    if (p.size() > 1) fail(name + " expected at most 1 argument, got " + std::to_string(p.size()));
    auto d = std::make_shared<Dict>();
    if (!p.empty()) {
      if (p[0].is(Kind::kDict)) {
        *d = p[0].dict();
      } else {
        for (const Value& pair : to_list(p[0])) {
          const std::vector<Value> kv = to_list(pair);
          if (kv.size() != 2)
            fail("dictionary update sequence element has length " + std::to_string(kv.size()) +
                 "; 2 is required");
          if (!hashable(kv[0])) fail("unhashable type: '" + type_name(kv[0]) + "'");
          d->set(kv[0], kv[1]);
        }
      }
    }
    for (const auto& [k, v] : args.keywords) d->set(text(k), v);
    charge(d->entries.size() * 2 * sizeof(Value));
    if (name == "dict") return Value::dict(std::move(d));
    Namespace* ns = new_namespace();
    for (const auto& [k, v] : d->entries) {
      if (!k.is_string()) unsupported("a namespace attribute that is not a str");
      ns->attrs.emplace_back(k.str(), v);
    }
    return Value::namespace_ref(ns);
  }
  if (name == "raise_exception") {
    const Bound b(args, {"message"}, what);
    if (!b.get(0)) fail("raise_exception() missing 1 required positional argument: 'message'");
    fail("raise_exception: " + str(*b.get(0)));
  }
  if (name == "strftime_now") {
    const Bound b(args, {"format"}, what);
    if (!b.get(0)) fail("strftime_now() missing 1 required positional argument: 'format'");
    const std::string& format = as_text(*b.get(0), "strftime() argument 1");
    if (format.find('\0') != std::string::npos) fail("embedded null character");
    return text(py_strftime(format, now_.tv_sec, now_.tv_nsec / 1000));
  }
  unsupported("global function '" + name + "'");
}

}  // namespace gpt::jinja
