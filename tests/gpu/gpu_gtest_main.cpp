// GoogleTest main of the GPU test binaries: where no CUDA device is visible (or the build has no
// CUDA backend) it prints one SKIPPED line and exits 77, which CTest reports as skipped
// (SKIP_RETURN_CODE); otherwise it initialises MPI (the layers' communicators need it) and runs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <exception>

#include "framework/backend.h"
#include "framework/logging.h"

int main(int argc, char** argv) {
  int devices = 0;
  try {
    devices = gpt::cuda_device_count();
  } catch (const std::exception& e) {
    std::printf("SKIPPED: no CUDA device visible (%s)\n", e.what());
    return 77;
  }
  if (devices <= 0) {
    std::printf("SKIPPED: no CUDA device visible%s\n",
                GPT_WITH_CUDA ? "" : " (this build has no CUDA backend)");
    std::fflush(stdout);
    return 77;
  }
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);  // as the programs
  gpt::log::set_rank(0, 1);
  gpt::log::set_quiet(true);
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  MPI_Finalize();
  return failed;
}
