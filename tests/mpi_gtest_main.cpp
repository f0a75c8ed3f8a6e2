// GoogleTest main for every test binary: initialises MPI, prints the full results on rank 0 and
// only the failed assertions on the other ranks (prefixed by their rank), and makes every rank
// exit with the same code (any rank's failure fails all), so mpiexec reports a failure once and
// no rank is left waiting.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "framework/io/hdf5_util.h"
#include "framework/logging.h"

namespace {

// The other ranks' printer: their failures, each with the test and the rank it happened on.
class FailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::fprintf(stderr, "rank %d: %s.%s: %s:%d: %s\n", rank_,
                 test != nullptr ? test->test_suite_name() : "?",
                 test != nullptr ? test->name() : "?",
                 result.file_name() != nullptr ? result.file_name() : "?", result.line_number(),
                 result.message());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  gpt::h5::configure_mpi_io_before_init();
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);  // as the programs
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  gpt::log::set_rank(rank, world);
  gpt::log::set_quiet(true);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_failed && local_failed && rank != 0)
    std::fprintf(stderr, "rank %d: test failures (its assertions above)\n", rank);
  MPI_Finalize();
  return any_failed;
}
