// What every program (train, eval, generate) does around its body: MPI start-up with the logger
// set to the global rank, and DESIGN.md's "Bad input" rules at the end. A gpt::Error thrown alike
// on every rank (option checks, or a failure agreed with agree_on_failure) is printed once by
// rank 0 and every rank exits 1 cleanly; an error only some ranks saw, outside an agreement
// point, is printed by that rank, which then aborts the job so no rank waits in a collective.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <string>

#include <mpi.h>

#include "framework/check.h"

namespace gpt {

// Thrown on every rank after agree_on_failure: the ranks already know they all fail.
class AgreedError : public Error {
 public:
  using Error::Error;
};

// Runs `body` (its return value is the exit code) inside MPI_Init/MPI_Finalize.
int run_program(int argc, char** argv, const std::function<int(int, char**)>& body);

// Parses a tool's command line (eval, generate) into the variables desc binds; a Boost error
// becomes the one-line input error. Returns whether --help was given.
bool parse_tool_options(int argc, char** argv,
                        const boost::program_options::options_description& desc);

// Runs `step` on every rank of `comm`; if it throws on any rank, every rank throws AgreedError
// carrying the lowest failing rank's message. Use it around work that can fail on some ranks
// only (reading a file, allocating), before the next collective.
void agree_on_failure(MPI_Comm comm, const std::function<void()>& step);

}  // namespace gpt
