// HDF5 files from a text recipe, for the fuzz targets of HDF5 readers (token shards,
// checkpoints). Fuzzing an HDF5 file's bytes would spend the time in libhdf5's own parser (not
// this project's code, and not fixable here); a recipe instead gives libFuzzer the structure the
// readers check: which groups, datasets and attributes exist, their types, shapes and values.
// One item a line, unknown lines ignored:
//   group PATH
//   attr PATH NAME i64|i32|u32|f64|str|vstr|pair VALUE   (pair: a 2-element i64 attribute)
//   dset PATH f32|f64|u16|u32|i32|u8 D1,D2,... [fill K | empty]
// A dataset is written with element i = i * K (default 1) in its type, unless `empty` (declared,
// never written). At most kMaxWrittenElements are written; a larger written dataset is skipped.
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace gpt::fuzz {

constexpr uint64_t kMaxWrittenElements = 1u << 16;
constexpr uint64_t kMaxDeclaredElements = uint64_t{1} << 42;

inline hid_t h5_type(const std::string& name) {
  if (name == "f32") return H5T_IEEE_F32LE;
  if (name == "f64") return H5T_IEEE_F64LE;
  if (name == "u16") return H5T_STD_U16LE;
  if (name == "u32") return H5T_STD_U32LE;
  if (name == "i32") return H5T_STD_I32LE;
  if (name == "u8") return H5T_STD_U8LE;
  if (name == "i64") return H5T_STD_I64LE;
  return H5I_INVALID_HID;
}

// Writes the recipe's file at `path` (replacing it); HDF5's error printing stays off.
inline void write_h5_recipe(const std::string& path, const std::string& recipe) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (file < 0) return;
  const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  std::istringstream lines(recipe);
  std::string line;
  int items = 0;
  while (std::getline(lines, line) && ++items <= 64) {
    std::istringstream in(line);
    std::string kind, path_in_file;
    in >> kind >> path_in_file;
    if (path_in_file.empty() || path_in_file[0] != '/') continue;
    if (kind == "group") {
      const hid_t g = H5Gcreate2(file, path_in_file.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT);
      if (g >= 0) H5Gclose(g);
    } else if (kind == "attr") {
      std::string name, type, value;
      in >> name >> type;
      std::getline(in, value);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      const hid_t obj = H5Oopen(file, path_in_file.c_str(), H5P_DEFAULT);
      if (obj < 0 || name.empty()) {
        if (obj >= 0) H5Oclose(obj);
        continue;
      }
      hid_t space = H5Screate(H5S_SCALAR), ftype = H5I_INVALID_HID, mtype = H5I_INVALID_HID;
      int64_t i64[2] = {std::strtoll(value.c_str(), nullptr, 0), 0};
      double f64 = std::strtod(value.c_str(), nullptr);
      const char* text = value.c_str();
      const void* buffer = i64;
      bool close_types = false;
      if (type == "i64" || type == "i32" || type == "u32" || type == "pair") {
        ftype = type == "i32" ? H5T_STD_I32LE : type == "u32" ? H5T_STD_U32LE : H5T_STD_I64LE;
        mtype = H5T_NATIVE_INT64;
        if (type == "pair") {
          H5Sclose(space);
          const hsize_t two = 2;
          space = H5Screate_simple(1, &two, nullptr);
          i64[1] = i64[0];
        }
      } else if (type == "f64") {
        ftype = mtype = H5T_NATIVE_DOUBLE;
        buffer = &f64;
      } else if (type == "vstr" || type == "str") {
        ftype = H5Tcopy(H5T_C_S1);
        H5Tset_size(ftype, type == "vstr" ? H5T_VARIABLE : std::max<size_t>(1, value.size()));
        mtype = ftype;
        close_types = true;
        buffer = type == "vstr" ? static_cast<const void*>(&text) : text;
      }
      if (ftype >= 0) {
        const hid_t attr = H5Acreate2(obj, name.c_str(), ftype, space, H5P_DEFAULT, H5P_DEFAULT);
        if (attr >= 0) {
          H5Awrite(attr, mtype, buffer);
          H5Aclose(attr);
        }
      }
      if (close_types) H5Tclose(ftype);
      H5Sclose(space);
      H5Oclose(obj);
    } else if (kind == "dset") {
      std::string type, dims_text, option;
      int64_t k = 1;
      in >> type >> dims_text >> option;
      if (option == "fill") in >> k;
      const hid_t ftype = h5_type(type);
      std::vector<hsize_t> dims;
      uint64_t elements = 1;
      std::istringstream d(dims_text);
      std::string item;
      while (std::getline(d, item, ',') && dims.size() < 8) {
        const uint64_t n = std::strtoull(item.c_str(), nullptr, 10);
        dims.push_back(n);
        elements = n == 0 ? 0
                          : (elements > kMaxDeclaredElements / n ? kMaxDeclaredElements + 1
                                                                 : elements * n);
      }
      if (ftype < 0 || elements > kMaxDeclaredElements) continue;
      const bool write = option != "empty";
      if (write && elements > kMaxWrittenElements) continue;
      const hid_t space =
          dims.empty() ? H5Screate(H5S_SCALAR)
                       : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      const hid_t set =
          H5Dcreate2(file, path_in_file.c_str(), ftype, space, lcpl, H5P_DEFAULT, H5P_DEFAULT);
      if (set >= 0 && write && elements > 0) {
        std::vector<double> values(elements);
        for (uint64_t i = 0; i < elements; ++i)
          values[i] = static_cast<double>(static_cast<int64_t>(i) * k);
        H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
      }
      if (set >= 0) H5Dclose(set);
      H5Sclose(space);
    }
  }
  H5Pclose(lcpl);
  H5Fclose(file);
}

}  // namespace gpt::fuzz
