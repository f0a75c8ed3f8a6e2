// Helpers the C++ tests share: this process's world rank and size, and the check that a call
// fails with one user-facing line naming what was wrong (docs/DESIGN.md "Bad input").
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <mpi.h>

#include "framework/agreement.h"
#include "framework/check.h"

namespace gpt {

inline int world_rank() {
  return comm_rank(MPI_COMM_WORLD);
}
inline int world_size() {
  return comm_size(MPI_COMM_WORLD);
}

// Expects fn to throw gpt::Error whose one-line message contains every one of `parts`
// (GPT_SHOW_ERRORS=1 prints each message seen).
template <typename Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown; expected one mentioning " << parts.front();
  } catch (const Error& e) {
    const std::string message = e.what();
    if (std::getenv("GPT_SHOW_ERRORS") != nullptr) std::printf("error seen: %s\n", e.what());
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "message: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
  }
}

}  // namespace gpt
