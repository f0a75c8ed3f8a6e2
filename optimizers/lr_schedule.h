// The learning-rate schedule (docs/DESIGN.md "Optimizer semantics"): linear warm-up to `lr`, then a
// half-cosine decay to `min_lr` at `total_steps`, the same for every optimizer. A pure function of
// the 1-based optimizer step, so a resumed run needs no schedule state.
#pragma once

#include <cstdint>

namespace gpt {

struct LrSchedule {
  double lr = 0.0;           // peak, reached at the end of warm-up
  double min_lr = 0.0;       // reached at total_steps and kept beyond
  int64_t warmup_steps = 0;  // 0 = no warm-up: step 1 already decays from lr
  int64_t total_steps = 0;   // the run's total optimizer steps (--steps)

  // The learning rate of optimizer step `step` (1 = the first update). The step is clamped to
  // total_steps first, so the whole schedule is a function of min(step, total_steps): a warm-up
  // longer than the run stops part way up, and steps past the end keep the last value.
  double at(int64_t step) const;

  // Throws a one-line gpt::Error naming the option (--lr, --min-lr, --warmup-steps, --steps) when
  // a value is negative or min_lr exceeds lr.
  void validate() const;
};

}  // namespace gpt
