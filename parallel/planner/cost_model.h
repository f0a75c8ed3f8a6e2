// The planner's step-time model (docs/PLANNER.md, "How a prediction is made"). Each virtual
// stage's forward, input-gradient and weight-gradient passes for one microbatch are priced from
// their matrix products (FLOPs at the GPU's measured GEMM efficiency, less for shapes that leave
// part of the last wave of tiles idle, never faster than their bytes allow) and their streaming
// kernels (bytes over memory bandwidth), plus the tensor-parallel collectives the executor does
// not overlap; then the real schedule (parallel/pipeline_schedule) is replayed with those costs
// and point-to-point transfer times, and the data-parallel reduction, tied-embedding reduction
// and optimizer step are added where the executor puts them. In Megatron's regime the layout's
// FrameworkProfile (framework_profile.h) says where that framework's version put them instead.
// Every figure is the hardware's, one rank a device; on a calibrated CPU cluster the core-sharing
// adapter (core_sharing.h) stretches them where ranks share a node's cores.
#pragma once

#include <vector>

#include "framework/config.h"
#include "parallel/pipeline_schedule.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/plan_layout.h"

namespace gpt {

// Seconds of `batch` independent (m x k) by (k x n) products on `gpu` in `regime`.
double gemm_seconds(const GpuModel& gpu, PrecisionRegime regime, double m, double n, double k,
                    double batch = 1);
// Seconds of a streaming kernel that reads and writes `bytes` in all.
double stream_seconds(const GpuModel& gpu, double bytes);
// Seconds of `flops` in a kernel that runs at `peak` FLOP/s and the GPU's GEMM efficiency: this
// project's fused attention and serving's row-wise product on the CUDA cores (no tiles, so no
// wave quantization).
double kernel_flop_seconds(const GpuModel& gpu, double peak, double flops);

// One pass of one microbatch through one virtual stage: compute (products and streaming
// kernels, recomputation included) and the tensor-parallel communication left exposed.
struct PassTime {
  double compute = 0, tp_exposed = 0;
  double total() const { return compute + tp_exposed; }
  PassTime& operator+=(const PassTime& o) {
    compute += o.compute;
    tp_exposed += o.tp_exposed;
    return *this;
  }
};
struct ChunkCosts {
  PassTime forward, backward_input, backward_weight;
};

// The three passes of virtual stage `vs` (0 .. pp*v-1) for one microbatch.
ChunkCosts chunk_costs(const ModelConfig& model, const PlanLayout& layout, const Cluster& cluster,
                       int vs);

struct StepPrediction {
  double step_time_s = 0;
  // The split of the critical stage's step (they add up to step_time_s): its compute (passes
  // and optimizer), exposed tp, pp (transfers on the critical path and the tied-embedding
  // reduction) and dp communication (with the loss's reduction over the world), each with its
  // share of the gradient norm's reductions, and the rest of its idle time, the pipeline bubble.
  double compute_s = 0, tp_comm_exposed_s = 0, pp_comm_exposed_s = 0, dp_comm_exposed_s = 0,
         bubble_s = 0;
  double tokens_per_s_per_gpu = 0, model_tflops_per_gpu = 0, mfu = 0;
  int critical_stage = 0;
};

// Replays `schedule` (the layout's) with the layout's costs on `cluster`; global batch =
// microbatches * micro_batch * dp sequences.
StepPrediction predict_step(const ModelConfig& model, const PlanLayout& layout,
                            const Cluster& cluster, const Schedule& schedule);

}  // namespace gpt
