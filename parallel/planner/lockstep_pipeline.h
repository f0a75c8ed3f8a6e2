// The step of DeepSpeed's pipeline engine (its TrainSchedule with blocking exchanges), priced
// for the published runs made with it (FrameworkProfile::lockstep_pipeline). Its schedule is
// not one this project's executor runs, so the replay (parallel/pipeline_schedule.h) does not
// play it: each of its 2 (m + pp - 1) steps gives every stage one forward or one backward (the
// stage's parity and the step's decide which, and of which microbatch), preceded by that step's
// sends and receives, and a send completes only when its neighbour receives it, in that
// neighbour's same step. Every step therefore ends on every stage when the slowest stage's
// step ends: the step time is the sum over steps of the slowest stage's step.
#pragma once

#include <vector>

#include "parallel/pipeline_schedule.h"

namespace gpt {

// The time of all steps of `microbatches` microbatches over stages.size() stages, each
// stage's forward and backward (its backward_input plus backward_weight) for one microbatch,
// and `transfer` seconds for each blocking send or receive of an activation or gradient.
double lockstep_pipeline_seconds(const std::vector<PassCosts>& stages, int microbatches,
                                 double transfer);

}  // namespace gpt
