// Tests of BackgroundProgress (parallel/background_progress.h): the helper tests the request
// while work() runs and never after overlap() returns, an exception from work() leaves no helper
// running, and a real non-blocking all-reduce overlapped with work gives the right sums. The
// programs' MPI thread level (SERIALIZED, tests/mpi_gtest_main.cpp) lets the helper run.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "parallel/background_progress.h"
#include "parallel/mpi_communicator.h"

namespace gpt {
namespace {

// Counts the helper's tests; wait() is never called by BackgroundProgress.
class CountingRequest final : public Request {
 public:
  void wait() override {}
  void progress() override { ++calls; }
  std::atomic<int> calls{0};
};

// Spins (no MPI) until the request has been tested `times` times, for at most 30 s.
void spin_until_tested(const CountingRequest& request, int times) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (request.calls < times && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
}

TEST(BackgroundProgress, TestsTheRequestOnlyWhileWorkRuns) {
  BackgroundProgress progress;
  for (int use = 0; use < 3; ++use) {  // the helper idles between uses and takes the next
    CountingRequest request;
    int ran = 0;
    progress.overlap(request, [&] {
      ++ran;
      spin_until_tested(request, 3);
    });
    EXPECT_EQ(ran, 1);
    ASSERT_GE(request.calls, 3) << "the helper never tested the request";
    const int after = request.calls;
    std::this_thread::sleep_for(5 * BackgroundProgress::kInterval);
    EXPECT_EQ(request.calls, after) << "tested after overlap() returned";
  }
}

TEST(BackgroundProgress, AThrowingWorkLeavesNoHelperRunning) {
  BackgroundProgress progress;
  CountingRequest request;
  EXPECT_THROW(progress.overlap(request,
                                [&] {
                                  spin_until_tested(request, 1);
                                  throw std::runtime_error("work failed");
                                }),
               std::runtime_error);
  const int after = request.calls;
  std::this_thread::sleep_for(5 * BackgroundProgress::kInterval);
  EXPECT_EQ(request.calls, after);
}

TEST(BackgroundProgress, OverlappedAllReduceSums) {
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, "world");
  const int n = comm->size(), rank = comm->rank();
  BackgroundProgress progress;
  for (const int64_t count : {int64_t{5}, int64_t{1} << 18}) {  // eager and rendezvous sizes
    std::vector<float> buf(static_cast<size_t>(count), static_cast<float>(rank + 1));
    auto request = comm->iall_reduce(buf.data(), count, ReduceOp::kSum);
    double busy = 0;
    progress.overlap(*request, [&] {
      for (int i = 0; i < 2000000; ++i) busy += 1e-9 * i;  // compute, no MPI
    });
    request->wait();
    EXPECT_GT(busy, 0);
    for (float v : buf) ASSERT_EQ(v, n * (n + 1) / 2.0f);
  }
}

}  // namespace
}  // namespace gpt
