// Writing (collective, MPI-IO) and reading (serial) checkpoint files; see checkpoint.h and
// docs/DESIGN.md "Checkpoint". The write runs in phases, each ending in an agreement over comm so a
// failure seen by one rank becomes the same gpt::Error on every rank instead of a hang:
//   1. local checks + rank 0 prepares the directory            -> agree
//   2. allgather of every rank's parameter names, shapes and ownership; the merged catalogue
//      (sorted, identical on every rank) fixes the collective create/write order
//   3. rank 0 checks the disk's free space against the tensors' size    -> agree
//   4. collective create, one collective write per slab round, an agreement every 64 MiB and
//      at the end (a full disk fails every rank before the collective close), collective close
//      -> agree; each writer's crc32 shares of its slabs are XOR-reduced to rank 0
//   5. rank 0 alone: crc32 attributes, root attributes, complete = 1, fsync, rename, latest,
//      keep_last                                               -> agree (broadcast of its status)
// Loading verifies every crc32 once across the job: the datasets' rows are dealt out to the
// ranks in equal byte shares, and their crc32 shares XOR-reduced (CheckpointReader::verify).
#include "framework/io/checkpoint.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/io/crc32.h"
#include "framework/logging.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

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
                 const OptimizerMeta* optimizer) {
  if (optimizer != nullptr) {
    const auto& names = store.state_names();
    for (const std::string& s : optimizer->state_names) {
      GPT_CHECK(std::find(names.begin(), names.end(), s) != names.end(),
                "checkpoint: optimizer state " << s << " is not in the parameter store");
    }
  }
  for (const Parameter& p : store.params()) {
    if (!owner(p)) continue;
    GPT_CHECK(p.value != nullptr, "checkpoint: parameter " << p.name << " is not allocated");
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

std::vector<hsize_t> to_hsize(const std::vector<int64_t>& v) {
  return std::vector<hsize_t>(v.begin(), v.end());
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
  const std::vector<hsize_t> dims = to_hsize(entry.shape);
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
      const std::vector<hsize_t> start = to_hsize(slab->start), count = to_hsize(slab->count);
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
                                       MPI_Comm comm) {
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
      shares.push_back(write_dataset_collective(
          file.id(), "/model/" + name, entry, entry.max_owned_slabs,
          local != nullptr ? local->slabs : std::vector<Slab>{},
          local != nullptr ? local->value : nullptr, backend, dcpl.id(), dxpl.id(), error));
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
    if (comm_rank(comm) == 0) ::truncate(temp.c_str(), 0);
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

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  GPT_INPUT_CHECK(fd >= 0, "cannot open " << path << " to sync it");
  int rc = ::fsync(fd);
  ::close(fd);
  GPT_INPUT_CHECK(rc == 0, "fsync of " << path << " failed");
}

// Step number of a "step-<digits>.h5" file name, or -1.
int64_t parse_step_file(const std::string& name) {
  const std::string prefix = "step-", suffix = ".h5";
  if (name.size() <= prefix.size() + suffix.size() || !name.starts_with(prefix) ||
      !name.ends_with(suffix))
    return -1;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  const bool all_digits =
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (digits.size() > 18 || !all_digits) return -1;
  return std::stoll(digits);
}

// step-*.h5 files of dir, newest (highest step) first.
std::vector<std::pair<int64_t, fs::path>> step_files(const std::string& dir) {
  std::vector<std::pair<int64_t, fs::path>> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const int64_t step = parse_step_file(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) files.emplace_back(step, e.path());
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a > b; });
  return files;
}

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
  for (size_t i = 0; i < datasets.size(); ++i) {
    h5::Handle dataset(GPT_H5_CHECK(H5Dopen2(file, datasets[i].c_str(), H5P_DEFAULT)));
    h5::write_uint32_attribute(dataset.id(), "crc32", crcs[i]);
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
  // Flushed before complete is set, so a file with complete = 1 has everything before it.
  GPT_H5_CHECK(H5Fflush(file, H5F_SCOPE_GLOBAL));
  h5::write_int64_attribute(file, "complete", 1);
}

// Rewrites <dir>/latest to name final_path, by temporary file, fsync and rename.
void point_latest_at(const std::string& dir, const std::string& final_path) {
  std::error_code ec;
  const std::string latest = (fs::path(dir) / "latest").string(), latest_temp = latest + ".tmp";
  {
    std::ofstream out(latest_temp, std::ios::trunc);
    out << fs::path(final_path).filename().string() << "\n";
    out.close();
    GPT_INPUT_CHECK(out.good(), "cannot write " << latest_temp);
  }
  fsync_path(latest_temp, false);
  fs::rename(latest_temp, latest, ec);
  GPT_INPUT_CHECK(!ec, "cannot rename " << latest_temp << " to " << latest << ": " << ec.message());
  fsync_path(dir, true);
}

// With keep_last > 0, removes the step files beyond the newest keep_last. The file just written
// is kept even when older-numbered than others (a run resumed from an earlier checkpoint):
// `latest` names it.
void remove_beyond_keep_last(const std::string& dir, const std::string& final_path, int keep_last) {
  std::error_code ec;
  if (keep_last > 0) {
    int kept = 1;
    for (const auto& [step, path] : step_files(dir)) {
      if (path.filename() == fs::path(final_path).filename()) continue;
      if (kept < keep_last) {
        ++kept;
        continue;
      }
      fs::remove(path, ec);
      if (ec) GPT_WARN0("cannot remove old checkpoint " << path.string() << ": " << ec.message());
    }
  }
}

void finish_on_rank0(const std::string& temp, const std::string& final_path, const std::string& dir,
                     const Catalogue& catalogue, const std::vector<uint32_t>& crcs,
                     const CheckpointMeta& meta, const OptimizerMeta* optimizer, int keep_last) {
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
      ::truncate(temp.c_str(), 0);
      throw;
    }
  }
  fsync_path(temp, false);
  std::error_code ec;
  fs::rename(temp, final_path, ec);
  GPT_INPUT_CHECK(!ec, "cannot rename " << temp << " to " << final_path << ": " << ec.message());
  fsync_path(dir, true);
  point_latest_at(dir, final_path);
  remove_beyond_keep_last(dir, final_path, keep_last);
}

// ---- reading

// With leading_rows, the file's tensor may have more rows than the parameter (the rest of the
// shape equal): its first rows are read. Throws unless the dataset fits the parameter.
void check_dataset_shape(const CheckpointReader& reader, const std::string& dataset,
                         const Parameter& p, bool leading_rows) {
  GPT_INPUT_CHECK(reader.has(dataset), "checkpoint " << reader.path() << " has no dataset "
                                                     << dataset << " for parameter " << p.name);
  const std::vector<int64_t> file_shape = reader.shape(dataset);
  const bool first_rows = leading_rows && !p.shape.empty() && file_shape.size() == p.shape.size() &&
                          file_shape[0] >= p.shape[0] &&
                          std::equal(p.shape.begin() + 1, p.shape.end(), file_shape.begin() + 1);
  GPT_INPUT_CHECK(file_shape == p.shape || first_rows,
                  "checkpoint " << reader.path() << ": parameter " << p.name << " has shape "
                                << h5::shape_string(p.shape) << " in the model but "
                                << h5::shape_string(file_shape) << " in the checkpoint");
}

// Elements [begin, begin + count) of p's storage from the dataset into dst (count floats);
// storage outside p's slabs (padding) is set to 0.
void read_storage_range(const CheckpointReader& reader, const std::string& dataset,
                        const Parameter& p, int64_t begin, int64_t count, float* dst,
                        Backend& backend) {
  std::vector<float> host(static_cast<size_t>(count), 0.0f);
  for (const Slab& slab : storage_range_slabs(p, begin, begin + count)) {
    GPT_CHECK(slab.local_offset >= begin && slab.local_offset + slab.numel() <= begin + count,
              "parameter " << p.name << " has a slab outside its storage");
    reader.read_slab(dataset, slab, host.data() + (slab.local_offset - begin));
  }
  if (!host.empty()) backend.copy_from_host(dst, host.data(), host.size() * sizeof(float));
}

std::string require_string(hid_t obj, const std::string& name) {
  std::optional<std::string> value = h5::read_string_attribute(obj, name);
  GPT_INPUT_CHECK(value.has_value(), "has no '" << name << "' attribute");
  return *value;
}

int64_t require_int64(hid_t obj, const std::string& name) {
  std::optional<int64_t> value = h5::read_int64_attribute(obj, name);
  GPT_INPUT_CHECK(value.has_value(), "has no '" << name << "' attribute");
  return *value;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[40];
  std::snprintf(name, sizeof(name), "step-%08lld.h5", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::string write_checkpoint(const std::string& dir, const CheckpointMeta& meta,
                             const OptimizerMeta* optimizer, ParameterStore& store,
                             const WriteOwner& owner, MPI_Comm comm, int keep_last,
                             const WriteOwner* state_owner_or_null) {
  const WriteOwner& state_owner = state_owner_or_null != nullptr ? *state_owner_or_null : owner;
  h5::silence_errors();
  const bool root = comm_rank(comm) == 0;
  const std::string final_path = checkpoint_path(dir, meta.step);
  // Not a step-*.h5 name, so an interrupted write is never taken for a checkpoint.
  const std::string temp = final_path + ".tmp";

  try {
    agree_on_failure(comm, [&] {
      check_local(store, owner, optimizer);
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
      shares = write_collective(temp, catalogue, optimizer, store, owner, state_owner, comm);
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
        finish_on_rank0(temp, final_path, dir, catalogue, crcs, meta, optimizer, keep_last);
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

CheckpointReader::CheckpointReader(const std::string& path) : path_(path) {
  h5::silence_errors();
  try {
    std::error_code ec;
    GPT_INPUT_CHECK(fs::exists(path, ec), "no such file");
    GPT_INPUT_CHECK(!fs::is_directory(path, ec), "is a directory");
    GPT_INPUT_CHECK(H5Fis_hdf5(path.c_str()) > 0, "not an HDF5 file");
    file_ = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    GPT_INPUT_CHECK(file_.valid(),
                    "cannot be opened, truncated or damaged (" << h5::last_error_message() << ")");
    const hid_t root = file_.id();
    std::optional<std::string> format = h5::read_string_attribute(root, "format");
    GPT_INPUT_CHECK(format == kCheckpointFormat,
                    "is not a checkpoint (format attribute "
                        << (format ? "'" + *format + "'" : std::string("missing")) << ", expected '"
                        << kCheckpointFormat << "')");
    std::optional<int64_t> complete = h5::read_int64_attribute(root, "complete");
    GPT_INPUT_CHECK(complete == 1,
                    "is incomplete (no complete = 1 attribute: its write did not finish)");
    const int64_t version = require_int64(root, "format_version");
    GPT_INPUT_CHECK(version == kCheckpointFormatVersion,
                    "has format_version " << version << "; this program reads version "
                                          << kCheckpointFormatVersion);
    meta_.step = require_int64(root, "step");
    meta_.consumed_samples = require_int64(root, "consumed_samples");
    meta_.seed = static_cast<uint64_t>(require_int64(root, "seed"));
    meta_.config_json = require_string(root, "config");
    meta_.tokenizer = require_string(root, "tokenizer");
    meta_.layout = require_string(root, "layout");

    GPT_INPUT_CHECK(h5::has_link(root, "/model") && !h5::is_dataset(root, "/model"),
                    "has no /model group");
    std::vector<std::string> datasets;
    h5::Handle model(GPT_H5_CHECK(H5Gopen2(root, "/model", H5P_DEFAULT)));
    for (const std::string& name : h5::group_members(model.id()))
      datasets.push_back("/model/" + name);
    has_optimizer_ = h5::has_link(root, "/optimizer");
    if (has_optimizer_) {
      h5::Handle group(GPT_H5_CHECK(H5Gopen2(root, "/optimizer", H5P_DEFAULT)));
      for (const std::string& name : h5::group_members(group.id())) {
        GPT_INPUT_CHECK(!h5::is_dataset(group.id(), name),
                        "/optimizer/" << name << " is a dataset, expected a group of states");
        h5::Handle states(GPT_H5_CHECK(H5Gopen2(group.id(), name.c_str(), H5P_DEFAULT)));
        for (const std::string& state : h5::group_members(states.id()))
          datasets.push_back("/optimizer/" + name + "/" + state);
      }
    }
    for (const std::string& name : datasets) {
      GPT_INPUT_CHECK(h5::is_dataset(root, name), name << " is not a dataset");
      h5::Handle dataset(GPT_H5_CHECK(H5Dopen2(root, name.c_str(), H5P_DEFAULT)));
      h5::Handle type(GPT_H5_CHECK(H5Dget_type(dataset.id())));
      GPT_INPUT_CHECK(
          GPT_H5_CHECK(H5Tget_class(type.id())) == H5T_FLOAT && H5Tget_size(type.id()) == 4,
          "dataset " << name << " is not float32");
      std::optional<int64_t> stored = h5::read_int64_attribute(dataset.id(), "crc32");
      GPT_INPUT_CHECK(stored.has_value(), "dataset " << name << " has no crc32 attribute");
      crcs_[name] = *stored;
      shapes_[name] = h5::dataset_shape(dataset.id());
    }
  } catch (const Error& e) {
    fail_input("checkpoint " + path + ": " + e.what());
  }
}

OptimizerMeta CheckpointReader::optimizer() const {
  GPT_INPUT_CHECK(has_optimizer_, "checkpoint " << path_ << " has no optimizer state");
  try {
    OptimizerMeta out;
    h5::Handle group(GPT_H5_CHECK(H5Gopen2(file_.id(), "/optimizer", H5P_DEFAULT)));
    out.type = require_string(group.id(), "type");
    out.step = require_int64(group.id(), "step");
    for (const std::string& name : h5::attribute_names(group.id()))
      if (name != "type" && name != "step" && h5::attribute_class(group.id(), name) == H5T_FLOAT)
        out.hyperparameters.emplace_back(name, *h5::read_double_attribute(group.id(), name));
    // State names from the first parameter's group (every parameter has the same states).
    for (const auto& [dataset, shape] : shapes_) {
      if (!dataset.starts_with("/optimizer/")) continue;
      const std::string param_prefix = dataset.substr(0, dataset.rfind('/') + 1);
      for (const auto& [other, other_shape] : shapes_)
        if (other.starts_with(param_prefix))
          out.state_names.push_back(other.substr(param_prefix.size()));
      break;
    }
    return out;
  } catch (const Error& e) {
    fail_input("checkpoint " + path_ + ": /optimizer " + e.what());
  }
}

std::vector<int64_t> CheckpointReader::shape(const std::string& dataset) const {
  auto it = shapes_.find(dataset);
  GPT_INPUT_CHECK(it != shapes_.end(), "checkpoint " << path_ << " has no dataset " << dataset);
  return it->second;
}

std::vector<std::string> CheckpointReader::datasets() const {
  std::vector<std::string> names;
  for (const auto& [name, shape] : shapes_) names.push_back(name);
  return names;
}

void CheckpointReader::read_slab(const std::string& dataset, const Slab& slab,
                                 float* host_out) const {
  const std::vector<int64_t> dims = shape(dataset);
  bool inside = slab.start.size() == dims.size() && slab.count.size() == dims.size();
  for (size_t d = 0; inside && d < dims.size(); ++d)
    inside = slab.start[d] >= 0 && slab.count[d] >= 0 && slab.start[d] + slab.count[d] <= dims[d];
  GPT_CHECK(inside, "slab outside dataset " << dataset << " of shape " << h5::shape_string(dims));
  const hsize_t n = static_cast<hsize_t>(slab.numel());
  if (n == 0) return;
  h5::Handle data(GPT_H5_CHECK(H5Dopen2(file_.id(), dataset.c_str(), H5P_DEFAULT)));
  h5::Handle file_space(GPT_H5_CHECK(H5Dget_space(data.id())));
  const std::vector<hsize_t> start = to_hsize(slab.start), count = to_hsize(slab.count);
  GPT_H5_CHECK(H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, start.data(), nullptr,
                                   count.data(), nullptr));
  h5::Handle mem_space(GPT_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  GPT_H5_CHECK(
      H5Dread(data.id(), H5T_NATIVE_FLOAT, mem_space.id(), file_space.id(), H5P_DEFAULT, host_out));
}

void CheckpointReader::verify(MPI_Comm comm) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  const std::vector<std::string> names = datasets();
  std::vector<int64_t> bytes;
  int64_t total = 0;
  for (const std::string& name : names) {
    bytes.push_back(shape_numel(shapes_.at(name)) * static_cast<int64_t>(sizeof(float)));
    total += bytes.back();
  }
  // The datasets in name order form one byte sequence; this rank checks the rows that start in
  // its equal share [first, last) of it, however the tensors' sizes are spread.
  const int64_t first = total / size * rank + std::min<int64_t>(rank, total % size);
  const int64_t last = first + total / size + (rank < total % size ? 1 : 0);
  std::vector<uint32_t> shares(names.size(), 0);
  agree_on_failure(comm, [&] {
    try {
      int64_t base = 0;
      std::vector<float> buffer;
      for (size_t i = 0; i < names.size(); base += bytes[i], ++i) {
        const std::vector<int64_t>& shape = shapes_.at(names[i]);
        if (bytes[i] == 0 || base + bytes[i] <= first || base >= last) continue;
        const int64_t rows = shape.empty() ? 1 : shape[0], row_bytes = bytes[i] / rows;
        const auto row_at = [&](int64_t byte) {  // the first row starting at or after byte
          return std::clamp<int64_t>((byte - base + row_bytes - 1) / row_bytes, 0, rows);
        };
        const int64_t row_end = row_at(last);
        constexpr int64_t kChunkBytes = int64_t{16} << 20;  // bounded memory whatever the tensor
        const int64_t rows_per_read = std::max<int64_t>(1, kChunkBytes / row_bytes);
        Crc32Share share(static_cast<uint64_t>(bytes[i]));
        for (int64_t row = row_at(first); row < row_end; row += rows_per_read) {
          Slab slab;
          slab.start.assign(shape.size(), 0);
          slab.count = shape;
          if (!shape.empty()) {
            slab.start[0] = row;
            slab.count[0] = std::min(rows_per_read, row_end - row);
          }
          buffer.resize(static_cast<size_t>(slab.numel()));
          read_slab(names[i], slab, buffer.data());
          share.add(static_cast<uint64_t>(row * row_bytes), buffer.data(),
                    buffer.size() * sizeof(float));
        }
        shares[i] = share.share();
      }
    } catch (const Error& e) {
      fail_input("checkpoint " + path_ + ": " + e.what());
    }
  });
  GPT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, shares.data(), static_cast<int>(shares.size()),
                              MPI_UINT32_T, MPI_BXOR, comm));
  for (size_t i = 0; i < names.size(); ++i) {
    const uint32_t actual = crc32_from_shares(shares[i], static_cast<uint64_t>(bytes[i]));
    const int64_t stored = crcs_.at(names[i]);
    // Every rank holds the same reduced values, so every rank fails alike, on the same dataset.
    if (static_cast<int64_t>(actual) != stored)
      throw AgreedError(GPT_MSG("checkpoint " << path_ << ": dataset " << names[i]
                                              << " fails its crc32 check (stored 0x" << std::hex
                                              << stored << ", computed 0x" << actual
                                              << "): the file is corrupt"));
  }
  verified_ = true;
}

std::unique_ptr<CheckpointReader> open_checkpoint(const std::string& path, MPI_Comm comm) {
  std::unique_ptr<CheckpointReader> reader;
  agree_on_failure(comm, [&] { reader = std::make_unique<CheckpointReader>(path); });
  reader->verify(comm);
  return reader;
}

void load_checkpoint(const CheckpointReader& reader, ParameterStore& store, bool include_optimizer,
                     bool truncate_positions) {
  GPT_CHECK(reader.verified(), "load_checkpoint: " << reader.path() << " was not verified");
  GPT_INPUT_CHECK(!include_optimizer || reader.has_optimizer(),
                  "checkpoint " << reader.path() << " has no optimizer state to resume from");
  Backend& backend = store.backend();
  for (Parameter& p : store.params()) {
    GPT_CHECK(p.value != nullptr, "load_checkpoint before the parameters are allocated");
    const std::string model = "/model/" + p.name;
    check_dataset_shape(reader, model, p, truncate_positions && p.name == "wpe");
    read_storage_range(reader, model, p, 0, p.local_numel, p.value, backend);
    if (!include_optimizer) continue;
    // The state this rank keeps: all of p, or its shard of it under the distributed optimizer.
    for (const std::string& state : store.state_names()) {
      const std::string dataset = "/optimizer/" + p.name + "/" + state;
      check_dataset_shape(reader, dataset, p, false);
      for (const StatePiece& piece : store.state_pieces(p))
        read_storage_range(reader, dataset, p, piece.begin, piece.numel,
                           store.state(state) + piece.state_offset, backend);
    }
  }
}

std::vector<std::string> remove_interrupted_writes(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool temporary =
        name.ends_with(".tmp") &&
        (parse_step_file(name.substr(0, name.size() - 4)) >= 0 || name == "latest.tmp");
    if (temporary && e.is_regular_file(ec) && fs::remove(e.path(), ec)) removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

std::string find_latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped,
                                   MPI_Comm comm) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return "";
  std::vector<fs::path> candidates;
  std::ifstream latest(fs::path(dir) / "latest");
  std::string name;
  if (latest && std::getline(latest, name)) {
    while (!name.empty() && std::isspace(static_cast<unsigned char>(name.back()))) name.pop_back();
    // Only a plain file name in dir: the pointer is relative by contract.
    if (!name.empty() && name.find('/') == std::string::npos) {
      candidates.push_back(fs::path(dir) / name);
    } else if (skipped != nullptr) {
      skipped->push_back(GPT_MSG((fs::path(dir) / "latest").string()
                                 << ": does not name a file of the folder ('" << name << "')"));
    }
  }
  const std::vector<std::pair<int64_t, fs::path>> files = step_files(dir);
  for (const auto& [step, path] : files)
    if (std::find(candidates.begin(), candidates.end(), path) == candidates.end())
      candidates.push_back(path);
  std::vector<std::string> reasons;
  for (const fs::path& path : candidates) {
    try {
      open_checkpoint(path.string(), comm);
      return path.string();
    } catch (const Error& e) {
      reasons.push_back(e.what());
      if (skipped != nullptr) skipped->push_back(e.what());
    }
  }
  // Starting fresh here would train over them, and --keep-last would then delete them.
  if (!files.empty()) {
    std::string all;
    for (const std::string& r : reasons) all += (all.empty() ? "" : "; ") + r;
    fail_input(GPT_MSG("the checkpoint folder " << dir << " has " << files.size()
                                                << " checkpoint file(s) and none is valid (" << all
                                                << "); move them away to start fresh"));
  }
  return "";
}

}  // namespace gpt
