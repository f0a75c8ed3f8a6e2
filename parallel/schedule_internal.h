// What the three files of the pipeline schedules share and nothing else uses: the builders
// (pipeline_schedule.cpp), the checker (schedule_check.cpp) and the replay (schedule_replay.cpp).
// The checker proves a schedule deadlock-free by replaying it, and the replay reports the
// checker's peak counts, so what the checker accepts is exactly what simulate() can run.
#pragma once

#include <string>
#include <vector>

#include "parallel/pipeline_schedule.h"

namespace gpt::schedule_detail {

// "schedule 1f1b (pp 2, 8 microbatches, 1 virtual stages)", the start of every message.
std::string settings_text(const Schedule& s);

// A full backward or its input half: what hands a gradient to the previous stage.
inline bool is_backward_input(ActionKind k) {
  return k == ActionKind::kBackward || k == ActionKind::kBackwardInput;
}

// Throws unless the lists are shaped for the settings and name only owned microbatches and
// chunks, which the replay and the counts index by.
void check_shape(const Schedule& s);

// What the lists hold at most, counted in list order: a stage runs its list in order, so timing
// cannot change these peaks. Laid out as Schedule's stated counts.
struct Peaks {
  std::vector<int> caches, b_caches;
  std::vector<std::vector<int>> chunk_caches, chunk_grad_sets;
};
Peaks count_peaks(const Schedule& s);

// Replays the lists at unit costs: empty when they run to the end, else a report of where each
// stage waits.
std::string find_stall(const Schedule& s);

}  // namespace gpt::schedule_detail
