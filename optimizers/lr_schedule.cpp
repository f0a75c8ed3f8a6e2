// Warm-up plus cosine decay; see lr_schedule.h for the edge cases.
#include "optimizers/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "framework/check.h"
#include "optimizers/optimizer.h"

namespace gpt {

double LrSchedule::at(int64_t step) const {
  GPT_CHECK(step >= 0, "learning rate asked for negative step " << step);
  const int64_t s = std::min(step, total_steps);
  if (s <= warmup_steps) {
    // Only s == 0 reaches here without a warm-up (step 0, or a run of 0 steps): the schedule has
    // not started decaying, so the peak.
    if (warmup_steps == 0) return lr;
    return lr * static_cast<double>(s) / static_cast<double>(warmup_steps);
  }
  // Here warmup_steps < s <= total_steps, so the denominator is positive.
  const double progress =
      static_cast<double>(s - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  return min_lr + (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
}

void LrSchedule::validate() const {
  check_hyperparameter("lr", lr);
  check_hyperparameter("min_lr", min_lr);
  GPT_INPUT_CHECK(min_lr <= lr, "--min-lr " << min_lr << " exceeds --lr " << lr);
  GPT_INPUT_CHECK(warmup_steps >= 0,
                  "--warmup-steps must be at least 0 (got " << warmup_steps << ")");
  GPT_INPUT_CHECK(total_steps >= 0, "--steps must be at least 0 (got " << total_steps << ")");
}

}  // namespace gpt
