// DeepSpeed's TrainSchedule priced step by step (lockstep_pipeline.h). Which microbatch a
// stage runs at a step, and whether forward or backward, follows deepspeed/runtime/pipe/
// schedule.py (TrainSchedule._step_to_micro_batch): a stage runs forwards on the steps of its
// own parity, its forwards of microbatch (step / 2 - stage / 2) rounded down, its backwards
// trailing by the stages still ahead of it.
#include "parallel/planner/lockstep_pipeline.h"

#include <algorithm>

namespace gpt {
namespace {

struct StepWork {
  int microbatch = 0;
  bool forward = true;
};

StepWork step_work(int step, int stage, int stages) {
  const bool even_step = step % 2 == 0, even_stage = stage % 2 == 0;
  if (even_step == even_stage) return {(even_step ? step / 2 : (step - 1) / 2) - stage / 2, true};
  if (even_step) return {step / 2 - stages + (stage + 1) / 2, false};
  return {(step - 1) / 2 - stages + 1 + stage / 2, false};
}

}  // namespace

double lockstep_pipeline_seconds(const std::vector<PassCosts>& stages, int microbatches,
                                 double transfer) {
  const int pp = static_cast<int>(stages.size());
  const auto valid = [&](int microbatch) { return microbatch >= 0 && microbatch < microbatches; };
  std::vector<int> previous(stages.size(), -1);  // the microbatch of each stage's last step
  double total = 0;
  for (int step = 0; step < 2 * (microbatches + pp - 1); ++step) {
    double slowest = 0;
    for (int stage = 0; stage < pp; ++stage) {
      const StepWork w = step_work(step, stage, pp);
      const PassCosts& c = stages[static_cast<size_t>(stage)];
      // A forward step receives its activation and sends the last backward's gradient back; a
      // backward step sends the last forward's activation on and receives its gradient.
      const bool neighbour = w.forward ? stage > 0 : stage < pp - 1;
      int transfers = 0;
      if (neighbour) transfers = (valid(w.microbatch) ? 1 : 0) + (valid(previous[stage]) ? 1 : 0);
      double seconds = transfers * transfer;
      if (valid(w.microbatch))
        seconds += w.forward ? c.forward : c.backward_input + c.backward_weight;
      slowest = std::max(slowest, seconds);
      previous[stage] = w.microbatch;
    }
    total += slowest;
  }
  return total;
}

}  // namespace gpt
