// train's --pipeline-layers auto (see pipeline_split.h).
#include "launch/training/pipeline_split.h"

#include "framework/check.h"
#include "framework/logging.h"
#include "launch/training/memory_report.h"
#include "parallel/planner/balance_stages.h"

namespace gpt {

void choose_pipeline_layers(TrainOptions& options, int world_size, DeviceKind device) {
  if (!options.layout.pipeline_layers_auto) return;
  GPT_INPUT_CHECK(device == DeviceKind::kCuda || !options.cluster.empty(),
                  "--pipeline-layers auto on the CPU needs --cluster FILE, the machine's "
                  "calibration as plan --calibrate writes it (docs/PLANNER.md)");
  const std::string cluster_name = options.cluster.empty() ? "dgx-h100" : options.cluster;
  const Cluster cluster = load_cluster(cluster_name);
  // The job as plan would price it: this run's dp, microbatches and precision, its ranks placed
  // a node's GPUs at a time.
  const MemoryModelInput job = memory_model_input(options, world_size, device);
  PlanLayout l;
  static_cast<Layout&>(l) = job.layout;
  l.pipeline_layers_auto = false;
  l.microbatches = static_cast<int>(job.microbatches);
  l.precision = l.precision.value_or(device == DeviceKind::kCpu ? PrecisionRegime::kFp32
                                                                : PrecisionRegime::kBf16);
  l.placement.nodes = std::max(1, (world_size + cluster.gpus_per_node - 1) / cluster.gpus_per_node);
  const Schedule schedule = options.layout.step_schedule(options.global_batch_size, world_size);
  // Without --memory-limit-gb, the CPU's machine memory, or the --cluster GPU's on cuda.
  const int64_t limit = memory_limit_bytes(options.execution.memory_limit_gb, device);
  const double limit_bytes = limit > 0 ? static_cast<double>(limit) : cluster.gpu.memory_bytes;
  const StageBalance b = balance_stages(options.model, l, {cluster, schedule, limit_bytes, device});
  options.layout.pipeline_layers = b.chosen.counts;
  options.layout.pipeline_layers_auto = false;
  options.layout.validate(options.model, world_size);
  Layout even;
  even.pipeline_layers = b.even.counts;
  PlanLayout chosen = l;
  chosen.pipeline_layers = b.chosen.counts;
  std::string stages;
  for (int stage = 0; stage < l.pp; ++stage) {
    stages += (stage > 0 ? ", " : "") +
              format_bytes(stage_memory(options.model, chosen, schedule, stage, device).total());
  }
  GPT_LOG0("pipeline layers: " << options.layout.pipeline_layers_text() << " (auto: step "
                               << b.chosen.step.step_time_s << " s predicted against "
                               << b.even.step.step_time_s << " s at the even "
                               << even.pipeline_layers_text() << "; stage memory " << stages << "; "
                               << b.priced << " splits priced on " << cluster.name << ")");
}

}  // namespace gpt
