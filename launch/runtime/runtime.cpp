// Runtime construction (see runtime.h).
#include "launch/runtime/runtime.h"

#include <string>
#include <utility>
#include <vector>

#include "framework/agreement.h"
#include "framework/check.h"
#include "parallel/data_parallel.h"

namespace gpt {

Runtime::Runtime(MPI_Comm world, const ModelConfig& cfg, const RuntimeOptions& options)
    : cfg_(cfg), options_(options) {
  DeviceSetup device = set_up_device(world, options.execution, options.layout.precision);
  backend_ = std::move(device.backend);
  transport_ = device.transport;
  threads_ = device.threads;
  const Layout& layout = options.layout;
  grid_ = std::make_unique<ProcessGrid>(
      world, GridOptions{layout.grid(comm_size(world)), options.ranks_per_node,
                         options.allow_tp_across_nodes});
  if (transport_) grid_->use_device_communicators(*backend_, *transport_);
  tp_ = std::make_unique<TensorParallel>(grid_->tp(), *backend_, layout.sequence_parallel);
  store_ = std::make_unique<ParameterStore>(*backend_);
  const std::optional<Schedule>& schedule = options.schedule;
  GPT_CHECK(!schedule || (schedule->pp == grid_->shape().pp &&
                          schedule->virtual_stages == layout.virtual_stages),
            "the schedule's pp and virtual stages differ from the runtime's");
  GPT_CHECK(!layout.pipeline_layers_auto, "--pipeline-layers auto is chosen before the runtime");
  for (int chunk = 0; chunk < layout.virtual_stages; ++chunk) {
    const StageSpec spec = virtual_stage_spec(cfg, grid_->shape().pp, layout.virtual_stages,
                                              grid_->stage(), chunk, layout.pipeline_layers);
    const int caches = schedule ? schedule->cache_slots(grid_->stage(), chunk) : 1;
    const int grad_sets = schedule ? schedule->grad_sets(grid_->stage(), chunk) : 1;
    const ChunkRecompute recompute = chunk_recompute(layout.recompute, layout.recompute_layers,
                                                     spec, schedule && schedule->splits_backward());
    chunks_.push_back(std::make_unique<ModelStage>(*store_, *tp_, cfg, spec, layout.micro_batch,
                                                   caches, grad_sets, recompute));
  }
  if (backend_->precision() == Precision::kBf16) {  // Megatron's 16-bit tp messages
    const ModelStage& stage = *chunks_.front();
    tp_->use_bf16_messages(stage.rows() * cfg.d_model, stage.local_rows() * cfg.d_model);
  }
  bucket_plan_ = plan_buckets(bucket_parameters(*store_), options.dp_bucket_elements,
                              grid_->shape().dp, layout.distributed_optimizer);
  if (!options.allocate_parameters) return;
  store_->allocate(bucket_plan_.padding_after);
  if (bucket_plan_.shards > 1)
    store_->shard_optimizer_state(shard_segments(bucket_plan_, grid_->dp_rank()));
}

std::deque<ModelChunk> Runtime::pipeline_chunks() {
  std::deque<ModelChunk> adapters;
  for (auto& stage : chunks_) adapters.emplace_back(*stage);
  return adapters;
}

const Schedule& Runtime::schedule() const {
  GPT_CHECK(options_.schedule.has_value(), "this runtime was built without a training schedule");
  return *options_.schedule;
}

std::string Runtime::layout() const {
  const GridShape& s = grid_->shape();
  return "tp=" + std::to_string(s.tp) + " dp=" + std::to_string(s.dp) +
         " pp=" + std::to_string(s.pp);
}

}  // namespace gpt
