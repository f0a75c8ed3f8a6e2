// How the chat-template interpreter (framework/text/jinja/) reports an error: code deep in an
// operation throws Failure with what went wrong ("'dict object' has no attribute 'x'"); the
// renderer knows which template line it was evaluating and turns it into the one-line input error
// "chat template line N: ..." (Renderer::render). A Failure never leaves the interpreter.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#pragma once

#include <stdexcept>
#include <string>

namespace gpt::jinja {

struct Failure : std::runtime_error {
  explicit Failure(const std::string& what) : std::runtime_error(what) {}
};

[[noreturn]] inline void fail(const std::string& what) {
  throw Failure(what);
}

// A construct Jinja2 has and this interpreter does not: "unsupported filter 'xmlattr'".
[[noreturn]] inline void unsupported(const std::string& what) {
  throw Failure("unsupported " + what);
}

}  // namespace gpt::jinja
