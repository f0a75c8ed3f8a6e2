// The run's identity in a checkpoint (the `config` attribute, flat JSON) and docs/DESIGN.md's
// resume rules: on --resume or --init-from the model shape, seed and data set come from the file,
// and an option given on the command line that conflicts with them is an error. On --resume every
// training option the file stored (batch sizes, --steps, learning-rate schedule, optimizer
// options, evaluation cadence, validation data, --save-every, --log-every, --metrics) is the
// file's unless given again, and each given one that differs is logged; the layout, schedule and
// checkpoint folder options are the command line's.
#pragma once

#include <string>

#include "framework/io/checkpoint_reader.h"
#include "launch/training/train_options.h"

namespace gpt {

// JSON text of the model (with its vocabulary size) and the training options.
std::string run_config_json(const TrainOptions& options, const ModelConfig& model);

// Applies a checkpoint's config to options (model shape, seed, data, and, when resuming, the
// training options not given on the command line; for --init-from, a given --seed and a
// --seq-len up to the file's are kept). Throws naming the conflicting option; the
// caller validates the result again (validate_train_options).
void apply_checkpoint_config(TrainOptions& options, const CheckpointReader& checkpoint,
                             bool resuming);

// validate_train_options after apply_checkpoint_config: an error naming an option the checkpoint
// supplied (TrainOptions::from_checkpoint) names the checkpoint's field first, since the user
// never gave the option: "the checkpoint F holds eval_windows = 0 in its config, which is not
// valid here: --eval-windows must be at least 1 (give --eval-windows to override the file's
// value)".
void validate_resumed_options(const TrainOptions& options, int world_size);

// The file --resume or --init-from names: a path, or for `--resume auto` the newest valid
// checkpoint of --checkpoint-dir ("" when there is none: a fresh start, logged). `--resume auto`
// with --init-from resumes the folder's checkpoint where there is one (clearing init_from), else
// starts from --init-from's (clearing resume), so one command starts a fine-tune and continues it
// after a requeue. Collective over comm (the search verifies candidates together).
std::string checkpoint_to_load(TrainOptions& options, MPI_Comm comm);

}  // namespace gpt
