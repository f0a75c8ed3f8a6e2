// Runtime construction (see runtime.h).
#include "launch/runtime.h"

#include <string>
#include <utility>
#include <vector>

#include "framework/check.h"

namespace gpt {

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
  DeviceSetup device = set_up_device(world, options.execution);
  backend_ = std::move(device.backend);
  transport_ = device.transport;
  threads_ = device.threads;
  grid_ = std::make_unique<ProcessGrid>(world, options.grid);
  if (transport_) grid_->use_device_communicators(*backend_, *transport_);
  tp_ = std::make_unique<TensorParallel>(grid_->tp(), *backend_, options.sequence_parallel);
  store_ = std::make_unique<ParameterStore>(*backend_);
  const std::optional<Schedule>& schedule = options.schedule;
  GPT_CHECK(!schedule || (schedule->pp == grid_->shape().pp &&
                          schedule->virtual_stages == options.virtual_stages),
            "the schedule's pp and virtual stages differ from the runtime's");
  for (int chunk = 0; chunk < options.virtual_stages; ++chunk) {
    const StageSpec spec = virtual_stage_spec(cfg, grid_->shape().pp, options.virtual_stages,
                                              grid_->stage(), chunk, options.layers_per_stage);
    const int caches = schedule ? schedule->cache_slots(grid_->stage(), chunk) : 1;
    const int grad_sets = schedule ? schedule->grad_sets(grid_->stage(), chunk) : 1;
    chunks_.push_back(std::make_unique<GptStage>(*store_, *tp_, cfg, spec, options.micro_batch,
                                                 caches, grad_sets));
  }
  store_->allocate();
}

std::deque<GptChunk> Runtime::pipeline_chunks() {
  std::deque<GptChunk> adapters;
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
