// What train says about memory: the memory model's prediction for this run (from the options,
// before anything is allocated), the --memory-limit-gb check, the --memory-report table, the
// start-up lines and metrics events, and at the end the measured peaks beside the prediction.
// The numbers come from parallel/memory_model.h and the backend's ledger; nothing is computed
// here that they do not say.
#pragma once

#include <mpi.h>

#include <string>

#include "framework/backend.h"
#include "launch/training/metrics.h"
#include "launch/training/train_options.h"
#include "parallel/memory_model.h"

namespace gpt {

// The model's input for this run on `world_size` ranks and backend kind `device`.
MemoryModelInput memory_model_input(const TrainOptions& options, int world_size, DeviceKind device);
// The kind --device resolves to (auto: cuda when the build has it and a GPU is visible), for
// predicting before the backend exists.
DeviceKind predicted_device(const ExecutionOptions& execution);

// --memory-report: every rank's prediction as a table (rank, tp/dp/pp coordinates, categories,
// total), printed by rank 0.
std::string memory_report_table(const MemoryModelInput& in);

// The bytes --memory-limit-gb allows a rank on `device`: limit_gb x 1e9; without a limit (0) the
// machine's physical memory on the CPU, 0 (none) on cuda.
int64_t memory_limit_bytes(double limit_gb, DeviceKind device);

// Throws a one-line input error when some rank's predicted total exceeds `limit_gb` (GB, 1e9
// bytes; 0 = none, except on the CPU: the machine's physical memory), naming the heaviest rank,
// its stage, its total, its largest category and what would bring it under.
void check_memory_limit(const MemoryModelInput& in, double limit_gb);

// Start-up: logs rank 0's and the heaviest rank's predictions and writes a metrics event
// {"event": "memory", "kind": "predicted", ...} for rank 0 and the heaviest rank of each stage.
void log_predicted_memory(const MemoryModelInput& in, MetricsWriter& metrics);

// The end: every rank compares its ledger's peaks with its prediction (a mismatch is logged as a
// warning by that rank); rank 0 writes {"event": "memory", "kind": "measured", ...} for the same
// ranks as at start-up, each with its resident-set peak (rss_peak_bytes). Collective over world.
void report_measured_memory(MPI_Comm world, const MemoryModelInput& in, const Backend& backend,
                            MetricsWriter& metrics);

// This process's resident-set peak (VmHWM), 0 where the system does not say.
int64_t resident_set_peak_bytes();

}  // namespace gpt
