// The logger, the project's one global: it knows this process's global rank so that messages can
// be printed once (rank 0) or by every rank with a "[rank r]" prefix. Writes to stderr for
// warnings and errors and to stdout for information; each line is written with a single call so
// lines from different ranks do not interleave mid-line.
#pragma once

#include <cstdio>
#include <string>

#include "framework/check.h"

namespace gpt::log {

void set_rank(int global_rank, int world_size);
int rank();
void set_quiet(bool quiet);  // silences info lines (tests)

// From now on rank 0's info and warning lines go to `stream` instead of stdout and stderr: the
// launcher's own stderr while it holds back the ranks' output (launch/runtime/signals.h).
void send_rank0_lines_to(std::FILE* stream);

void info0(const std::string& line);  // global rank 0 only
void info(const std::string& line);   // every rank, prefixed
void warn0(const std::string& line);  // global rank 0 only, "warning: "
void error(const std::string& line);  // every rank that calls it, "error: "

}  // namespace gpt::log

#define GPT_LOG0(stream_expr) ::gpt::log::info0(GPT_MSG(stream_expr))
#define GPT_WARN0(stream_expr) ::gpt::log::warn0(GPT_MSG(stream_expr))
