// --trace (docs/DESIGN.md "Pipeline schedules are data"): the executor's recorded actions and
// receive waits of every rank, on clocks aligned to global rank 0 by measured offsets, merged by
// rank 0 into one Chrome trace JSON (Perfetto and chrome://tracing open it; scripts/trace_to_svg.py
// draws it as an SVG timeline).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel/pipeline_executor.h"
#include "parallel/process_grid.h"

namespace gpt {

// Throws a one-line input error naming --trace when `path` cannot be opened for writing (call on
// the writing rank at start-up, inside agree_on_failure). Leaves no file behind that was not
// there.
void check_trace_path(const std::string& path);

// Collective over grid.world(): this rank's clock offset against global rank 0 (ping-pong rounds,
// the round with the smallest round trip: offset = remote - (t0 + t1) / 2).
// Returns, on rank 0, every rank's offset in seconds (rank 0's is 0); elsewhere an empty vector.
std::vector<double> measure_clock_offsets(ProcessGrid& grid, int rounds = 8);

// Collective over grid.world(): gathers every rank's events to rank 0, which writes the merged
// Chrome trace to `path`: complete events ("ph":"X", "ts"/"dur" in microseconds from the first
// event, "pid" 0, "tid" the global rank), named "F3" / "B3" / "W3" (".c1" for chunk 1 when
// virtual_stages > 1; "B" is the full backward, or its input half under zb-h1) or "wait" (a
// receive; "for" names the action), "cat" forward / backward / weight / wait, args microbatch,
// chunk, step; plus one thread_name per rank "rank r (tp t, dp d, pp s)".
// Returns the total number of events (on every rank).
int64_t write_trace(const std::string& path, ProcessGrid& grid,
                    const std::vector<TraceEvent>& events, int virtual_stages,
                    const std::string& schedule_name);

}  // namespace gpt
