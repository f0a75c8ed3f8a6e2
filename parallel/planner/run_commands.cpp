// run_commands (see run_commands.h).
#include "parallel/planner/run_commands.h"

#include <algorithm>
#include <sstream>

#include "framework/families/model_family.h"

namespace gpt {

RunCommands run_commands(const PlanLayout& l, const ModelConfig& model, int64_t global_batch_size,
                         const Cluster& cluster) {
  std::ostringstream train;
  train << "--n-layer " << model.n_layer << " --n-head " << model.n_head << " --d-model "
        << model.d_model << " --seq-len " << model.seq_len << " --global-batch-size "
        << global_batch_size << " --micro-batch-size " << l.micro_batch << " --tp " << l.tp
        << " --pp " << l.pp;
  if (family_of(model).takes_shape_options) train << " " << model_shape_options(model);
  if (l.pp > 1) train << " --schedule " << schedule_name(l.schedule);
  if (l.virtual_stages > 1) train << " --virtual-stages " << l.virtual_stages;
  if (!l.pipeline_layers.empty()) train << " --pipeline-layers " << l.pipeline_layers_text();
  if (l.sequence_parallel) train << " --sequence-parallel";
  if (l.recompute != Recompute::kNone) train << " --recompute " << recompute_name(l.recompute);
  if (l.recompute_layers > 0) train << " --recompute-layers " << l.recompute_layers;
  if (l.distributed_optimizer) train << " --distributed-optimizer";
  // train runs fp32 or its bf16; Megatron's 16-bit regime is priced, and bf16 comes nearest.
  train << " --precision " << (l.regime() == PrecisionRegime::kFp32 ? "fp32" : "bf16");
  if (l.grad_reduce_dtype == GradReduceDtype::kBf16) train << " --grad-reduce-dtype bf16";

  RunCommands out;
  out.train_options = train.str();
  const int per_node = cluster.gpus_per_node;
  const int nodes = (l.world() + per_node - 1) / per_node;
  std::ostringstream mpirun;
  mpirun << "mpirun -np " << l.world() << " --map-by "
         << (l.placement.by_node ? std::string("node")
                                 : "ppr:" + std::to_string(per_node) + ":node")
         << " build/bin/train " << out.train_options;
  out.mpirun = mpirun.str();
  std::ostringstream sbatch;
  sbatch << "sbatch --nodes=" << nodes << " --ntasks-per-node=" << std::min(per_node, l.world())
         << " --gpus-per-task=1" << (l.placement.by_node ? " --distribution=cyclic" : "")
         << " launch/programs/slurm/train.sbatch " << out.train_options;
  out.sbatch = sbatch.str();
  return out;
}

}  // namespace gpt
