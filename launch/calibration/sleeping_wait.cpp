// MPI waits that sleep between polls (see sleeping_wait.h).
#include "launch/calibration/sleeping_wait.h"

#include <unistd.h>

#include "framework/check.h"

namespace gpt {

// 10 ms naps: a dozen waiting ranks polling every 2 ms took a few percent of the cores the
// others were timing on; a measurement's end waits at most one nap longer.
constexpr useconds_t kNapMicroseconds = 10000;

void sleep_until_done(MPI_Request& request) {
  for (int done = 0;;) {
    GPT_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    usleep(kNapMicroseconds);
  }
}

void sleeping_barrier(MPI_Comm world) {
  MPI_Request request;
  GPT_MPI_CHECK(MPI_Ibarrier(world, &request));
  sleep_until_done(request);
}

double sleeping_bcast(MPI_Comm world, double value) {
  MPI_Request request;
  GPT_MPI_CHECK(MPI_Ibcast(&value, 1, MPI_DOUBLE, 0, world, &request));
  sleep_until_done(request);
  return value;
}

double sleeping_sum(MPI_Comm world, double value) {
  // An all-reduce, not a reduce: a rank's part of a reduce can end before the others have given
  // theirs, and it would go on to the next blocking call, spinning beside the ranks still timing.
  double sum = 0;
  MPI_Request request;
  GPT_MPI_CHECK(MPI_Iallreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, world, &request));
  sleep_until_done(request);
  return sum;
}

}  // namespace gpt
