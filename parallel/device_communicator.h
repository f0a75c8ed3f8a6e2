// Communicators for a GPU backend's buffers (docs/DESIGN.md "Communicators"). Each wraps the grid's
// MPI communicator of one group, which stays the control plane: host buffers (the loss, the grad
// norm, agreement flags, broadcast_bytes) always go through it. Device buffers go through
//  - NCCL (nccl_communicator.cpp): its own stream, ordered against the backend's compute stream
//    by events, so transfers and the dp all-reduce overlap compute; or
//  - MPI over host staging (host_staged_communicator.cpp): copy out, MPI, copy in; the way for
//    several ranks sharing one GPU, which NCCL refuses.
#pragma once

#include <memory>

#include "framework/backend.h"
#include "parallel/communicator.h"

namespace gpt {

enum class DeviceTransport { kNccl, kHostStagedMpi };

// Collective over the ranks of `mpi` (for NCCL: the unique id is broadcast over it).
std::unique_ptr<Communicator> make_device_communicator(std::unique_ptr<Communicator> mpi,
                                                       Backend& backend, DeviceTransport transport);

// The staged form alone (also the only form in a build without CUDA).
std::unique_ptr<Communicator> make_host_staged_communicator(std::unique_ptr<Communicator> mpi,
                                                            Backend& backend);

}  // namespace gpt
