// The watchdog's cost on communication: the same small operations through a plain MPI
// communicator and through one wrapped in a TrackedCommunicator (which records every operation
// in an OperationLog), interleaved in rounds in one run so both see the same machine.
// Run: mpiexec -n 2 build/tests/benchmarks/bench_tracking [operations per round] [rounds]
// Prints the median time per operation of each and their ratio, for a 1-float all-reduce and a
// 1-float send/receive pair (the smallest operations: where a fixed cost shows most).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "parallel/operation_log.h"
#include "parallel/tracked_communicator.h"

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per operation for `ops` repetitions of op, after a barrier on comm.
template <typename Op>
double seconds_per_op(gpt::Communicator& comm, int ops, Op&& op) {
  comm.barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < ops; ++i) op(comm);
  return std::chrono::duration<double>(Clock::now() - t0).count() / ops;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int ops = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  {
    gpt::OperationLog log;
    auto plain = gpt::make_mpi_communicator(MPI_COMM_WORLD, "world");
    gpt::TrackedCommunicator tracked(gpt::make_mpi_communicator(MPI_COMM_WORLD, "world"), log);
    float value = 1.0f;
    auto all_reduce = [&](gpt::Communicator& c) { c.all_reduce(&value, 1, gpt::ReduceOp::kSum); };
    // Rank 0 and 1 exchange one float (others idle): a send and a receive each.
    auto exchange = [&](gpt::Communicator& c) {
      if (c.rank() == 0) {
        c.send(&value, 1, 1);
        c.recv(&value, 1, 1);
      } else if (c.rank() == 1) {
        c.recv(&value, 1, 0);
        c.send(&value, 1, 0);
      }
    };
    struct Case {
      const char* name;
      std::vector<double> plain, tracked;
    } cases[] = {{"all_reduce (1 float)", {}, {}}, {"send+recv (1 float)", {}, {}}};
    for (int r = 0; r < rounds; ++r) {
      cases[0].plain.push_back(seconds_per_op(*plain, ops, all_reduce));
      cases[0].tracked.push_back(seconds_per_op(tracked, ops, all_reduce));
      cases[1].plain.push_back(seconds_per_op(*plain, ops, exchange));
      cases[1].tracked.push_back(seconds_per_op(tracked, ops, exchange));
    }
    if (plain->rank() == 0) {
      std::printf("%d ranks, %d operations x %d rounds, median per operation\n", plain->size(), ops,
                  rounds);
      for (const Case& c : cases) {
        const double p = median(c.plain), t = median(c.tracked);
        std::printf("%-22s plain %7.2f us  tracked %7.2f us  ratio %.3f\n", c.name, 1e6 * p,
                    1e6 * t, t / p);
      }
    }
  }
  MPI_Finalize();
  return 0;
}
