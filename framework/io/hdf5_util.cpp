// HDF5 handles and attribute helpers (see hdf5_util.h).
#include "framework/io/hdf5_util.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "framework/check.h"

namespace gpt::h5 {
namespace {

herr_t close_id(hid_t id) {
  switch (H5Iget_type(id)) {
    case H5I_FILE:
      return H5Fclose(id);
    case H5I_GROUP:
      return H5Gclose(id);
    case H5I_DATATYPE:
      return H5Tclose(id);
    case H5I_DATASPACE:
      return H5Sclose(id);
    case H5I_DATASET:
      return H5Dclose(id);
    case H5I_ATTR:
      return H5Aclose(id);
    case H5I_GENPROP_LST:
      return H5Pclose(id);
    default:
      return H5Idec_ref(id) < 0 ? -1 : 0;
  }
}

// Opens an attribute that must be a single value (scalar or one element), returning it and its
// file datatype.
std::pair<Handle, Handle> open_single_value_attribute(hid_t obj, const std::string& name) {
  Handle attr(GPT_H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT)));
  Handle space(GPT_H5_CHECK(H5Aget_space(attr.id())));
  GPT_INPUT_CHECK(GPT_H5_CHECK(H5Sget_simple_extent_npoints(space.id())) == 1,
                  "attribute '" << name << "' is not a single value");
  Handle type(GPT_H5_CHECK(H5Aget_type(attr.id())));
  return {std::move(attr), std::move(type)};
}

const char* class_name(H5T_class_t c) {
  switch (c) {
    case H5T_INTEGER:
      return "an integer";
    case H5T_FLOAT:
      return "a float";
    case H5T_STRING:
      return "a string";
    default:
      return "not a number or string";
  }
}

void replace_attribute(hid_t obj, const std::string& name, hid_t file_type, const void* value,
                       hid_t mem_type) {
  if (has_attribute(obj, name)) GPT_H5_CHECK(H5Adelete(obj, name.c_str()));
  Handle space(GPT_H5_CHECK(H5Screate(H5S_SCALAR)));
  Handle attr(
      GPT_H5_CHECK(H5Acreate2(obj, name.c_str(), file_type, space.id(), H5P_DEFAULT, H5P_DEFAULT)));
  GPT_H5_CHECK(H5Awrite(attr.id(), mem_type, value));
}

herr_t collect_error(unsigned n, const H5E_error2_t* err, void* out) {
  // Walking upward, entry 0 is where the failure was detected: the most specific reason.
  if (n == 0 && err->desc != nullptr) *static_cast<std::string*>(out) = err->desc;
  return 0;
}

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

}  // namespace

void Handle::close() {
  if (!valid()) return;
  hid_t id = std::exchange(id_, H5I_INVALID_HID);
  GPT_H5_CHECK(close_id(id));
}

void Handle::reset() noexcept {
  if (valid()) close_id(std::exchange(id_, H5I_INVALID_HID));
}

void silence_errors() {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

std::string last_error_message() {
  std::string out;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_error, &out);
  return out;
}

bool has_link(hid_t loc, const std::string& path) {
  // H5Lexists fails (rather than answering false) when an intermediate group is missing, so
  // check one component at a time.
  std::string prefix = path.starts_with("/") ? "/" : "";
  std::istringstream parts(path);
  std::string part;
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    prefix += part;
    if (GPT_H5_CHECK(H5Lexists(loc, prefix.c_str(), H5P_DEFAULT)) <= 0) return false;
    prefix += "/";
  }
  return true;
}

bool has_attribute(hid_t obj, const std::string& name) {
  return GPT_H5_CHECK(H5Aexists(obj, name.c_str())) > 0;
}

void write_int64_attribute(hid_t obj, const std::string& name, int64_t value) {
  replace_attribute(obj, name, H5T_STD_I64LE, &value, H5T_NATIVE_INT64);
}

void write_uint32_attribute(hid_t obj, const std::string& name, uint32_t value) {
  replace_attribute(obj, name, H5T_STD_U32LE, &value, H5T_NATIVE_UINT32);
}

void write_double_attribute(hid_t obj, const std::string& name, double value) {
  replace_attribute(obj, name, H5T_IEEE_F64LE, &value, H5T_NATIVE_DOUBLE);
}

void write_string_attribute(hid_t obj, const std::string& name, const std::string& value) {
  Handle type(GPT_H5_CHECK(H5Tcopy(H5T_C_S1)));
  GPT_H5_CHECK(H5Tset_size(type.id(), H5T_VARIABLE));
  GPT_H5_CHECK(H5Tset_cset(type.id(), H5T_CSET_UTF8));
  const char* text = value.c_str();
  replace_attribute(obj, name, type.id(), &text, type.id());
}

H5T_class_t attribute_class(hid_t obj, const std::string& name) {
  Handle attr(GPT_H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT)));
  Handle type(GPT_H5_CHECK(H5Aget_type(attr.id())));
  return GPT_H5_CHECK(H5Tget_class(type.id()));
}

std::optional<int64_t> read_int64_attribute(hid_t obj, const std::string& name) {
  if (!has_attribute(obj, name)) return std::nullopt;
  const auto opened = open_single_value_attribute(obj, name);
  const Handle &attr = opened.first, &type = opened.second;
  H5T_class_t c = GPT_H5_CHECK(H5Tget_class(type.id()));
  GPT_INPUT_CHECK(c == H5T_INTEGER,
                  "attribute '" << name << "' is " << class_name(c) << ", expected an integer");
  int64_t value = 0;
  GPT_H5_CHECK(H5Aread(attr.id(), H5T_NATIVE_INT64, &value));
  return value;
}

std::optional<double> read_double_attribute(hid_t obj, const std::string& name) {
  if (!has_attribute(obj, name)) return std::nullopt;
  const auto opened = open_single_value_attribute(obj, name);
  const Handle &attr = opened.first, &type = opened.second;
  H5T_class_t c = GPT_H5_CHECK(H5Tget_class(type.id()));
  GPT_INPUT_CHECK(c == H5T_FLOAT || c == H5T_INTEGER,
                  "attribute '" << name << "' is " << class_name(c) << ", expected a number");
  double value = 0;
  GPT_H5_CHECK(H5Aread(attr.id(), H5T_NATIVE_DOUBLE, &value));
  return value;
}

std::optional<std::string> read_string_attribute(hid_t obj, const std::string& name) {
  if (!has_attribute(obj, name)) return std::nullopt;
  const auto opened = open_single_value_attribute(obj, name);
  const Handle &attr = opened.first, &type = opened.second;
  H5T_class_t c = GPT_H5_CHECK(H5Tget_class(type.id()));
  GPT_INPUT_CHECK(c == H5T_STRING,
                  "attribute '" << name << "' is " << class_name(c) << ", expected a string");
  if (GPT_H5_CHECK(H5Tis_variable_str(type.id())) > 0) {
    Handle mem_type(GPT_H5_CHECK(H5Tcopy(H5T_C_S1)));
    GPT_H5_CHECK(H5Tset_size(mem_type.id(), H5T_VARIABLE));
    GPT_H5_CHECK(H5Tset_cset(mem_type.id(), GPT_H5_CHECK(H5Tget_cset(type.id()))));
    char* text = nullptr;
    GPT_H5_CHECK(H5Aread(attr.id(), mem_type.id(), &text));
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  size_t size = H5Tget_size(type.id());
  GPT_CHECK(size > 0, "string attribute '" << name << "' has size 0");
  std::string value(size, '\0');
  GPT_H5_CHECK(H5Aread(attr.id(), type.id(), value.data()));
  // Fixed-length strings are padded with NULs or spaces.
  value.resize(std::min(value.size(), value.find('\0')));
  while (!value.empty() && value.back() == ' ') value.pop_back();
  return value;
}

std::vector<std::string> attribute_names(hid_t obj) {
  std::vector<std::string> names;
  hsize_t index = 0;
  GPT_H5_CHECK(H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &index, collect_attribute, &names));
  return names;
}

std::vector<int64_t> dataset_shape(hid_t dataset) {
  Handle space(GPT_H5_CHECK(H5Dget_space(dataset)));
  int rank = GPT_H5_CHECK(H5Sget_simple_extent_ndims(space.id()));
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  GPT_H5_CHECK(H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr));
  for (hsize_t d : dims)
    GPT_INPUT_CHECK(std::in_range<int64_t>(d), "a dataset extent of " << d << " passes 2^63");
  return std::vector<int64_t>(dims.begin(), dims.end());
}

std::vector<hsize_t> to_hsize(const std::vector<int64_t>& v) {
  return std::vector<hsize_t>(v.begin(), v.end());
}

std::vector<std::string> group_members(hid_t group) {
  H5G_info_t info;
  GPT_H5_CHECK(H5Gget_info(group, &info));
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    ssize_t length = GPT_H5_CHECK(
        H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT));
    std::string name(static_cast<size_t>(length) + 1, '\0');
    GPT_H5_CHECK(H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(),
                                    name.size(), H5P_DEFAULT));
    name.resize(static_cast<size_t>(length));
    names.push_back(std::move(name));
  }
  return names;
}

bool is_dataset(hid_t loc, const std::string& path) {
  Handle object(GPT_H5_CHECK(H5Oopen(loc, path.c_str(), H5P_DEFAULT)));
  return H5Iget_type(object.id()) == H5I_DATASET;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

void configure_mpi_io_before_init() {
  setenv("OMPI_MCA_sharedfp", "^sm", 0);
}

}  // namespace gpt::h5
