// GoogleTest main for every test binary: initialises MPI, prints results on rank 0 only, and
// makes every rank exit with the same code (any rank's failure fails all), so mpiexec reports a
// failure once and no rank is left waiting.
#include <gtest/gtest.h>
#include <mpi.h>

#include "framework/logging.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  gpt::log::set_rank(rank, world);
  gpt::log::set_quiet(true);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed && local_failed && rank != 0)
    std::fprintf(stderr, "rank %d: test failures (see its assertions above)\n", rank);
  MPI_Finalize();
  return any_failed;
}
