// Errors and the checks that raise them. Library code throws gpt::Error and never exits; the
// programs in launch/ catch it and end the run on every rank (docs/DESIGN.md "Bad input").
// One macro per library reports the failed call, its file and line and the library's own message.
// GPT_CHECK is for internal invariants (its error names the expression and source line);
// GPT_INPUT_CHECK is for bad input, and its message alone is the one-line text users see.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace gpt {

// What went wrong, already phrased for the user. `user_facing` errors (bad options, bad files)
// are printed as-is; internal failures carry the expression and source location as well.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] void fail(const char* expr, const char* file, int line, const std::string& msg);
// Bad input: the message alone, no source location (it names the option or file at fault).
[[noreturn]] void fail_input(const std::string& msg);

// Library error strings, looked up where the library headers are included.
std::string mpi_error_string(int code);

}  // namespace gpt

// Builds a message with stream syntax: GPT_MSG("--tp " << tp << " does not divide " << n).
#define GPT_MSG(stream_expr)    \
  ([&]() {                      \
    std::ostringstream gpt_os_; \
    gpt_os_ << stream_expr;     \
    return gpt_os_.str();       \
  }())

// An internal invariant; the message should still say what is wrong.
#define GPT_CHECK(cond, msg)                                           \
  do {                                                                 \
    if (!(cond)) ::gpt::fail(#cond, __FILE__, __LINE__, GPT_MSG(msg)); \
  } while (0)

// A rule the user's input broke: message only, printed as the program's one error line.
#define GPT_INPUT_CHECK(cond, msg)                \
  do {                                            \
    if (!(cond)) ::gpt::fail_input(GPT_MSG(msg)); \
  } while (0)

#define GPT_MPI_CHECK(call)                                                         \
  do {                                                                              \
    int gpt_mpi_rc_ = (call);                                                       \
    if (gpt_mpi_rc_ != 0)                                                           \
      ::gpt::fail(#call, __FILE__, __LINE__, ::gpt::mpi_error_string(gpt_mpi_rc_)); \
  } while (0)

// HDF5 calls return a negative value on failure.
#define GPT_H5_CHECK(call)                                                          \
  ([&]() {                                                                          \
    auto gpt_h5_rc_ = (call);                                                       \
    if (gpt_h5_rc_ < 0) ::gpt::fail(#call, __FILE__, __LINE__, "HDF5 call failed"); \
    return gpt_h5_rc_;                                                              \
  }())
