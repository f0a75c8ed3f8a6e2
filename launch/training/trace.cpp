// Chrome traces of the pipeline (see trace.h).
#include "launch/training/trace.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <system_error>

#include <mpi.h>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/json.h"
#include "framework/timer.h"
#include "framework/user_files.h"

namespace gpt {
namespace {

constexpr int kFields = 6;  // kind, microbatch, chunk, step, start, end
constexpr int kPingTag = 7301, kPongTag = 7302;

// How an event kind is shown: its letter in the event's name and its category.
struct KindText {
  const char* letter;
  const char* category;
};

KindText kind_text(int kind) {
  switch (kind) {
    case TraceEvent::kForward:
      return {"F", "forward"};
    case TraceEvent::kBackward:
    case TraceEvent::kBackwardInput:
      return {"B", "backward"};
    case TraceEvent::kBackwardWeight:
      return {"W", "weight"};
    default:
      return {"wait", "wait"};
  }
}

std::string action_name(int kind, int microbatch, int chunk, int virtual_stages) {
  std::string name = std::string(kind_text(kind).letter) + std::to_string(microbatch);
  if (virtual_stages > 1) name += ".c" + std::to_string(chunk);
  return name;
}

}  // namespace

void check_trace_path(const std::string& path) {
  if (path.empty()) return;
  std::error_code error;
  const bool existed = std::filesystem::exists(path, error);
  require_writable_file(path, "--trace");
  std::FILE* f = std::fopen(path.c_str(), "a");
  GPT_INPUT_CHECK(f != nullptr, "--trace " << path << ": cannot open the file for writing");
  std::fclose(f);
  if (!existed) std::filesystem::remove(path, error);
}

std::vector<double> measure_clock_offsets(ProcessGrid& grid, int rounds) {
  MPI_Comm comm = grid.world().mpi_comm();
  const int rank = grid.world().rank(), size = grid.world().size();
  std::vector<double> offsets;
  if (rank == 0) offsets.assign(static_cast<size_t>(size), 0.0);
  for (int r = 1; r < size; ++r) {
    if (rank == 0) {
      double best_rtt = std::numeric_limits<double>::infinity();
      for (int i = 0; i < rounds; ++i) {
        double remote = 0.0;
        const double t0 = now_seconds();
        GPT_MPI_CHECK(MPI_Send(&t0, 1, MPI_DOUBLE, r, kPingTag, comm));
        GPT_MPI_CHECK(MPI_Recv(&remote, 1, MPI_DOUBLE, r, kPongTag, comm, MPI_STATUS_IGNORE));
        const double t1 = now_seconds();
        if (t1 - t0 < best_rtt) {
          best_rtt = t1 - t0;
          offsets[static_cast<size_t>(r)] = remote - 0.5 * (t0 + t1);
        }
      }
    } else if (rank == r) {
      for (int i = 0; i < rounds; ++i) {
        double ping = 0.0;
        GPT_MPI_CHECK(MPI_Recv(&ping, 1, MPI_DOUBLE, 0, kPingTag, comm, MPI_STATUS_IGNORE));
        const double now = now_seconds();
        GPT_MPI_CHECK(MPI_Send(&now, 1, MPI_DOUBLE, 0, kPongTag, comm));
      }
    }
  }
  return offsets;
}

namespace {

// Rank 0's merged trace of every rank's events (`all`: kFields doubles an event, rank r's at
// [displs[r], displs[r] + counts[r])), each rank's clock moved onto rank 0's by its offset.
Json chrome_trace(ProcessGrid& grid, const std::vector<double>& all, const std::vector<int>& counts,
                  const std::vector<int>& displs, const std::vector<double>& offsets,
                  int virtual_stages, const std::string& schedule_name) {
  const GridShape& shape = grid.shape();
  const int size = shape.world();
  // Rank 0's clock: remote time t maps to t - offset; times count from the first event.
  double first = std::numeric_limits<double>::infinity();
  for (int r = 0; r < size; ++r)
    for (int i = displs[static_cast<size_t>(r)];
         i < displs[static_cast<size_t>(r)] + counts[static_cast<size_t>(r)]; i += kFields)
      first = std::min(first, all[static_cast<size_t>(i + 4)] - offsets[static_cast<size_t>(r)]);
  if (all.empty()) first = 0.0;
  Json events = Json::array();
  events.push_back({{"ph", "M"},
                    {"pid", 0},
                    {"name", "process_name"},
                    {"args", {{"name", "train (" + schedule_name + ")"}}}});
  for (int r = 0; r < size; ++r) {
    const GridCoordinates c = shape.coordinates_of(r);
    const std::string name = GPT_MSG("rank " << r << " (tp " << c.tp_rank << ", dp " << c.dp_rank
                                             << ", pp " << c.stage << ")");
    events.push_back(
        {{"ph", "M"}, {"pid", 0}, {"tid", r}, {"name", "thread_name"}, {"args", {{"name", name}}}});
    events.push_back({{"ph", "M"},
                      {"pid", 0},
                      {"tid", r},
                      {"name", "thread_sort_index"},
                      {"args", {{"sort_index", r}}}});
  }
  for (int r = 0; r < size; ++r) {
    const double offset = offsets[static_cast<size_t>(r)];
    const int begin = displs[static_cast<size_t>(r)];
    const int end = begin + counts[static_cast<size_t>(r)];
    for (int i = begin; i < end; i += kFields) {
      const double* e = &all[static_cast<size_t>(i)];
      const int kind = static_cast<int>(e[0]), mb = static_cast<int>(e[1]),
                chunk = static_cast<int>(e[2]), step = static_cast<int>(e[3]);
      Json args = {{"microbatch", mb}, {"chunk", chunk}, {"step", step}};
      // A recorded wait (for a send's buffer, then for a receive) precedes its action: the next
      // event of this rank that is not a wait.
      int action = i + kFields;
      while (kind == TraceEvent::kWait && action < end &&
             static_cast<int>(all[static_cast<size_t>(action)]) == TraceEvent::kWait)
        action += kFields;
      if (kind == TraceEvent::kWait && action < end) {
        const double* next = &all[static_cast<size_t>(action)];
        args["for"] = action_name(static_cast<int>(next[0]), static_cast<int>(next[1]),
                                  static_cast<int>(next[2]), virtual_stages);
      }
      if (kind == TraceEvent::kBackwardInput) args["part"] = "input";
      events.push_back(
          {{"ph", "X"},
           {"pid", 0},
           {"tid", r},
           {"name",
            kind == TraceEvent::kWait ? "wait" : action_name(kind, mb, chunk, virtual_stages)},
           {"cat", kind_text(kind).category},
           {"ts", 1e6 * (e[4] - offset - first)},
           {"dur", 1e6 * (e[5] - e[4])},
           {"args", std::move(args)}});
    }
  }
  return {{"displayTimeUnit", "ms"},
          {"otherData",
           {{"schedule", schedule_name},
            {"virtual_stages", virtual_stages},
            {"tp", shape.tp},
            {"dp", shape.dp},
            {"pp", shape.pp}}},
          {"traceEvents", std::move(events)}};
}

}  // namespace

int64_t write_trace(const std::string& path, ProcessGrid& grid,
                    const std::vector<TraceEvent>& events, int virtual_stages,
                    const std::string& schedule_name) {
  MPI_Comm comm = grid.world().mpi_comm();
  const int rank = grid.world().rank(), size = grid.world().size();
  const std::vector<double> offsets = measure_clock_offsets(grid);

  std::vector<double> packed;
  packed.reserve(events.size() * kFields);
  for (const TraceEvent& e : events) {
    packed.insert(packed.end(),
                  {static_cast<double>(e.kind), static_cast<double>(e.microbatch),
                   static_cast<double>(e.chunk), static_cast<double>(e.step), e.start, e.end});
  }
  const int count = static_cast<int>(packed.size());
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  GPT_MPI_CHECK(MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, comm));
  int total = 0;
  if (rank == 0) {
    for (int r = 0; r < size; ++r) {
      displs[static_cast<size_t>(r)] = total;
      total += counts[static_cast<size_t>(r)];
    }
  }
  std::vector<double> all(rank == 0 ? static_cast<size_t>(total) : 0);
  GPT_MPI_CHECK(MPI_Gatherv(packed.data(), count, MPI_DOUBLE, all.data(), counts.data(),
                            displs.data(), MPI_DOUBLE, 0, comm));

  // Everyone learns whether rank 0 could write, so a failure ends every rank alike.
  agree_on_failure(comm, [&] {
    if (rank != 0) return;
    const std::string text =
        chrome_trace(grid, all, counts, displs, offsets, virtual_stages, schedule_name).dump();
    std::FILE* f = std::fopen(path.c_str(), "w");
    GPT_INPUT_CHECK(f != nullptr, "--trace " << path << ": cannot write the file");
    const bool written = std::fputs((text + "\n").c_str(), f) >= 0;
    GPT_INPUT_CHECK(std::fclose(f) == 0 && written,
                    "--trace " << path << ": cannot write the file");
  });
  long long total_events = rank == 0 ? total / kFields : 0;
  GPT_MPI_CHECK(MPI_Bcast(&total_events, 1, MPI_LONG_LONG, 0, comm));
  return total_events;
}

}  // namespace gpt
