// What every MPI program (train, eval, generate) does around its body: MPI start-up
// with the logger set to the global rank, one way to parse options, and docs/DESIGN.md's "Bad
// input" rules at the end. A failure agreed with agree_on_failure (framework/agreement.h) is
// printed once by rank 0 and every rank exits 1 cleanly; an error only some ranks saw, outside an
// agreement point, is printed by that rank, which then aborts the job so no rank waits in a
// collective.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <set>
#include <string>

#include <mpi.h>

#include "framework/agreement.h"

namespace gpt {

// Runs `body` (its return value is the exit code) inside MPI_Init/MPI_Finalize.
int run_program(int argc, char** argv, const std::function<int(int, char**)>& body);

// Parses the command line into the variables `desc` binds, then a `--config FILE` (INI-style
// name = value lines; the command line wins), then runs `check` on the result; agreed over
// world, so bad input ends every rank with one line. Every program has --help and --config,
// added here under `caption` (the program's one-line description). `given` (may be null)
// receives the long names of the options set explicitly. Returns false after --help (rank 0
// prints it): the program should then exit 0.
bool parse_options(MPI_Comm world, int argc, char** argv, const std::string& caption,
                   const boost::program_options::options_description& desc,
                   std::set<std::string>* given, const std::function<void()>& check);

}  // namespace gpt
