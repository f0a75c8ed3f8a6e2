// The start-up report a batch job's log needs before the first step: the job (Slurm's job id and
// restart count, when under Slurm), the resolved grid with the CPU threads per rank, and the node
// map: which global ranks run on which host, with their tp groups, and a warning for every tp
// group split across hosts (its all-reduces then leave the node).
#pragma once

#include <string>
#include <vector>

#include <mpi.h>

#include "parallel/process_grid.h"

namespace gpt {

// Collective over world (every rank sends its host name and thread count); global rank 0 prints.
void print_startup_report(MPI_Comm world, const GridShape& shape, int threads);

struct ReportLine {
  bool warning = false;  // printed as "warning: ..." on stderr
  std::string text;
};

// The report from what was gathered, indexed by global rank (pure: what rank 0 prints after the
// job line).
std::vector<ReportLine> startup_report_lines(const GridShape& shape,
                                             const std::vector<std::string>& host_of_rank,
                                             const std::vector<int>& threads_of_rank);

}  // namespace gpt
