// train's --pipeline-layers auto: the split of the blocks over the pipeline's stages that the
// planner's cost and memory models find fastest for this job (parallel/planner/balance_stages.h),
// priced on --cluster, chosen before anything is allocated and identically on every rank.
#pragma once

#include "framework/backend.h"
#include "launch/training/train_options.h"

namespace gpt {

// When options.layout asks for auto: sets its pipeline_layers to the chosen split and logs it in
// one line, with the step predicted against the even split's and the stages' memory. `device`:
// the backend the run builds. A one-line input error for a --cluster that cannot be read, or a
// CPU run without one.
void choose_pipeline_layers(TrainOptions& options, int world_size, DeviceKind device);

}  // namespace gpt
