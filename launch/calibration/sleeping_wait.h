// MPI waits that sleep between polls, for `plan --calibrate` and `--calibrate-turns`: while some
// ranks measure, the others wait in these and leave the cores to them (a blocking MPI call spins,
// yielding only now and then, beside the measuring ranks when ranks share cores).
#pragma once

#include <mpi.h>

namespace gpt {

// Waits for `request`, sleeping between polls.
void sleep_until_done(MPI_Request& request);
// A barrier over `world`, waited for as sleep_until_done.
void sleeping_barrier(MPI_Comm world);
// Rank 0's `value` on every rank of `world`, waited for as sleep_until_done.
double sleeping_bcast(MPI_Comm world, double value);
// The sum over `world` of each rank's `value`, on every rank, waited for alike.
double sleeping_sum(MPI_Comm world, double value);

}  // namespace gpt
