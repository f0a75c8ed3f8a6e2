// Raising gpt::Error with the call, file and line (internal) or the message alone (bad input).
#include "framework/check.h"

#include <mpi.h>

namespace gpt {

void fail(const char* expr, const char* file, int line, const std::string& msg) {
  std::ostringstream out;
  out << msg << " [" << expr << " at " << file << ":" << line << "]";
  throw Error(out.str());
}

void fail_input(const std::string& msg) {
  throw Error(msg);
}

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, length);
}

}  // namespace gpt
