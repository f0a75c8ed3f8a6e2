// Where and how the model runs on this rank, decided once at start-up for train, eval and
// generate: the backend (the CPU, or CUDA on this rank's GPU chosen by node-local rank) and, on
// GPUs, how device buffers move between ranks (NCCL, or MPI over host staging where ranks share a
// GPU). Every decision that must be the same on all ranks is agreed over `world`.
#pragma once

#include <memory>
#include <optional>

#include <mpi.h>

#include "framework/backend.h"
#include "parallel/device_communicator.h"
#include "parallel/layout.h"

namespace gpt {

// The options every program shares (add_execution_options parses them). nullopt is "auto".
struct ExecutionOptions {
  std::optional<DeviceKind> device;         // auto: cuda when every rank sees a GPU
  bool deterministic = false;               // GPU: fixed algorithms, bit-for-bit repeatable
  std::optional<DeviceTransport> gpu_comm;  // auto: host-staged MPI when ranks share a GPU
  // The most the project's buffers may take per rank, GB (1e9 bytes); on cuda also the device
  // arena, where 0 = 90% of the free memory / the ranks sharing the GPU; on cpu 0 = no limit.
  double memory_limit_gb = 0;
  int threads = 0;  // CPU threads per rank; 0 = its CPUs / ranks on them
};

struct DeviceSetup {
  std::unique_ptr<Backend> backend;
  std::optional<DeviceTransport> transport;  // how device buffers move; none on the CPU
  int threads = 1;                           // CPU threads of this rank
};

// Collective over world. Throws AgreedError on every rank when a rank cannot run as asked
// (--device cuda without a GPU, fewer GPUs than ranks, --gpu-comm nccl on a shared GPU).
// `precision` (the layout's): fp32 or bf16 on CUDA (auto: bf16); the CPU backend is fp32.
DeviceSetup set_up_device(MPI_Comm world, const ExecutionOptions& options,
                          std::optional<PrecisionRegime> precision);

// "nccl" or "mpi" (host-staged): the banner's and --gpu-comm's word for a transport. Inline, so
// that the option parsers link without the device setup (the fuzz build, tests/fuzz).
inline const char* transport_name(DeviceTransport transport) {
  return transport == DeviceTransport::kNccl ? "nccl" : "mpi";
}

}  // namespace gpt
