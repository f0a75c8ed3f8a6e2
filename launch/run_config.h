// The run's identity in a checkpoint (the `config` attribute, flat JSON) and DESIGN.md's resume
// rules: on --resume or --init-from the model shape, seed and data set come from the file, and
// an option given on the command line that conflicts with them is an error; on --resume the
// optimizer options come from the file unless given again (an override is logged); the layout,
// batch sizes, schedule, --steps and checkpoint options are the command line's.
#pragma once

#include <string>

#include "framework/io/checkpoint.h"
#include "launch/options.h"

namespace gpt {

// JSON text of the model (with its vocabulary size) and the training options.
std::string run_config_json(const TrainOptions& options, const ModelConfig& model);

// Applies a checkpoint's config to options (model shape, seed, data, and, when resuming,
// optimizer options not given on the command line). Throws naming the conflicting option.
void apply_checkpoint_config(TrainOptions& options, const CheckpointReader& checkpoint,
                             bool resuming);

// The file --resume or --init-from names: a path, or for `--resume auto` the newest valid
// checkpoint of --checkpoint-dir ("" when there is none: a fresh start, logged). Collective over
// comm (the search verifies candidates together).
std::string checkpoint_to_load(const TrainOptions& options, MPI_Comm comm);

}  // namespace gpt
