// Backend and transport choice (see device_setup.h).
#include "launch/runtime/device_setup.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "framework/agreement.h"

namespace gpt {
namespace {

// This rank's place on its node: (local rank, ranks on the node). The launcher's own numbering
// wins where it gives one (Open MPI, Slurm), else the MPI shared-memory split's.
std::pair<int, int> node_position(MPI_Comm world) {
  MPI_Comm node;
  GPT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const int size = comm_size(node), rank = comm_rank(node);
  GPT_MPI_CHECK(MPI_Comm_free(&node));
  for (const char* variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && *value != '\0') return {std::atoi(value), size};
  }
  return {rank, size};
}

// The CPU threads for this rank when --threads is 0: the CPUs it may run on (its affinity mask,
// which mpirun's binding, Slurm's task plugins and cgroups narrow) divided among the ranks of
// this node whose masks overlap it, and at most SLURM_CPUS_PER_TASK, which is what Slurm granted
// where it binds nothing (task/none: every mask is the whole node, shared with other jobs).
// hardware_concurrency() saw neither and oversubscribed a Slurm job 10-40x. Collective over
// world (an all-gather of the masks among the ranks of each node).
int default_cpu_threads(MPI_Comm world) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  GPT_CHECK(sched_getaffinity(0, sizeof(mine), &mine) == 0, "sched_getaffinity failed");
  MPI_Comm node;
  GPT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const int size = comm_size(node);
  std::vector<cpu_set_t> masks(static_cast<size_t>(size));
  GPT_MPI_CHECK(
      MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, masks.data(), sizeof(mine), MPI_BYTE, node));
  GPT_MPI_CHECK(MPI_Comm_free(&node));
  int sharing = 0;
  for (cpu_set_t& other : masks) {
    cpu_set_t both;
    CPU_AND(&both, &mine, &other);
    if (CPU_COUNT(&both) > 0) ++sharing;
  }
  int threads = std::max(1, CPU_COUNT(&mine) / std::max(1, sharing));
  const char* per_task = std::getenv("SLURM_CPUS_PER_TASK");
  if (per_task != nullptr && std::atoi(per_task) > 0)
    threads = std::min(threads, std::atoi(per_task));
  return threads;
}

// How many ranks of this node drive the same GPU as this one (1 = it has the GPU alone).
// Collective over world (an all-gather among the ranks of each node).
int ranks_sharing_device(MPI_Comm world, const std::string& uuid) {
  MPI_Comm node;
  GPT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  const int size = comm_size(node);
  char mine[64] = {};
  uuid.copy(mine, sizeof(mine) - 1);
  std::vector<char> all(static_cast<size_t>(size) * sizeof(mine));
  GPT_MPI_CHECK(
      MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all.data(), sizeof(mine), MPI_CHAR, node));
  GPT_MPI_CHECK(MPI_Comm_free(&node));
  int sharing = 0;
  for (int r = 0; r < size; ++r)
    if (std::string(all.data() + static_cast<size_t>(r) * sizeof(mine)) == uuid) ++sharing;
  return sharing;
}

// The CUDA backend on this rank's GPU: device = local rank, or 0 where each rank sees a single
// device (CUDA_VISIBLE_DEVICES per rank, Slurm --gpus-per-task) or all ranks share one. Local
// checks are agreed before each collective, so a node without GPUs fails every rank cleanly.
// node: this rank's (local rank, ranks on the node); *sharing: ranks of this node on its GPU.
std::unique_ptr<Backend> make_gpu_backend(MPI_Comm world, std::pair<int, int> node,
                                          const ExecutionOptions& o,
                                          std::optional<PrecisionRegime> precision, int* sharing) {
  CudaBackendOptions co;
  co.precision = precision == PrecisionRegime::kFp32 ? Precision::kFp32 : Precision::kBf16;
  co.deterministic = o.deterministic;
  if (GPT_WITH_CUDA == 0) return make_cuda_backend(co);  // says the build has no CUDA backend
  std::string uuid;
  agree_on_failure(world, [&] {
    const auto [local_rank, local_size] = node;
    const int visible = cuda_device_count();
    GPT_INPUT_CHECK(visible > 0, "--device cuda: no CUDA device is visible");
    GPT_INPUT_CHECK(visible == 1 || visible >= local_size,
                    "--device cuda: this node has " << visible << " visible GPUs for " << local_size
                                                    << " ranks: run at most one rank per GPU");
    co.device = visible == 1 ? 0 : local_rank;
    uuid = cuda_device_uuid(co.device);
  });
  *sharing = ranks_sharing_device(world, uuid);
  std::unique_ptr<Backend> backend;
  agree_on_failure(world, [&] {
    const double free_bytes = static_cast<double>(cuda_free_memory(co.device));
    co.arena_bytes = static_cast<size_t>(o.memory_limit_gb > 0 ? o.memory_limit_gb * 1e9
                                                               : 0.9 * free_bytes / *sharing);
    backend = make_cuda_backend(co);
  });
  return backend;
}

// Ranks must agree on the transport: one rank sharing its GPU moves the whole job to MPI.
DeviceTransport choose_transport(MPI_Comm world, const ExecutionOptions& o, int sharing) {
  int shared_anywhere = sharing > 1 ? 1 : 0;
  GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &shared_anywhere, 1, MPI_INT, MPI_MAX, world));
  GPT_INPUT_CHECK(!(o.gpu_comm == DeviceTransport::kNccl && shared_anywhere),
                  "--gpu-comm nccl: ranks share a GPU and NCCL needs one GPU per rank "
                  "(use --gpu-comm mpi)");
  if (o.gpu_comm) return *o.gpu_comm;
  return shared_anywhere ? DeviceTransport::kHostStagedMpi : DeviceTransport::kNccl;
}

}  // namespace

DeviceSetup set_up_device(MPI_Comm world, const ExecutionOptions& options,
                          std::optional<PrecisionRegime> precision) {
  const std::pair<int, int> node = node_position(world);
  DeviceSetup setup;
  setup.threads = options.threads > 0 ? options.threads : default_cpu_threads(world);
  // Every rank takes the same branch: "auto" depends on a device count that is the same on every
  // node of a job (and a node without GPUs fails below, on all ranks through agreement).
  int every_rank_has_gpu = cuda_device_count() > 0 ? 1 : 0;
  if (!options.device) {
    GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &every_rank_has_gpu, 1, MPI_INT, MPI_MIN, world));
  }
  const bool gpu =
      options.device.value_or(every_rank_has_gpu ? DeviceKind::kCuda : DeviceKind::kCpu) ==
      DeviceKind::kCuda;
  if (!gpu) {
    // auto is float32 on the CPU; bf16 there runs the GPU's regime as a test path.
    setup.backend = make_cpu_backend(
        setup.threads, precision == PrecisionRegime::kBf16 ? Precision::kBf16 : Precision::kFp32);
    return setup;
  }
  int sharing = 1;
  setup.backend = make_gpu_backend(world, node, options, precision, &sharing);
  setup.transport = choose_transport(world, options, sharing);
  return setup;
}

}  // namespace gpt
