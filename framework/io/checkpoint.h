// Checkpoint files (docs/DESIGN.md "Checkpoint"): one HDF5 file per checkpoint, independent of the
// layout that wrote it. /model/<name> holds each parameter's full logical tensor (float32,
// contiguous), /optimizer/<name>/<state> its optimizer state, each dataset with a crc32
// attribute; root attributes describe the run, and complete = 1 is written last. Writing is
// collective (MPI-IO): each rank writes the slabs it owns and computes their crc32 shares, so the
// checksums cost no re-reading. Reading is serial: every rank opens the file itself and reads the
// slabs of its own layout, whatever layout wrote the file; verifying the crc32s is collective,
// each rank checking an equal share of the file's bytes.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/io/hdf5_util.h"
#include "framework/parameter.h"

namespace gpt {

inline constexpr const char* kCheckpointFormat = "gpt-train-checkpoint";
inline constexpr int64_t kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  int64_t step = 0;
  int64_t consumed_samples = 0;
  uint64_t seed = 0;        // stored as int64 (bit pattern)
  std::string config_json;  // JSON text of the model and training options (attribute "config")
  std::string tokenizer;    // "bytes"
  std::string layout;       // informational, e.g. "tp=1 dp=1 pp=1"
};

struct OptimizerMeta {
  std::string type;  // "adamw" | "sgd"
  // Double attributes of /optimizer (lr, beta1, ...), in name order when read back.
  std::vector<std::pair<std::string, double>> hyperparameters;
  int64_t step = 0;  // attribute "step" of /optimizer: one count for all parameters
  // ParameterStore state buffers, written as /optimizer/<param>/<state>: {"exp_avg",
  // "exp_avg_sq"} (AdamW) or {"momentum_buffer"} (SGD); read back in name order.
  std::vector<std::string> state_names;
};

// Whether this rank writes its copy of a parameter. The caller decides so that every element has
// exactly one writer: dp rank 0, tp rank 0 for tp-replicated parameters, never a tied copy.
using WriteOwner = std::function<bool(const Parameter&)>;

// "<dir>/step-00000100.h5".
std::string checkpoint_path(const std::string& dir, int64_t step);

// Collective over comm (every rank of the job; all pass the same meta, optimizer kind and
// keep_last). Writes <dir>/step-%08d.h5 under a temporary name, each rank writing the slabs of
// the parameters it owns, then rank 0 adds the crc32s and root attributes, complete = 1 last,
// fsyncs, renames it into place and rewrites <dir>/latest. With keep_last > 0, older step-*.h5
// files beyond the newest keep_last are removed. Any failure throws gpt::Error on every rank
// (no rank is left in a collective) and never leaves a partial file under the final name; a
// disk without room for the tensors, or one that fills during the write, is such a failure
// (the temporary is removed, earlier checkpoints are untouched). Returns the final path.
// state_owner (null: owner) decides the writers of the optimizer states; each writes the blocks
// its state buffers hold (ParameterStore::state_slabs: all of a parameter, or under the
// distributed optimizer this dp rank's shard of it, into the same full datasets).
std::string write_checkpoint(const std::string& dir, const CheckpointMeta& meta,
                             const OptimizerMeta* optimizer, ParameterStore& store,
                             const WriteOwner& owner, MPI_Comm comm, int keep_last,
                             const WriteOwner* state_owner = nullptr);

// A checkpoint opened read-only with the serial driver. The constructor checks the file's
// structure and throws a one-line gpt::Error naming the file: missing, not HDF5 or truncated,
// wrong format or version, complete != 1, a dataset not float32 or without a crc32. verify()
// then checks the data against the crc32s; load_checkpoint requires it.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& path);

  // Collective over comm (every rank has opened the same file): each rank reads an equal share
  // of the file's bytes (whole rows, in dataset name order), and the crc32 shares are XOR-
  // reduced, so each tensor is read and checked once across the job. A mismatch throws
  // AgreedError on every rank naming the file and the first failing dataset.
  void verify(MPI_Comm comm);
  bool verified() const { return verified_; }

  const std::string& path() const { return path_; }
  const CheckpointMeta& meta() const { return meta_; }
  bool has_optimizer() const { return has_optimizer_; }
  OptimizerMeta optimizer() const;  // throws when the file has no /optimizer
  bool has(const std::string& dataset) const { return shapes_.count(dataset) > 0; }
  std::vector<int64_t> shape(const std::string& dataset) const;  // e.g. "/model/wte"
  // Every dataset path in the file, in name order.
  std::vector<std::string> datasets() const;
  // Reads the logical block slab.start/count of a dataset into host_out (row-major, slab.numel()
  // floats; slab.local_offset is ignored).
  void read_slab(const std::string& dataset, const Slab& slab, float* host_out) const;

 private:
  std::string path_;
  h5::Handle file_;
  CheckpointMeta meta_;
  bool has_optimizer_ = false;
  bool verified_ = false;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, int64_t> crcs_;  // the stored crc32 attributes
};

// Collective over comm: opens path on every rank (a failure on any is agreed) and verifies it.
std::unique_ptr<CheckpointReader> open_checkpoint(const std::string& path, MPI_Comm comm);

// Loads every parameter of store from a verified reader: values, and each of store.state_names()
// when include_optimizer (the part of it the store's state segments keep: any layout, sharded or
// not, reads any file). Tied copies read /model/<name> like any other. A missing dataset or a
// logical shape different from the parameter's throws a one-line error naming the parameter
// and both shapes. Storage outside the slabs (padding) is set to 0.
// With truncate_positions (fine-tuning at a shorter --seq-len), the file's wpe may hold more
// positions than the model: the first ones are read.
void load_checkpoint(const CheckpointReader& reader, ParameterStore& store, bool include_optimizer,
                     bool truncate_positions = false);

// Removes the temporaries a killed checkpoint write left in dir (step-*.h5.tmp, latest.tmp; never
// taken for checkpoints, but they hold disk space) and returns their names. Call on one rank,
// before this run writes.
std::vector<std::string> remove_interrupted_writes(const std::string& dir);

// The newest valid checkpoint in dir, "" if there is none: the one `latest` names first, then
// step-*.h5 by descending step. Collective over comm: each candidate is checked with
// open_checkpoint. Invalid files are skipped, with their reasons appended to skipped (when not
// null). Where step-*.h5 files exist but none is valid, throws a one-line error naming each and
// why: a fresh start would train over them.
std::string find_latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped,
                                   MPI_Comm comm);

}  // namespace gpt
