// `plan --calibrate-turns`: the measurement of what ranks taking turns on shared cores pay each
// time two of them meet (cluster.h, CpuModel::turn_seconds; docs/PLANNER.md, "Taking turns at a
// meeting"). Pairs of ranks run the calibration model at tp 2, share x cores ranks at once, and
// what their forward and backward take beyond processor sharing and the measured sharing scale
// is divided among its blocking tp collectives. Written here because no library measures this:
// it is a property of this machine's scheduler and Open MPI's waiting under oversubscription.
#pragma once

#include <mpi.h>

#include <string>

#include "framework/config.h"
#include "parallel/planner/cluster.h"

namespace gpt {

// `plan --calibrate-turns FILE`: with every rank of `world` on one node, and at least 2 ranks a
// core of the CPU cluster FILE (written by --calibrate), measures the cost of meeting while
// taking turns at micro-batches 1 and 4 and shares of 2, 4 and 8 ranks a core (those the job has
// the ranks for), and rank 0 writes FILE back with turn_seconds added.
// `model` is the layers timed; `seconds` the rough time budget.
void calibrate_turns(MPI_Comm world, const ModelConfig& model, double seconds,
                     const std::string& file);

}  // namespace gpt
