// The safetensors format (Hugging Face's weight files): an 8-byte little-endian header length N,
// N bytes of JSON mapping each tensor's name to {"dtype", "shape", "data_offsets": [begin, end]}
// (offsets into the data that follows the header; an optional "__metadata__" object of strings),
// then the raw little-endian tensors. Written by hand: the format is that one paragraph, and no
// Debian package reads it from C++. Reading validates the whole header before any tensor is
// used, so a file that lies about its sizes or offsets is one error naming it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gpt {

// A float32 tensor in memory: row-major values of `shape`.
struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

class SafetensorsFile {
 public:
  // Reads and validates the header; throws a one-line input error naming the file.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  std::vector<std::string> names() const;  // in name order
  const std::vector<int64_t>& shape(const std::string& name) const;
  // A string of the header's "__metadata__", "" where absent.
  std::string metadata(const std::string& key) const;
  // The tensor as float32 (F32 as stored; F16 and BF16 widened exactly). A NaN or an infinity
  // in it is an input error (require_finite_weights).
  HostTensor read(const std::string& name) const;

 private:
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    int64_t begin = 0, end = 0;  // in the data section
  };
  std::string path_;
  int64_t data_start_ = 0;
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Imported weights must be finite: a NaN or an infinity would import, train and generate garbage
// with exit 0. Throws a one-line input error naming the file, the tensor and the first such
// element.
void require_finite_weights(std::span<const float> values, const std::string& file,
                            const std::string& tensor);

// The element types write_safetensors writes: F32, or BF16 rounded to nearest even (half the
// bytes; a BF16 value widened and written again is unchanged, so BF16 weights round-trip).
enum class StoredDtype { kF32, kBF16 };
// "f32" or "bf16" (an option's value); anything else is a one-line error naming `what`.
StoredDtype parse_stored_dtype(const std::string& name, const std::string& what);
const char* safetensors_dtype_name(StoredDtype dtype);  // "F32", "BF16"
int64_t stored_dtype_bytes(StoredDtype dtype);

// A tensor to write: its name and shape. Its values are asked for when its turn comes, so a
// model is written one tensor at a time rather than held whole a second time.
struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
};
using TensorValues = std::function<std::vector<float>(const TensorToWrite&)>;

// Writes the tensors (in the order given, `values` giving each one's row-major values) and
// string metadata to `path` through a temporary file and a rename, so a failed write leaves
// nothing under the name.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const TensorValues& values,
                       const std::map<std::string, std::string>& metadata, StoredDtype dtype);
// The same for tensors already in memory.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, HostTensor>>& tensors,
                       const std::map<std::string, std::string>& metadata,
                       StoredDtype dtype = StoredDtype::kF32);

}  // namespace gpt
