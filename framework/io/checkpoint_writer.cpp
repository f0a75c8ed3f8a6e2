// Writing a checkpoint file (checkpoint_writer.h), collectively with MPI-IO. The write runs in
// phases, each ending in an agreement over comm so a failure seen by one rank becomes the same
// gpt::Error on every rank instead of a hang:
//   1. local checks + rank 0 prepares the directory            -> agree
//   2. allgather of every rank's parameter names, shapes and ownership; the merged catalogue
//      (sorted, identical on every rank) fixes the collective create/write order
//   3. rank 0 checks the disk's free space against the tensors' size    -> agree
//   4. collective create, one collective write per slab round, an agreement every 64 MiB and
//      at the end (a full disk fails every rank before the collective close), collective close
//      -> agree; each writer's crc32 shares of its slabs are XOR-reduced to rank 0
//   5. rank 0 alone: crc32 attributes, root attributes, complete = 1, fsync, rename, latest,
//      keep_last                                               -> agree (broadcast of its status)
// The folder's side of phase 5 (fsync, `latest`, keep_last) is checkpoint_directory.cpp's.
#include "framework/io/checkpoint_writer.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <vector>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/io/checkpoint_directory.h"
#include "framework/io/checkpoint_metadata.h"
#include "framework/io/crc32.h"
#include "framework/io/hdf5_util.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

// A failed write leaves the temporary file empty rather than half written; best effort, since an
// error is already on its way out.
void empty_file(const std::string& path) {
  std::error_code ignored;
  fs::resize_file(path, 0, ignored);
}

// ---- phase 2: the catalogue of datasets

struct CatalogueEntry {
  std::vector<int64_t> shape;
  int64_t max_owned_slabs = 0;  // most slabs any one rank writes: the number of write rounds
  int64_t owned_elements = 0;   // over all ranks; must equal the tensor's size
  // The same for the optimizer states' datasets (ParameterStore::state_slabs of the state owners).
  int64_t max_state_slabs = 0;
  int64_t state_elements = 0;
  int first_rank = -1;  // for messages
};
using Catalogue = std::map<std::string, CatalogueEntry>;

// The blocks of p's optimizer state this rank writes, local offsets into the state buffers.
std::vector<Slab> owned_state_slabs(const ParameterStore& store, const Parameter& p,
                                    const WriteOwner& state_owner) {
  return state_owner(p) ? store.state_slabs(p) : std::vector<Slab>{};
}

// One line per parameter this rank holds: "<owned slabs> <owned elements> <state slabs> <state
// elements> <ndim> <dims...> <name>", the name last so it may contain anything but a newline.
std::string describe_local(const ParameterStore& store, const WriteOwner& owner,
                           const WriteOwner& state_owner) {
  std::ostringstream out;
  for (const Parameter& p : store.params()) {
    int64_t slabs = 0, elements = 0, state_elements = 0;
    if (owner(p)) {
      slabs = static_cast<int64_t>(p.slabs.size());
      for (const Slab& s : p.slabs) elements += s.numel();
    }
    const std::vector<Slab> state_slabs = owned_state_slabs(store, p, state_owner);
    for (const Slab& s : state_slabs) state_elements += s.numel();
    out << slabs << ' ' << elements << ' ' << state_slabs.size() << ' ' << state_elements << ' '
        << p.shape.size();
    for (int64_t d : p.shape) out << ' ' << d;
    out << ' ' << p.name << '\n';
  }
  return out.str();
}

// with_states: the optimizer's datasets are written too, so their writers must cover them.
Catalogue gather_catalogue(MPI_Comm comm, const std::string& local, bool with_states) {
  const int size = comm_size(comm);
  int length = static_cast<int>(local.size());
  std::vector<int> lengths(static_cast<size_t>(size)), offsets(static_cast<size_t>(size));
  GPT_MPI_CHECK(MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, comm));
  int total = 0;
  for (int r = 0; r < size; ++r) {
    offsets[static_cast<size_t>(r)] = total;
    total += lengths[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  GPT_MPI_CHECK(MPI_Allgatherv(local.data(), length, MPI_CHAR, all.data(), lengths.data(),
                               offsets.data(), MPI_CHAR, comm));
  Catalogue catalogue;
  for (int r = 0; r < size; ++r) {
    std::istringstream lines(all.substr(static_cast<size_t>(offsets[static_cast<size_t>(r)]),
                                        static_cast<size_t>(lengths[static_cast<size_t>(r)])));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream fields(line);
      int64_t slabs = 0, elements = 0, state_slabs = 0, state_elements = 0;
      size_t ndim = 0;
      fields >> slabs >> elements >> state_slabs >> state_elements >> ndim;
      std::vector<int64_t> shape(ndim);
      for (int64_t& d : shape) fields >> d;
      fields.get();  // the space before the name
      std::string name;
      std::getline(fields, name);
      GPT_CHECK(!fields.bad() && !name.empty(), "malformed checkpoint catalogue line: " << line);
      CatalogueEntry& entry = catalogue[name];
      if (entry.first_rank < 0) {
        entry.shape = shape;
        entry.first_rank = r;
      }
      // Every rank sees the same catalogue, so this error is raised on all of them alike.
      GPT_CHECK(entry.shape == shape, "parameter " << name << " has shape "
                                                   << h5::shape_string(entry.shape) << " on rank "
                                                   << entry.first_rank << " but "
                                                   << h5::shape_string(shape) << " on rank " << r);
      entry.max_owned_slabs = std::max(entry.max_owned_slabs, slabs);
      entry.owned_elements += elements;
      entry.max_state_slabs = std::max(entry.max_state_slabs, state_slabs);
      entry.state_elements += state_elements;
    }
  }
  for (const auto& [name, entry] : catalogue) {
    GPT_CHECK(entry.owned_elements == shape_numel(entry.shape),
              "checkpoint writers cover " << entry.owned_elements << " of the "
                                          << shape_numel(entry.shape) << " elements of parameter "
                                          << name
                                          << " (each element needs exactly one writing rank)");
    GPT_CHECK(!with_states || entry.state_elements == shape_numel(entry.shape),
              "checkpoint writers cover " << entry.state_elements << " of the "
                                          << shape_numel(entry.shape)
                                          << " optimizer state elements of parameter " << name);
  }
  return catalogue;
}

// ---- phase 1: local checks

void check_local(const ParameterStore& store, const WriteOwner& owner,
                 const OptimizerMeta* optimizer, bool values_from_source) {
  if (optimizer != nullptr) {
    const auto& names = store.state_names();
    for (const std::string& s : optimizer->state_names) {
      GPT_CHECK(std::find(names.begin(), names.end(), s) != names.end(),
                "checkpoint: optimizer state " << s << " is not in the parameter store");
    }
  }
  for (const Parameter& p : store.params()) {
    if (!owner(p)) continue;
    GPT_CHECK(values_from_source || p.value != nullptr,
              "checkpoint: parameter " << p.name << " is not allocated");
    for (const Slab& s : p.slabs) {
      bool ok = s.start.size() == p.shape.size() && s.count.size() == p.shape.size() &&
                s.local_offset >= 0 && s.local_offset + s.numel() <= p.local_numel;
      for (size_t d = 0; ok && d < p.shape.size(); ++d)
        ok = s.start[d] >= 0 && s.count[d] >= 0 && s.start[d] + s.count[d] <= p.shape[d];
      GPT_CHECK(ok,
                "checkpoint: parameter " << p.name << " has a slab outside its shape or storage");
    }
  }
}

// ---- phase 4: the collective write

// " (0.1 MiB free in <dir>)", for write errors: HDF5's own words ("file write failed") do not
// say that the disk is full.
std::string free_space_note(const std::string& dir) {
  struct statvfs info {};
  if (::statvfs(dir.c_str(), &info) != 0) return "";
  const double free_mib =
      static_cast<double>(info.f_bavail) * static_cast<double>(info.f_frsize) / (1024.0 * 1024.0);
  return GPT_MSG(" (" << std::fixed << std::setprecision(1) << free_mib << " MiB free in " << dir
                      << ")");
}

// This rank's crc32 share (crc32.h) of a slab of a tensor of the given shape: the slab's rows
// are the pieces, at their offsets in the tensor's row-major (file) order. The share is computed
// from the host copy being written, so the file's crc32 costs no re-reading.
uint32_t slab_crc32_share(const std::vector<int64_t>& shape, const Slab& slab, const float* data) {
  static_assert(std::endian::native == std::endian::little,
                "crc32 attributes are of little-endian float32 bytes, computed from host memory");
  Crc32Share share(static_cast<uint64_t>(shape_numel(shape)) * sizeof(float));
  if (slab.numel() == 0) return share.share();
  const size_t nd = shape.size();
  if (nd == 0) {
    share.add(0, data, sizeof(float));
    return share.share();
  }
  const int64_t run = slab.count[nd - 1], runs = slab.numel() / run;
  std::vector<int64_t> index(nd - 1, 0);  // position in the slab's leading dimensions
  for (int64_t r = 0; r < runs; ++r) {
    int64_t offset = 0;
    for (size_t d = 0; d < nd; ++d)
      offset = offset * shape[d] + slab.start[d] + (d + 1 < nd ? index[d] : 0);
    share.add(static_cast<uint64_t>(offset) * sizeof(float), data + r * run,
              static_cast<size_t>(run) * sizeof(float));
    for (size_t d = nd - 1; d-- > 0;) {  // next row: the last leading dimension fastest
      if (++index[d] < slab.count[d]) break;
      index[d] = 0;
    }
  }
  return share.share();
}

// One dataset's collective writes: round r (of `rounds`, the most any rank has) writes every
// rank's r-th slab (its data at base + local_offset), ranks with fewer slabs joining with an
// empty selection (a collective call needs every rank). A failed
// write (a full disk) does not throw here: this rank would leave the collective sequence the
// others are still in. It is recorded in `error` (the first one kept), the remaining rounds
// still run, and the caller agrees on it with the other ranks after the dataset. Returns this
// rank's crc32 share of the dataset.
uint32_t write_dataset_collective(hid_t file, const std::string& path, const CatalogueEntry& entry,
                                  int64_t rounds, const std::vector<Slab>& slabs, const float* base,
                                  Backend& backend, hid_t dcpl, hid_t dxpl, std::string& error) {
  const std::vector<hsize_t> dims = h5::to_hsize(entry.shape);
  h5::Handle space(
      GPT_H5_CHECK(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr)));
  h5::Handle dataset(GPT_H5_CHECK(
      H5Dcreate2(file, path.c_str(), H5T_IEEE_F32LE, space.id(), H5P_DEFAULT, dcpl, H5P_DEFAULT)));
  std::vector<float> host;
  uint32_t share = 0;
  for (int64_t round = 0; round < rounds; ++round) {
    h5::Handle file_space(GPT_H5_CHECK(H5Dget_space(dataset.id())));
    const Slab* slab = nullptr;
    if (round < static_cast<int64_t>(slabs.size())) slab = &slabs[static_cast<size_t>(round)];
    hsize_t n = slab != nullptr ? static_cast<hsize_t>(slab->numel()) : 0;
    const hsize_t one = 1;
    h5::Handle mem_space(GPT_H5_CHECK(H5Screate_simple(1, n > 0 ? &n : &one, nullptr)));
    host.assign(std::max<hsize_t>(n, 1), 0.0f);
    if (n > 0) {
      const std::vector<hsize_t> start = h5::to_hsize(slab->start),
                                 count = h5::to_hsize(slab->count);
      GPT_H5_CHECK(H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, start.data(), nullptr,
                                       count.data(), nullptr));
      // A slab is stored row-major like the hyperslab's own iteration order.
      backend.copy_to_host(host.data(), base + slab->local_offset, n * sizeof(float));
      share ^= slab_crc32_share(entry.shape, *slab, host.data());
    } else {
      GPT_H5_CHECK(H5Sselect_none(file_space.id()));
      GPT_H5_CHECK(H5Sselect_none(mem_space.id()));
    }
    errno = 0;
    if (H5Dwrite(dataset.id(), H5T_NATIVE_FLOAT, mem_space.id(), file_space.id(), dxpl,
                 host.data()) < 0 &&
        error.empty()) {
      const int cause = errno;  // HDF5's message is generic ("file write failed")
      error = "writing " + path + " failed (" + h5::last_error_message() +
              (cause != 0 ? std::string(": ") + std::strerror(cause) : std::string()) + ")";
    }
  }
  try {
    dataset.close();  // collective too: on failure keep going like a failed write
  } catch (const Error& e) {
    if (error.empty()) error = "closing " + path + " failed (" + e.what() + ")";
  }
  return share;
}

// Writes every dataset; returns this rank's crc32 shares, one per dataset in catalogue order
// (/model/<name>, then its optimizer states). Every 64 MiB and at the end the ranks agree on
// any failed write, so a full disk ends every rank here, before the collective close. Then the
// temporary file is emptied (by rank 0) before the handles close: HDF5 flushes its metadata in
// the collective close, and on a full disk that flush would fail on some ranks only and leave
// the others waiting; truncating gives the space back first.
std::vector<uint32_t> write_collective(const std::string& temp, const Catalogue& catalogue,
                                       const OptimizerMeta* optimizer, ParameterStore& store,
                                       const WriteOwner& owner, const WriteOwner& state_owner,
                                       const ValueSource* values, MPI_Comm comm) {
  std::map<std::string, const Parameter*> owned, state_owned;
  for (const Parameter& p : store.params()) {
    if (owner(p)) owned[p.name] = &p;
    if (state_owner(p)) state_owned[p.name] = &p;
  }

  h5::Handle fapl(GPT_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS)));
  GPT_H5_CHECK(H5Pset_fapl_mpio(fapl.id(), comm, MPI_INFO_NULL));
  h5::Handle file(H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.id()));
  GPT_INPUT_CHECK(file.valid(), "cannot create checkpoint file "
                                    << temp << " (" << h5::last_error_message() << ")");
  // Space is allocated at creation (parallel HDF5 requires it) but never pre-filled: every
  // element is written once, so a fill pass would only double the I/O.
  h5::Handle dcpl(GPT_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  GPT_H5_CHECK(H5Pset_alloc_time(dcpl.id(), H5D_ALLOC_TIME_EARLY));
  GPT_H5_CHECK(H5Pset_fill_time(dcpl.id(), H5D_FILL_TIME_NEVER));
  h5::Handle dxpl(GPT_H5_CHECK(H5Pcreate(H5P_DATASET_XFER)));
  GPT_H5_CHECK(H5Pset_dxpl_mpio(dxpl.id(), H5FD_MPIO_COLLECTIVE));

  h5::Handle model(
      GPT_H5_CHECK(H5Gcreate2(file.id(), "/model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  h5::Handle optimizer_group;
  if (optimizer != nullptr)
    optimizer_group = h5::Handle(
        GPT_H5_CHECK(H5Gcreate2(file.id(), "/optimizer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  Backend& backend = store.backend();
  std::vector<uint32_t> shares;
  try {
    constexpr int64_t kAgreeEveryBytes = int64_t{64} << 20;
    int64_t since_agreement = 0;
    size_t index = 0;
    std::string error;  // this rank's first failure
    for (const auto& [name, entry] : catalogue) {
      auto it = owned.find(name);
      const Parameter* local = it != owned.end() ? it->second : nullptr;
      std::vector<float> made;  // from `values`: held while this dataset is written
      const float* base = local != nullptr ? local->value : nullptr;
      if (local != nullptr && values != nullptr) {
        made = (*values)(*local);
        GPT_CHECK(static_cast<int64_t>(made.size()) == local->local_numel,
                  "checkpoint: the values of " << name << " have another size");
        base = made.data();
      }
      shares.push_back(
          write_dataset_collective(file.id(), "/model/" + name, entry, entry.max_owned_slabs,
                                   local != nullptr ? local->slabs : std::vector<Slab>{}, base,
                                   backend, dcpl.id(), dxpl.id(), error));
      if (optimizer != nullptr) {
        h5::Handle group(GPT_H5_CHECK(
            H5Gcreate2(optimizer_group.id(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
        auto state_it = state_owned.find(name);
        const std::vector<Slab> state_slabs = state_it != state_owned.end()
                                                  ? store.state_slabs(*state_it->second)
                                                  : std::vector<Slab>{};
        for (const std::string& state : optimizer->state_names)
          shares.push_back(write_dataset_collective(
              file.id(), "/optimizer/" + name + "/" + state, entry, entry.max_state_slabs,
              state_slabs, store.state(state), backend, dcpl.id(), dxpl.id(), error));
      }
      // Agreeing costs a collective: after every 64 MiB written and after the last parameter.
      // Writes after a failed one still run on every rank (they fail fast on a full disk), so
      // the ranks stay in the same collective sequence until they agree.
      since_agreement +=
          static_cast<int64_t>(1 + (optimizer != nullptr ? optimizer->state_names.size() : 0)) *
          shape_numel(entry.shape) * static_cast<int64_t>(sizeof(float));
      ++index;
      if (since_agreement < kAgreeEveryBytes && index < catalogue.size()) continue;
      since_agreement = 0;
      agree_on_failure(comm, [&] {
        GPT_INPUT_CHECK(error.empty(),
                        "cannot write checkpoint "
                            << temp << ": " << error
                            << free_space_note(fs::path(temp).parent_path().string()));
      });
    }
  } catch (const Error&) {
    if (comm_rank(comm) == 0) empty_file(temp);
    throw;  // the handles close collectively on every rank alike, into the emptied file
  }
  optimizer_group.reset();
  model.reset();
  file.close();  // collective: every rank's data is in the file after this
  return shares;
}

// Bytes of each dataset, in catalogue order (as write_collective returns the shares).
std::vector<int64_t> dataset_bytes(const Catalogue& catalogue, const OptimizerMeta* optimizer) {
  std::vector<int64_t> bytes;
  const size_t per_parameter = 1 + (optimizer != nullptr ? optimizer->state_names.size() : 0);
  for (const auto& [name, entry] : catalogue)
    bytes.insert(bytes.end(), per_parameter,
                 shape_numel(entry.shape) * static_cast<int64_t>(sizeof(float)));
  return bytes;
}

int64_t data_bytes(const Catalogue& catalogue, const OptimizerMeta* optimizer) {
  int64_t total = 0;
  for (int64_t b : dataset_bytes(catalogue, optimizer)) total += b;
  return total;
}

// Phase 3, rank 0, before the collective create: a disk that cannot hold the tensors fails here, at
// once and alike on every rank. (HDF5's metadata adds a little more; a disk that fills by that
// much, or fills from elsewhere during the write, is caught by the writes themselves.)
void check_free_space(const std::string& dir, int64_t needed) {
  struct statvfs fs_info {};
  if (::statvfs(dir.c_str(), &fs_info) != 0) return;  // unknown: the writes will tell
  const auto free_bytes =
      static_cast<int64_t>(fs_info.f_bavail) * static_cast<int64_t>(fs_info.f_frsize);
  constexpr double kMiB = 1024.0 * 1024.0;
  GPT_INPUT_CHECK(free_bytes >= needed, "cannot write checkpoint in "
                                            << dir << ": no space left on device (" << std::fixed
                                            << std::setprecision(1) << free_bytes / kMiB
                                            << " MiB free, " << needed / kMiB << " MiB needed)");
}

// ---- phase 5: rank 0 finishes the file
// The crc32s, the optimizer's and the root's attributes, complete = 1 last.
void write_attributes(hid_t file, const Catalogue& catalogue, const std::vector<uint32_t>& crcs,
                      const CheckpointMeta& meta, const OptimizerMeta* optimizer) {
  std::vector<std::string> datasets;
  for (const auto& [name, entry] : catalogue) {
    datasets.push_back("/model/" + name);
    if (optimizer != nullptr)
      for (const std::string& s : optimizer->state_names)
        datasets.push_back("/optimizer/" + name + "/" + s);
  }
  GPT_CHECK(datasets.size() == crcs.size(),
            "checkpoint: " << crcs.size() << " crc32s for " << datasets.size() << " datasets");
  std::map<std::string, DatasetRecord> records;
  for (size_t i = 0; i < datasets.size(); ++i) {
    h5::Handle dataset(GPT_H5_CHECK(H5Dopen2(file, datasets[i].c_str(), H5P_DEFAULT)));
    h5::write_uint32_attribute(dataset.id(), "crc32", crcs[i]);
    records[datasets[i]] = {h5::dataset_shape(dataset.id()), crcs[i]};
  }
  if (optimizer != nullptr) {
    h5::Handle group(GPT_H5_CHECK(H5Gopen2(file, "/optimizer", H5P_DEFAULT)));
    h5::write_string_attribute(group.id(), "type", optimizer->type);
    for (const auto& [name, value] : optimizer->hyperparameters) {
      GPT_CHECK(name != "type" && name != "step", "optimizer hyper-parameter named " << name);
      h5::write_double_attribute(group.id(), name, value);
    }
    h5::write_int64_attribute(group.id(), "step", optimizer->step);
  }
  h5::write_string_attribute(file, "format", kCheckpointFormat);
  h5::write_int64_attribute(file, "format_version", kCheckpointFormatVersion);
  h5::write_int64_attribute(file, "step", meta.step);
  h5::write_int64_attribute(file, "consumed_samples", meta.consumed_samples);
  h5::write_int64_attribute(file, "seed", static_cast<int64_t>(meta.seed));
  h5::write_string_attribute(file, "config", meta.config_json);
  h5::write_string_attribute(file, "tokenizer", meta.tokenizer);
  h5::write_string_attribute(file, "layout", meta.layout);
  h5::write_uint32_attribute(file, "metadata_crc32",
                             checkpoint_metadata_crc32(meta, optimizer, records));
  // Flushed before complete is set, so a file with complete = 1 has everything before it.
  GPT_H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL));
  h5::write_int64_attribute(file, "complete", 1);
}

void finish_on_rank0(const std::string& temp, const std::string& final_path, const std::string& dir,
                     const Catalogue& catalogue, const std::vector<uint32_t>& crcs,
                     const CheckpointMeta& meta, const OptimizerMeta* optimizer, int keep_last,
                     VerifiedCheckpoints* verified) {
  // The attributes and the metadata they add are small, but a metadata flush that fails for
  // want of space leaves HDF5 unable to close the file (measured: it then crashes at exit), so
  // their room is checked first, with a wide margin.
  check_free_space(dir, int64_t{1} << 20);
  {
    h5::Handle file(H5Fopen(temp.c_str(), H5F_ACC_RDWR, H5P_DEFAULT));
    GPT_INPUT_CHECK(file.valid(),
                    "cannot reopen " << temp << " (" << h5::last_error_message() << ")");
    // A failure (a full disk) empties the file before its handle closes: HDF5 retries the
    // failed metadata flush at close, and a file left open would crash its shutdown.
    try {
      write_attributes(file.id(), catalogue, crcs, meta, optimizer);
      file.close();
    } catch (const std::exception&) {
      empty_file(temp);
      throw;
    }
  }
  fsync_path(temp, false);
  std::error_code ec;
  fs::rename(temp, final_path, ec);
  GPT_INPUT_CHECK(!ec, "cannot rename " << temp << " to " << final_path << ": " << ec.message());
  fsync_path(dir, true);
  point_latest_at(dir, final_path);
  remove_beyond_keep_last(dir, final_path, keep_last, verified);
}

}  // namespace

std::string write_checkpoint(const std::string& dir, const CheckpointMeta& meta,
                             const OptimizerMeta* optimizer, ParameterStore& store,
                             const WriteOwner& owner, MPI_Comm comm, int keep_last,
                             const WriteOwner* state_owner_or_null, const ValueSource* values,
                             VerifiedCheckpoints* verified) {
  const WriteOwner& state_owner = state_owner_or_null != nullptr ? *state_owner_or_null : owner;
  h5::silence_errors();
  const bool root = comm_rank(comm) == 0;
  const std::string final_path = checkpoint_path(dir, meta.step);
  // Not a step-*.h5 name, so an interrupted write is never taken for a checkpoint.
  const std::string temp = final_path + ".tmp";

  try {
    agree_on_failure(comm, [&] {
      check_local(store, owner, optimizer, values != nullptr);
      if (!root) return;
      std::error_code ec;
      fs::create_directories(dir, ec);
      GPT_INPUT_CHECK(fs::is_directory(dir),
                      "cannot create checkpoint directory " << dir << ": " << ec.message());
      // A probe with plain file I/O: an unwritable directory then fails alike on every rank
      // here, instead of inside the collective create.
      std::ofstream probe(temp, std::ios::trunc);
      GPT_INPUT_CHECK(probe.good(), "cannot write in checkpoint directory " << dir);
    });
    const Catalogue catalogue =
        gather_catalogue(comm, describe_local(store, owner, state_owner), optimizer != nullptr);
    agree_on_failure(comm, [&] {
      if (root) check_free_space(dir, data_bytes(catalogue, optimizer));
    });
    std::vector<uint32_t> shares;
    agree_on_failure(comm, [&] {
      shares =
          write_collective(temp, catalogue, optimizer, store, owner, state_owner, values, comm);
    });
    // Every element has one writer, so the XOR of the shares is each tensor's full crc32.
    std::vector<uint32_t> crcs(shares.size());
    GPT_MPI_CHECK(MPI_Reduce(shares.data(), crcs.data(), static_cast<int>(shares.size()),
                             MPI_UINT32_T, MPI_BXOR, 0, comm));
    agree_on_failure(comm, [&] {
      if (!root) return;
      try {
        const std::vector<int64_t> bytes = dataset_bytes(catalogue, optimizer);
        for (size_t i = 0; i < crcs.size(); ++i)
          crcs[i] = crc32_from_shares(crcs[i], static_cast<uint64_t>(bytes[i]));
        finish_on_rank0(temp, final_path, dir, catalogue, crcs, meta, optimizer, keep_last,
                        verified);
      } catch (const std::exception& e) {
        const std::string what = e.what();
        fail_input("writing checkpoint " + final_path + " failed: " + what +
                   (what.find("no space left") == std::string::npos ? free_space_note(dir) : ""));
      }
    });
  } catch (const Error&) {
    std::error_code ec;
    if (root) fs::remove(temp, ec);  // nothing half-written stays behind
    throw;
  }
  return final_path;
}

}  // namespace gpt
