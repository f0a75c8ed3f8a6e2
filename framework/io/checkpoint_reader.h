// Reading a checkpoint file (format: checkpoint_format.h). Reading is serial: every rank opens
// the file itself and reads the slabs of its own layout, whatever layout wrote the file;
// verifying the crc32s is collective, each rank checking an equal share of the file's bytes.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "framework/config.h"
#include "framework/io/checkpoint_format.h"
#include "framework/io/hdf5_util.h"
#include "framework/parameter.h"

namespace gpt {

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
  // Throws unless the /model datasets hold at least as many values as `model` (the file's own
  // config) has parameters: checked before the model is built, so a config that makes up a
  // larger model fails here instead of allocating it.
  void check_holds_model(const ModelConfig& model) const;
  OptimizerMeta optimizer() const;  // throws when the file has no /optimizer
  bool has(const std::string& dataset) const { return shapes_.count(dataset) > 0; }
  std::vector<int64_t> shape(const std::string& dataset) const;  // e.g. "/model/wte"
  // Every dataset path in the file, in name order.
  std::vector<std::string> datasets() const;
  // The parameters' names: the datasets under /model without the prefix, in name order.
  std::vector<std::string> parameter_names() const;
  // Reads the logical block slab.start/count of a dataset into host_out (row-major, slab.numel()
  // floats; slab.local_offset is ignored).
  void read_slab(const std::string& dataset, const Slab& slab, float* host_out) const;
  // A dataset whole, row-major.
  std::vector<float> read_dataset(const std::string& dataset) const;

 private:
  std::string path_;
  h5::Handle file_;
  CheckpointMeta meta_;
  bool has_optimizer_ = false;
  bool verified_ = false;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, int64_t> crcs_;  // the stored crc32 attributes
  OptimizerMeta optimizer_meta_;         // read with the rest of the metadata
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

}  // namespace gpt
