// Agreement on failures across the ranks of a communicator (docs/DESIGN.md "Bad input"): work that
// can fail on some ranks only (reading a file, allocating, writing a checkpoint) runs inside
// agree_on_failure, so every rank learns of any rank's failure before the next collective and
// ends alike instead of waiting forever for the failed one. The one place this protocol lives.
#pragma once

#include <functional>

#include <mpi.h>

#include "framework/check.h"

namespace gpt {

// Thrown on every rank by agree_on_failure: the ranks already know they all fail, so a program
// may end each of them cleanly (rank 0 prints the message) instead of aborting the job.
class AgreedError : public Error {
 public:
  using Error::Error;
};

// Runs `step` on every rank of `comm`; if it throws on any rank, every rank throws AgreedError
// carrying the lowest failing rank's message. Collective: every rank of comm must call it.
void agree_on_failure(MPI_Comm comm, const std::function<void()>& step);

// MPI_Comm_rank and MPI_Comm_size, checked.
int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);

}  // namespace gpt
