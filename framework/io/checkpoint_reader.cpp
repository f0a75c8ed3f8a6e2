// Reading checkpoint files (checkpoint_reader.h): every rank opens the file serially and reads
// the slabs of its own layout. Loading verifies every crc32 once across the job: the datasets'
// rows are dealt out to the ranks in equal byte shares, and their crc32 shares XOR-reduced
// (CheckpointReader::verify).
#include "framework/io/checkpoint_reader.h"

#include <algorithm>
#include <filesystem>
#include <ios>
#include <optional>

#include "framework/agreement.h"
#include "framework/check.h"
#include "framework/checked_size.h"
#include "framework/io/checkpoint_metadata.h"
#include "framework/io/crc32.h"
#include "framework/json.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

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

OptimizerMeta read_optimizer_meta(hid_t file,
                                  const std::map<std::string, std::vector<int64_t>>& shapes) {
  OptimizerMeta out;
  h5::Handle group(GPT_H5_CHECK(H5Gopen2(file, "/optimizer", H5P_DEFAULT)));
  out.type = require_string(group.id(), "type");
  out.step = require_int64(group.id(), "step");
  for (const std::string& name : h5::attribute_names(group.id()))
    if (name != "type" && name != "step" && h5::attribute_class(group.id(), name) == H5T_FLOAT)
      out.hyperparameters.emplace_back(name, *h5::read_double_attribute(group.id(), name));
  // State names from the first parameter's group (every parameter has the same states).
  for (const auto& [dataset, shape] : shapes) {
    if (!dataset.starts_with("/optimizer/")) continue;
    const std::string param_prefix = dataset.substr(0, dataset.rfind('/') + 1);
    for (const auto& [other, other_shape] : shapes)
      if (other.starts_with(param_prefix))
        out.state_names.push_back(other.substr(param_prefix.size()));
    break;
  }
  return out;
}

void check_metadata_crc32(hid_t root, const CheckpointMeta& meta, const OptimizerMeta* optimizer,
                          const std::map<std::string, std::vector<int64_t>>& shapes,
                          const std::map<std::string, int64_t>& crcs) {
  const std::optional<int64_t> stored = h5::read_int64_attribute(root, "metadata_crc32");
  GPT_INPUT_CHECK(stored.has_value(), "has no metadata_crc32 attribute");
  std::map<std::string, DatasetRecord> records;
  for (const auto& [name, shape] : shapes)
    records[name] = {shape, static_cast<uint32_t>(crcs.at(name))};
  const uint32_t computed = checkpoint_metadata_crc32(meta, optimizer, records);
  GPT_INPUT_CHECK(static_cast<int64_t>(computed) == *stored,
                  "fails its metadata crc32 check (stored 0x"
                      << std::hex << *stored << ", computed 0x" << computed << std::dec
                      << "): an attribute, a dataset's name or shape was altered");
}

}  // namespace

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
    GPT_INPUT_CHECK(
        format == kCheckpointFormat,
        "is not a checkpoint (format attribute "
            << (format ? GPT_MSG("'" << shown_excerpt(*format) << "'") : std::string("missing"))
            << ", expected '" << kCheckpointFormat << "')");
    std::optional<int64_t> complete = h5::read_int64_attribute(root, "complete");
    GPT_INPUT_CHECK(complete == 1,
                    "is incomplete (no complete = 1 attribute: its write did not finish)");
    const int64_t version = require_int64(root, "format_version");
    // Version 1 files, from before the metadata checksum, load without that check.
    GPT_INPUT_CHECK(version == 1 || version == kCheckpointFormatVersion,
                    "has format_version " << version << "; this program reads versions 1 to "
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
    int64_t total_bytes = 0;  // verify() sums the same sizes
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
      // Every value must be in the file: a dataset declared large but never written (or cut
      // short) would otherwise have verify() read fill values for as long as its shape claims.
      const std::optional<int64_t> bytes = checked_numel(shapes_[name], sizeof(float));
      GPT_INPUT_CHECK(bytes.has_value(),
                      "dataset " << name << " has a shape of more than 2^63 bytes");
      const auto stored_bytes = static_cast<int64_t>(H5Dget_storage_size(dataset.id()));
      GPT_INPUT_CHECK(stored_bytes >= *bytes,
                      "dataset " << name << " of shape " << h5::shape_string(shapes_[name])
                                 << " declares " << *bytes << " bytes but stores " << stored_bytes
                                 << " (never written, truncated or compressed)");
      total_bytes = checked_add(total_bytes, *bytes).value_or(-1);
      GPT_INPUT_CHECK(total_bytes >= 0, "its datasets hold more than 2^63 bytes");
    }
    if (has_optimizer_) {
      try {
        optimizer_meta_ = read_optimizer_meta(file_.id(), shapes_);
      } catch (const Error& e) {
        fail_input(std::string("/optimizer ") + e.what());
      }
    }
    if (version >= 2)
      check_metadata_crc32(root, meta_, has_optimizer_ ? &optimizer_meta_ : nullptr, shapes_,
                           crcs_);
    GPT_INPUT_CHECK(meta_.step >= 0 && meta_.consumed_samples >= 0 && optimizer_meta_.step >= 0,
                    "has a negative step or sample count");
  } catch (const Error& e) {
    fail_input("checkpoint " + path + ": " + e.what());
  }
}

void CheckpointReader::check_holds_model(const ModelConfig& model) const {
  int64_t stored = 0;  // the shapes were checked against the bytes stored when the file opened
  for (const auto& [name, shape] : shapes_)
    if (name.starts_with("/model/")) stored += checked_numel(shape).value_or(0);
  // A validated config's count cannot overflow (ModelConfig's bounds keep every family's below
  // 2^63).
  const std::optional<int64_t> needed = model.num_parameters(true);
  GPT_INPUT_CHECK(needed.has_value() && *needed <= stored,
                  "checkpoint " << path_ << ": its config describes a model of "
                                << (needed ? std::to_string(*needed) : std::string("over 2^63"))
                                << " parameters but its /model datasets hold " << stored
                                << " values");
}

OptimizerMeta CheckpointReader::optimizer() const {
  GPT_INPUT_CHECK(has_optimizer_, "checkpoint " << path_ << " has no optimizer state");
  return optimizer_meta_;
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
  const std::vector<hsize_t> start = h5::to_hsize(slab.start), count = h5::to_hsize(slab.count);
  GPT_H5_CHECK(H5Sselect_hyperslab(file_space.id(), H5S_SELECT_SET, start.data(), nullptr,
                                   count.data(), nullptr));
  h5::Handle mem_space(GPT_H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  // The structure was checked when the file was opened; a failure here is damaged data.
  GPT_INPUT_CHECK(H5Dread(data.id(), H5T_NATIVE_FLOAT, mem_space.id(), file_space.id(), H5P_DEFAULT,
                          host_out) >= 0,
                  "checkpoint " << path_ << ": dataset " << dataset
                                << " cannot be read, the file is damaged ("
                                << h5::last_error_message() << ")");
}

std::vector<std::string> CheckpointReader::parameter_names() const {
  std::vector<std::string> names;
  for (const std::string& dataset : datasets())
    if (dataset.starts_with(kModelDatasetPrefix))
      names.push_back(dataset.substr(kModelDatasetPrefix.size()));
  return names;
}

std::vector<float> CheckpointReader::read_dataset(const std::string& dataset) const {
  const std::vector<int64_t> dims = shape(dataset);
  const Slab whole{std::vector<int64_t>(dims.size(), 0), dims, 0};
  std::vector<float> values(static_cast<size_t>(whole.numel()));
  read_slab(dataset, whole, values.data());
  return values;
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
  // read_slab's errors name the file and the dataset.
  agree_on_failure(comm, [&] {
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

}  // namespace gpt
