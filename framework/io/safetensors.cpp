// safetensors reading and writing (see safetensors.h). The host is little-endian (x86-64,
// aarch64), as the format's tensors are, so bytes are copied as they are.
#include "framework/io/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "framework/bf16.h"
#include "framework/check.h"
#include "framework/checked_size.h"
#include "framework/io/whole_file.h"
#include "framework/json.h"
#include "framework/parameter.h"

namespace gpt {
namespace {

// More than any real header (GPT-2 XL's is about 40 KB): a larger claim is a damaged file.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

int64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, nan
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa != 0) {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  } else {
    bits = sign;
  }
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  std::ifstream in(path, std::ios::binary);
  GPT_INPUT_CHECK(in.good(), path << ": cannot open the file");
  std::error_code ec;
  const auto file_size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  GPT_INPUT_CHECK(!ec && file_size >= 8, path << ": not a safetensors file (shorter than 8 bytes)");
  uint64_t header_bytes = 0;
  in.read(reinterpret_cast<char*>(&header_bytes), sizeof header_bytes);
  GPT_INPUT_CHECK(
      header_bytes <= kMaxHeaderBytes && static_cast<int64_t>(header_bytes) <= file_size - 8,
      path << ": the header claims " << header_bytes << " bytes but the file has " << file_size - 8
           << " after the length");
  std::string text(header_bytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_bytes));
  GPT_INPUT_CHECK(in.good(), path << ": cannot read the header");
  data_start_ = 8 + static_cast<int64_t>(header_bytes);
  const int64_t data_bytes = file_size - data_start_;
  const Json header = parse_json_object(text, path + ": header");
  std::vector<std::pair<int64_t, int64_t>> ranges;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      for (const auto& [key, text] : value.items())
        if (text.is_string()) metadata_[key] = text.get<std::string>();
      continue;
    }
    const std::string what = path + ": tensor " + quoted_excerpt(name);
    Entry e;
    e.dtype = json_field<std::string>(value, "dtype", what);
    e.shape = json_field<std::vector<int64_t>>(value, "shape", what);
    const auto offsets = json_field<std::vector<int64_t>>(value, "data_offsets", what);
    GPT_INPUT_CHECK(dtype_bytes(e.dtype) > 0, what << " has dtype " << quoted_excerpt(e.dtype)
                                                   << " (F32, F16 and BF16 are read)");
    GPT_INPUT_CHECK(offsets.size() == 2, what << ": data_offsets must be [begin, end]");
    e.begin = offsets[0];
    e.end = offsets[1];
    GPT_INPUT_CHECK(0 <= e.begin && e.begin <= e.end && e.end <= data_bytes,
                    what << ": data_offsets [" << e.begin << ", " << e.end
                         << "] outside the file's " << data_bytes << " data bytes");
    const std::optional<int64_t> bytes = checked_numel(e.shape, dtype_bytes(e.dtype));
    GPT_INPUT_CHECK(bytes.has_value(),
                    what << ": its shape has a negative dimension or more than 2^63 bytes");
    GPT_INPUT_CHECK(e.end - e.begin == *bytes, what << ": data_offsets span " << e.end - e.begin
                                                    << " bytes but its shape and " << e.dtype
                                                    << " need " << *bytes);
    ranges.emplace_back(e.begin, e.end);
    tensors_[name] = std::move(e);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    GPT_INPUT_CHECK(ranges[i].first >= ranges[i - 1].second,
                    path << ": two tensors overlap at data byte " << ranges[i].first);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, entry] : tensors_) out.push_back(name);
  return out;
}

std::string SafetensorsFile::metadata(const std::string& key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? "" : it->second;
}

const std::vector<int64_t>& SafetensorsFile::shape(const std::string& name) const {
  const auto it = tensors_.find(name);
  GPT_INPUT_CHECK(it != tensors_.end(), path_ << " has no tensor " << name);
  return it->second.shape;
}

HostTensor SafetensorsFile::read(const std::string& name) const {
  const auto it = tensors_.find(name);
  GPT_INPUT_CHECK(it != tensors_.end(), path_ << " has no tensor " << name);
  const Entry& e = it->second;
  std::vector<char> raw(static_cast<size_t>(e.end - e.begin));
  std::ifstream in(path_, std::ios::binary);
  in.seekg(data_start_ + e.begin);
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  GPT_INPUT_CHECK(in.good() || raw.empty(), path_ << ": cannot read tensor " << name);
  HostTensor t{e.shape, std::vector<float>(static_cast<size_t>(shape_numel(e.shape)))};
  for (size_t i = 0; i < t.values.size(); ++i) {
    if (e.dtype == "F32") {
      std::memcpy(&t.values[i], raw.data() + 4 * i, 4);
    } else {
      uint16_t half;
      std::memcpy(&half, raw.data() + 2 * i, 2);
      if (e.dtype == "F16") {
        t.values[i] = half_to_float(half);
      } else {  // BF16: the top half of a float32
        t.values[i] = bf16_to_float(half);
      }
    }
  }
  require_finite_weights(t.values, path_, name);
  return t;
}

void require_finite_weights(std::span<const float> values, const std::string& file,
                            const std::string& tensor) {
  const auto bad =
      std::find_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); });
  if (bad == values.end()) return;
  const char* what = std::isnan(*bad) ? "NaN" : *bad > 0 ? "+inf" : "-inf";
  fail_input(GPT_MSG(file << ": tensor " << quoted_excerpt(tensor) << " holds " << what
                          << " at element " << bad - values.begin() << " of " << values.size()
                          << ": weights must be finite"));
}

StoredDtype parse_stored_dtype(const std::string& name, const std::string& what) {
  if (name == "f32") return StoredDtype::kF32;
  if (name == "bf16") return StoredDtype::kBF16;
  fail_input(what + " must be f32 or bf16 (got " + quoted_excerpt(name) + ")");
}

const char* safetensors_dtype_name(StoredDtype dtype) {
  return dtype == StoredDtype::kBF16 ? "BF16" : "F32";
}

int64_t stored_dtype_bytes(StoredDtype dtype) {
  return dtype == StoredDtype::kBF16 ? 2 : 4;
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const TensorValues& values,
                       const std::map<std::string, std::string>& metadata, StoredDtype dtype) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  int64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    const int64_t bytes = stored_dtype_bytes(dtype) * shape_numel(t.shape);
    header[t.name] = {{"dtype", safetensors_dtype_name(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  write_file_atomically(path, [&](std::ostream& out) {
    const uint64_t length = text.size();
    out.write(reinterpret_cast<const char*>(&length), sizeof length);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const TensorToWrite& t : tensors) {
      const std::vector<float> v = values(t);
      GPT_CHECK(shape_numel(t.shape) == static_cast<int64_t>(v.size()),
                "tensor " << t.name << ": shape and values disagree");
      if (dtype == StoredDtype::kF32) {
        out.write(reinterpret_cast<const char*>(v.data()),
                  static_cast<std::streamsize>(4 * v.size()));
        continue;
      }
      std::vector<uint16_t> half(v.size());
      for (size_t i = 0; i < v.size(); ++i) half[i] = float_to_bf16(v[i]);
      out.write(reinterpret_cast<const char*>(half.data()),
                static_cast<std::streamsize>(2 * half.size()));
    }
  });
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, HostTensor>>& tensors,
                       const std::map<std::string, std::string>& metadata, StoredDtype dtype) {
  std::vector<TensorToWrite> order;
  std::map<std::string, const HostTensor*> by_name;
  for (const auto& [name, t] : tensors) {
    order.push_back({name, t.shape});
    by_name[name] = &t;
  }
  write_safetensors(
      path, order, [&](const TensorToWrite& t) { return by_name.at(t.name)->values; }, metadata,
      dtype);
}

}  // namespace gpt
