// Writing a checkpoint file (format: checkpoint_format.h). Writing is collective (MPI-IO): each
// rank writes the slabs it owns and computes their crc32 shares, so the checksums cost no
// re-reading.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "framework/io/checkpoint_directory.h"
#include "framework/io/checkpoint_format.h"
#include "framework/parameter.h"

namespace gpt {

// Whether this rank writes its copy of a parameter. The caller decides so that every element has
// exactly one writer: dp rank 0, tp rank 0 for tp-replicated parameters, never a tied copy.
using WriteOwner = std::function<bool(const Parameter&)>;
// A parameter's local storage (local_numel floats, host memory), made when its turn to be written
// comes: how convert writes weights from elsewhere one tensor at a time, with the store's
// parameters registered but never allocated.
using ValueSource = std::function<std::vector<float>(const Parameter&)>;

// Collective over comm (every rank of the job; all pass the same meta, optimizer kind and
// keep_last). Writes <dir>/step-%08d.h5 under a temporary name, each rank writing the slabs of
// the parameters it owns, then rank 0 adds the crc32s and root attributes, complete = 1 last,
// fsyncs, renames it into place and rewrites <dir>/latest. With keep_last > 0, older step-*.h5
// files beyond the newest keep_last that verify are removed (remove_beyond_keep_last). Any failure
// throws gpt::Error on every rank (no rank is left in a collective) and never leaves a partial file
// under the final name; a disk without room for the tensors, or one that fills during the write, is
// such a failure (the temporary is removed, earlier checkpoints are untouched). Returns the final
// path. state_owner (null: owner) decides the writers of the optimizer states; each writes the
// blocks its state buffers hold (ParameterStore::state_slabs: all of a parameter, or under the
// distributed optimizer this dp rank's shard of it, into the same full datasets). values (null:
// the store's) gives the parameters' values instead of the store. verified (null: none)
// remembers the older checkpoints keep_last pruning has read back (checkpoint_directory.h).
std::string write_checkpoint(const std::string& dir, const CheckpointMeta& meta,
                             const OptimizerMeta* optimizer, ParameterStore& store,
                             const WriteOwner& owner, MPI_Comm comm, int keep_last,
                             const WriteOwner* state_owner = nullptr,
                             const ValueSource* values = nullptr,
                             VerifiedCheckpoints* verified = nullptr);

}  // namespace gpt
