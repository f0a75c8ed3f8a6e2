// Small RAII and attribute helpers over the HDF5 C API, shared by token data sets and checkpoints.
// One Handle type owns any HDF5 identifier and closes it with the matching H5?close, so every
// path out of a function (including exceptions) releases files, datasets and property lists.
// Every call is checked through GPT_H5_CHECK; HDF5's own error-stack printing is switched off by
// silence_errors() so users see our one-line messages, with HDF5's innermost reason appended
// where it helps (last_error_message()).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpt::h5 {

// Called before MPI_Init by every program and test main that writes files through MPI-IO.
// Open MPI's OMPIO opens each MPI file (HDF5's parallel checkpoint writes) through its
// shared-file-pointer component sm, which takes a named semaphore, /dev/shm/sem.OMPIO_<file
// name>, during the open: a rank killed then leaves it taken, and every later open of a file of
// that name (step-00000002.h5.tmp in any folder) waits forever. Nothing here uses shared file
// pointers, so the component is left out, unless the environment already chooses.
void configure_mpi_io_before_init();

class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& other) noexcept {
    if (this != &other) {
      reset();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  hid_t id() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and throws if HDF5 reports a failure: a file's close is where buffered data is
  // flushed (and, with the MPI-IO driver, a collective), so its result matters.
  void close();
  // Closes ignoring failures: for destructors and error paths.
  void reset() noexcept;

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Turns off HDF5's automatic printing of its error stack (process-wide, idempotent).
void silence_errors();
// The innermost description on HDF5's current error stack ("" when empty), e.g. "truncated
// file: eof = 96, ...": the reason worth showing after a failed open.
std::string last_error_message();

// Whether every component of `path` ("model/wte", relative to loc or absolute) exists as a link.
bool has_link(hid_t loc, const std::string& path);
bool has_attribute(hid_t obj, const std::string& name);

// Scalar attributes, replacing one of the same name. Strings are variable-length UTF-8 (what
// h5py writes for a Python str), integers int64, crc32 values uint32.
void write_int64_attribute(hid_t obj, const std::string& name, int64_t value);
void write_uint32_attribute(hid_t obj, const std::string& name, uint32_t value);
void write_double_attribute(hid_t obj, const std::string& name, double value);
void write_string_attribute(hid_t obj, const std::string& name, const std::string& value);

// nullopt when absent. A present attribute of the wrong kind (a string where a number is due,
// an array) throws a gpt::Error naming the attribute; callers add the file's name.
std::optional<int64_t> read_int64_attribute(hid_t obj, const std::string& name);
std::optional<double> read_double_attribute(hid_t obj, const std::string& name);
// Fixed-length and variable-length strings alike (h5py writes either).
std::optional<std::string> read_string_attribute(hid_t obj, const std::string& name);
// Names of every attribute of obj, in name order.
std::vector<std::string> attribute_names(hid_t obj);
// The datatype class of an attribute (H5T_INTEGER, H5T_FLOAT, H5T_STRING, ...).
H5T_class_t attribute_class(hid_t obj, const std::string& name);

// The extents of a dataset's dataspace (an input error where one passes 2^63).
std::vector<int64_t> dataset_shape(hid_t dataset);
// A shape, or a hyperslab's start or count, as HDF5's extents.
std::vector<hsize_t> to_hsize(const std::vector<int64_t>& v);
// Names of the links directly under a group, in name order.
std::vector<std::string> group_members(hid_t group);
// Whether the object at `path` under loc is a dataset (false for a group or anything else).
bool is_dataset(hid_t loc, const std::string& path);

// "[8, 6]": for messages.
std::string shape_string(const std::vector<int64_t>& shape);

}  // namespace gpt::h5
