// Failure injection for the tests of error paths that no input reaches once the inputs that
// reached them are refused up front (an exception inside serve's step loop, or inside one
// request's handling): with the environment's GPT_FAILPOINT set to "NAME=VALUE", the pass of
// failpoint(NAME, VALUE) throws an Error naming it. "NAME=VALUE:stop" stops the process there
// instead (SIGSTOP to itself): a test then signals a run held at a known step, however fast the
// run, and continues it with SIGCONT. Stateless (the caller gives the value: a step, a request's
// number), so it needs no global; unset, a pass costs one getenv.
#pragma once

#include <cstdint>
#include <string_view>

namespace gpt {

void failpoint(std::string_view name, int64_t value);

}  // namespace gpt
