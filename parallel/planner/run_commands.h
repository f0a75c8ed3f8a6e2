// The command lines that run a planned layout with this project's train: mpirun with one rank per
// GPU placed as the plan placed them, and sbatch with the project's Slurm template
// (launch/programs/slurm/train.sbatch), each with every model and layout option train needs.
// The run's data and its other options (steps, learning rate, checkpoints) are the user's to add.
#pragma once

#include <string>

#include "framework/config.h"
#include "parallel/planner/cluster.h"
#include "parallel/planner/plan_layout.h"

namespace gpt {

struct RunCommands {
  std::string train_options;  // the model and layout options of train
  std::string mpirun;
  std::string sbatch;
};

RunCommands run_commands(const PlanLayout& layout, const ModelConfig& model,
                         int64_t global_batch_size, const Cluster& cluster);

}  // namespace gpt
