// make_device_communicator in a build without CUDA: there is no NCCL, and no device memory, so
// every group keeps MPI (staging passes host buffers straight through).
#include "framework/check.h"
#include "parallel/device_communicator.h"

namespace gpt {

std::unique_ptr<Communicator> make_device_communicator(std::unique_ptr<Communicator> mpi,
                                                       Backend& backend,
                                                       DeviceTransport transport) {
  GPT_INPUT_CHECK(transport != DeviceTransport::kNccl,
                  "--gpu-comm nccl: this build has no CUDA backend, hence no NCCL");
  return make_host_staged_communicator(std::move(mpi), backend);
}

}  // namespace gpt
