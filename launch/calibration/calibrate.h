// `plan --calibrate FILE` (docs/PLANNER.md, "Calibrating a CPU cluster"): measures this machine
// and writes a cluster file the planner prices CPU layouts with. A "GPU" there is one rank's
// share of the CPU: its GEMM FLOP/s by product size, its streaming bandwidth, the real layers'
// pass times against the model's (the pass scales), and the MPI all-reduce and point-to-point
// cost by message size over the job's ranks.
#pragma once

#include <mpi.h>

#include <string>

#include "framework/config.h"
#include "parallel/planner/cluster.h"

namespace gpt {

// Runs the measurements on every rank of `world` (the GEMM and stream timings on rank 0, the
// layers of `model` and the cost of sharing a core on one rank a core of the first node, the
// others waiting; the collectives on all) within about `seconds`, prints what it measured beside
// what the written model predicts, and returns the cluster; rank 0 writes it to `output`.
Cluster calibrate_cpu_cluster(MPI_Comm world, const ModelConfig& model, double seconds,
                              const std::string& output);

}  // namespace gpt
