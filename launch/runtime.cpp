// Runtime construction (see runtime.h).
#include "launch/runtime.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "framework/check.h"
#include "launch/program.h"

namespace gpt {
namespace {

// This rank's place on its node: (local rank, ranks on the node). The launcher's own numbering
// wins where it gives one (Open MPI, Slurm), else the MPI shared-memory split's.
std::pair<int, int> node_position(MPI_Comm world) {
  MPI_Comm node;
  GPT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int size = 1, rank = 0;
  MPI_Comm_size(node, &size);
  MPI_Comm_rank(node, &rank);
  MPI_Comm_free(&node);
  for (const char* variable : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && *value != '\0') return {std::atoi(value), size};
  }
  return {rank, size};
}

// How many ranks of this node drive the same GPU as this one (1 = it has the GPU alone).
// Collective over world (an all-gather among the ranks of each node).
int ranks_sharing_device(MPI_Comm world, const std::string& uuid) {
  MPI_Comm node;
  GPT_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  int size = 1;
  MPI_Comm_size(node, &size);
  char mine[64] = {};
  uuid.copy(mine, sizeof(mine) - 1);
  std::vector<char> all(static_cast<size_t>(size) * sizeof(mine));
  GPT_MPI_CHECK(
      MPI_Allgather(mine, sizeof(mine), MPI_CHAR, all.data(), sizeof(mine), MPI_CHAR, node));
  MPI_Comm_free(&node);
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
                                          const ExecutionOptions& o, int* sharing) {
  CudaBackendOptions co;
  co.precision = o.precision == "fp32" ? Precision::kFp32 : Precision::kBf16;
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
    const double gib = 1024.0 * 1024.0 * 1024.0;
    const double free_bytes = static_cast<double>(cuda_free_memory(co.device));
    co.arena_bytes = static_cast<size_t>(o.gpu_memory_gb > 0 ? o.gpu_memory_gb * gib
                                                             : 0.9 * free_bytes / *sharing);
    backend = make_cuda_backend(co);
  });
  return backend;
}

}  // namespace

StageSpec virtual_stage_spec(const ModelConfig& cfg, int pp, int virtual_stages, int stage,
                             int chunk, const std::vector<int64_t>& layers_per_stage) {
  const int64_t parts = static_cast<int64_t>(pp) * virtual_stages;
  const int64_t vs = static_cast<int64_t>(chunk) * pp + stage;
  StageSpec spec;
  spec.first_layer = cfg.n_layer * vs / parts;
  spec.n_layers = cfg.n_layer * (vs + 1) / parts - spec.first_layer;
  if (!layers_per_stage.empty()) {
    spec.first_layer = 0;
    for (int s = 0; s < stage; ++s) spec.first_layer += layers_per_stage[static_cast<size_t>(s)];
    spec.n_layers = layers_per_stage[static_cast<size_t>(stage)];
  }
  spec.has_embedding = vs == 0;
  spec.has_head = vs == parts - 1;
  spec.tied_copy = pp > 1 && spec.has_head;
  return spec;
}

Runtime::Runtime(MPI_Comm world, const ModelConfig& cfg, const RuntimeOptions& options)
    : cfg_(cfg), options_(options) {
  const std::pair<int, int> node = node_position(world);
  threads_ = options.execution.threads > 0
                 ? options.execution.threads
                 : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / node.second);
  // Every rank takes the same branch: "auto" depends on a device count that is the same on every
  // node of a job (and a node without GPUs fails below, on all ranks through agreement).
  int every_rank_has_gpu = cuda_device_count() > 0 ? 1 : 0;
  if (options.execution.device == "auto") {
    GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &every_rank_has_gpu, 1, MPI_INT, MPI_MIN, world));
  }
  const bool gpu = options.execution.device == "cuda" ||
                   (options.execution.device == "auto" && every_rank_has_gpu);
  grid_ = std::make_unique<ProcessGrid>(world, options.grid);
  if (!gpu) {
    GPT_INPUT_CHECK(options.execution.precision != "bf16",
                    "--precision bf16 needs the CUDA backend (the CPU backend is fp32)");
    backend_ = make_cpu_backend(threads_);
  } else {
    int sharing = 1;
    backend_ = make_gpu_backend(world, node, options.execution, &sharing);
    // Ranks must agree on the transport: one rank sharing its GPU moves the whole job to MPI.
    int shared_anywhere = sharing > 1 ? 1 : 0;
    GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &shared_anywhere, 1, MPI_INT, MPI_MAX, world));
    GPT_INPUT_CHECK(!(options.execution.gpu_comm == "nccl" && shared_anywhere),
                    "--gpu-comm nccl: ranks share a GPU and NCCL needs one GPU per rank "
                    "(use --gpu-comm mpi)");
    const bool nccl = options.execution.gpu_comm == "nccl" ||
                      (options.execution.gpu_comm == "auto" && !shared_anywhere);
    transport_ = nccl ? "nccl" : "mpi";
    grid_->use_device_communicators(
        *backend_, nccl ? DeviceTransport::kNccl : DeviceTransport::kHostStagedMpi);
  }
  tp_ = std::make_unique<TensorParallel>(grid_->tp(), *backend_, options.sequence_parallel);
  store_ = std::make_unique<ParameterStore>(*backend_);
  const std::optional<Schedule>& schedule = options.schedule;
  GPT_CHECK(!schedule || (schedule->pp == grid_->shape().pp &&
                          schedule->virtual_stages == options.virtual_stages),
            "the schedule's pp and virtual stages differ from the runtime's");
  for (int chunk = 0; chunk < options.virtual_stages; ++chunk) {
    const StageSpec spec = virtual_stage_spec(cfg, grid_->shape().pp, options.virtual_stages,
                                              grid_->stage(), chunk, options.layers_per_stage);
    num_caches_.push_back(schedule ? schedule->cache_slots(grid_->stage(), chunk) : 1);
    num_grad_sets_.push_back(schedule ? schedule->grad_sets(grid_->stage(), chunk) : 1);
    chunks_.push_back(std::make_unique<GptStage>(*store_, *tp_, cfg, spec, options.micro_batch,
                                                 num_caches_.back(), num_grad_sets_.back()));
  }
  store_->allocate();
}

std::deque<GptChunk> Runtime::pipeline_chunks() {
  std::deque<GptChunk> adapters;
  for (size_t c = 0; c < chunks_.size(); ++c)
    adapters.emplace_back(*chunks_[c], num_caches_[c], num_grad_sets_[c]);
  return adapters;
}

std::string Runtime::layout() const {
  const GridShape& s = grid_->shape();
  return "tp=" + std::to_string(s.tp) + " dp=" + std::to_string(s.dp) +
         " pp=" + std::to_string(s.pp);
}

}  // namespace gpt
