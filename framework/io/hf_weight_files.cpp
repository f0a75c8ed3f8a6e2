// Reading and writing a Hugging Face directory's weight files (see hf_weight_files.h).
#include "framework/io/hf_weight_files.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "framework/check.h"
#include "framework/checked_size.h"
#include "framework/io/whole_file.h"
#include "framework/parameter.h"
#include "framework/user_files.h"

namespace gpt {
namespace fs = std::filesystem;
namespace {

// A 405B model's index is about 100 KB and its config.json a few: 64 MB is neither.
constexpr uintmax_t kMaxJsonBytes = 64u << 20;

// A shard the index names must be a file of the directory itself: a name with a path in it
// (../, /etc/...) would read files the directory does not hold.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

std::string shard_name(size_t index, size_t count) {
  char name[64];
  std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", index + 1, count);
  return name;
}

// Whether a file is weights save_pretrained would write, so an earlier model's are found.
bool is_hf_weight_file(const std::string& name) {
  return name == kHfSingleWeightsFile || name == kHfWeightIndexFile ||
         (name.starts_with("model-") && name.ends_with(".safetensors") &&
          name.find("-of-") != std::string::npos);
}

}  // namespace

Json read_hf_json(const std::string& path, const std::string& what) {
  require_regular_file(path, what);
  std::error_code ec;
  const uintmax_t bytes = fs::file_size(path, ec);
  GPT_INPUT_CHECK(!ec && bytes <= kMaxJsonBytes,
                  path << ": " << bytes << " bytes, more than a model's JSON file has ("
                       << kMaxJsonBytes << " at most)");
  const std::optional<std::string> text = read_whole_file(path);
  GPT_INPUT_CHECK(text.has_value(), path << ": cannot open the file");
  return parse_json_object(*text, path);
}

HfWeightFiles::HfWeightFiles(const std::string& dir) {
  const fs::path single_path = fs::path(dir) / kHfSingleWeightsFile;
  const fs::path index_path = fs::path(dir) / kHfWeightIndexFile;
  std::error_code ec;
  std::map<std::string, std::string> weight_map;  // tensor -> shard, from the index
  std::vector<std::string> shards;
  // model.safetensors first where both are present, as transformers' from_pretrained looks.
  if (!fs::exists(single_path, ec) && fs::exists(index_path, ec)) {
    source_ = index_path.string();
    const Json index = read_hf_json(source_, "--from-hf");
    const Json map = json_field<Json>(index, "weight_map", source_);
    GPT_INPUT_CHECK(map.is_object(), source_ << ": 'weight_map' must be an object");
    std::set<std::string> seen;
    for (const auto& item : map.items()) {
      // Named references, not structured bindings: GPT_MSG's lambda captures them (clang 14,
      // the fuzz build's compiler, cannot capture a structured binding).
      const std::string& tensor = item.key();
      const Json& file = item.value();
      GPT_INPUT_CHECK(file.is_string() && is_plain_file_name(file.get<std::string>()),
                      source_ << ": tensor " << quoted_excerpt(tensor)
                              << " is mapped to something other than a file name of the "
                                 "directory");
      const std::string name = file.get<std::string>();
      weight_map[tensor] = name;
      if (seen.insert(name).second) shards.push_back(name);
    }
    GPT_INPUT_CHECK(!shards.empty(), source_ << ": 'weight_map' names no file");
  } else {
    source_ = single_path.string();
    shards.push_back(kHfSingleWeightsFile);
  }
  for (const std::string& shard : shards) {
    const std::string path = (fs::path(dir) / shard).string();
    GPT_INPUT_CHECK(is_regular_file(path),
                    (weight_map.empty() ? "--from-hf " + dir + ": neither " + kHfSingleWeightsFile +
                                              " nor " + kHfWeightIndexFile
                                        : source_ + " names " + shard + ": no such file " + path));
    files_.push_back(std::make_unique<SafetensorsFile>(path));
    const SafetensorsFile& file = *files_.back();
    for (const std::string& name : file.names()) {
      const auto placed = where_.emplace(name, &file);
      GPT_INPUT_CHECK(placed.second, "tensor " << quoted_excerpt(name) << " is stored twice: in "
                                               << placed.first->second->path() << " and " << path);
      const std::optional<int64_t> sum = checked_add(total_values_, shape_numel(file.shape(name)));
      GPT_INPUT_CHECK(sum.has_value(), path << ": more than 2^63 values in all");
      total_values_ = *sum;
    }
  }
  for (const auto& entry : weight_map) {
    const std::string &tensor = entry.first, &shard = entry.second;
    const auto it = where_.find(tensor);
    GPT_INPUT_CHECK(it != where_.end() && fs::path(it->second->path()).filename() == shard,
                    source_ << " places tensor " << quoted_excerpt(tensor) << " in " << shard
                            << ", which does not hold it");
  }
}

std::vector<std::string> HfWeightFiles::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : where_) out.push_back(name);
  return out;
}

const std::vector<int64_t>& HfWeightFiles::shape(const std::string& name) const {
  GPT_INPUT_CHECK(has(name), source_ << " has no tensor " << name);
  return where_.at(name)->shape(name);
}

const std::string& HfWeightFiles::path_of(const std::string& name) const {
  GPT_INPUT_CHECK(has(name), source_ << " has no tensor " << name);
  return where_.at(name)->path();
}

HostTensor HfWeightFiles::read(const std::string& name) const {
  GPT_INPUT_CHECK(has(name), source_ << " has no tensor " << name);
  return where_.at(name)->read(name);
}

std::string HfWeightFiles::metadata(const std::string& key) const {
  return files_.empty() ? "" : files_.front()->metadata(key);
}

std::vector<std::string> write_hf_weights(const std::string& dir,
                                          const std::vector<TensorToWrite>& tensors,
                                          const TensorValues& values,
                                          const std::map<std::string, std::string>& metadata,
                                          StoredDtype dtype, int64_t max_shard_bytes) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec))
    if (is_hf_weight_file(entry.path().filename().string())) fs::remove(entry.path(), ec);
  // Shards filled in order: a tensor that would take one past the size starts the next.
  std::vector<std::vector<TensorToWrite>> shards(1);
  int64_t shard_bytes = 0, total_bytes = 0;
  for (const TensorToWrite& t : tensors) {
    const int64_t bytes = stored_dtype_bytes(dtype) * shape_numel(t.shape);
    if (!shards.back().empty() && shard_bytes + bytes > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(t);
    shard_bytes += bytes;
    total_bytes += bytes;
  }
  if (shards.size() == 1) {
    write_safetensors((fs::path(dir) / kHfSingleWeightsFile).string(), tensors, values, metadata,
                      dtype);
    return {kHfSingleWeightsFile};
  }
  std::vector<std::string> written;
  Json weight_map = Json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    written.push_back(shard_name(i, shards.size()));
    write_safetensors((fs::path(dir) / written.back()).string(), shards[i], values, metadata,
                      dtype);
    for (const TensorToWrite& t : shards[i]) weight_map[t.name] = written.back();
  }
  const Json index = {{"metadata", {{"total_size", total_bytes}}}, {"weight_map", weight_map}};
  write_file_atomically((fs::path(dir) / kHfWeightIndexFile).string(),
                        [&](std::ostream& out) { out << index.dump(2) << "\n"; }, false);
  written.push_back(kHfWeightIndexFile);
  return written;
}

}  // namespace gpt
