// Recording a run's shard list in its config and checking it on resume (see shard_record.h).
#include "framework/io/shard_record.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "framework/io/crc32.h"
#include "framework/json.h"
#include "framework/logging.h"

namespace gpt {
namespace {

int64_t file_bytes(const std::string& path) {
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  return ec ? -1 : static_cast<int64_t>(bytes);
}

// crc32 of three 4 KiB samples of a file (its start, middle and end): with the size, what tells
// a copy of a shard from another shard of the same length (fixed-size shards differ in their
// tokens, which the middle and end samples hold). -1 where the file cannot be read.
int64_t sample_crc32(const std::string& path) {
  const int64_t size = file_bytes(path);
  std::ifstream in(path, std::ios::binary);
  if (size < 0 || !in) return -1;
  constexpr int64_t kSample = 4096;
  std::vector<char> buffer(static_cast<size_t>(kSample));
  uint32_t crc = 0;
  for (int64_t at : {int64_t{0}, std::max<int64_t>(0, size / 2 - kSample / 2),
                     std::max<int64_t>(0, size - kSample)}) {
    in.seekg(at);
    in.read(buffer.data(), std::min(kSample, size - at));
    crc = crc32(buffer.data(), static_cast<size_t>(in.gcount()), crc);
    in.clear();
  }
  return crc;
}

Json shard_list(const TokenDataset* data) {
  Json list = Json::array();
  if (data != nullptr && data->shards)
    for (const TokenShard& s : data->shards->shards())
      list.push_back(Json{{"path", absolute_data_spec(s.path)},
                          {"tokens", s.tokens},
                          {"bytes", file_bytes(s.path)},
                          {"sample_crc32", sample_crc32(s.path)}});
  return list;
}

// A recorded shard's `key` (bytes, sample_crc32); -2 where the checkpoint predates it (never
// equal to a value of a readable file).
int64_t recorded_value(const Json& shard, const char* key, const std::string& what) {
  return shard.contains(key) ? json_field<int64_t>(shard, key, what) : -2;
}

std::string describe(const std::string& path, int64_t tokens) {
  return path + " (" + std::to_string(tokens) + " tokens)";
}

}  // namespace

std::string absolute_data_spec(const std::string& spec) {
  std::string out;
  std::istringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    if (!out.empty()) out += ",";
    out += item.empty() ? item : std::filesystem::absolute(item).lexically_normal().string();
  }
  return out;
}

std::string config_with_shards(const std::string& config_json, const TokenDataset& train,
                               const TokenDataset* validation) {
  Json j = parse_json_object(config_json, "run config");
  j["data_shards"] = shard_list(&train);
  j["val_data_shards"] = shard_list(validation);
  return j.dump();
}

void check_recorded_shards(const std::string& config_json, const std::string& checkpoint_path,
                           const TokenDataset& train) {
  const std::string what = checkpoint_path + ": attribute config";
  const Json cfg = parse_json_object(config_json, what);
  if (!cfg.contains("data_shards")) return;
  const auto recorded = json_field<Json>(cfg, "data_shards", what);
  GPT_INPUT_CHECK(recorded.is_array(), what << ": 'data_shards' is not a list");
  const Json now = shard_list(&train);
  const std::string head = "--data " + train.path +
                           " does not match the shards recorded in the checkpoint " +
                           checkpoint_path + ": ";
  for (size_t i = 0; i < std::max(recorded.size(), now.size()); ++i) {
    if (i >= recorded.size())
      fail_input(head + "extra shard " +
                 describe(now[i]["path"].get<std::string>(), now[i]["tokens"].get<int64_t>()) +
                 ", not in the " + std::to_string(recorded.size()) + " recorded");
    const auto path = json_field<std::string>(recorded[i], "path", what);
    const auto tokens = json_field<int64_t>(recorded[i], "tokens", what);
    if (i >= now.size())
      fail_input(head + "recorded shard " + describe(path, tokens) + " is missing (" +
                 std::to_string(now.size()) + " shards now)");
    const std::string now_path = now[i]["path"].get<std::string>();
    const bool same_path = path == now_path || path == train.shards->shards()[i].path;
    // Moved or copied: the recorded size and samples (checkpoints that have them) and tokens.
    const bool same_file =
        recorded_value(recorded[i], "bytes", what) == now[i]["bytes"].get<int64_t>() &&
        recorded_value(recorded[i], "sample_crc32", what) ==
            now[i]["sample_crc32"].get<int64_t>() &&
        now[i]["bytes"].get<int64_t>() >= 0;
    if ((!same_path && !same_file) || tokens != now[i]["tokens"].get<int64_t>())
      fail_input(head + "shard " + std::to_string(i + 1) + " is now " +
                 describe(now_path, now[i]["tokens"].get<int64_t>()) + ", recorded " +
                 describe(path, tokens));
    if (!same_path)
      log::info0("data: " + now_path + " stands for the recorded " + path +
                 " (the same tokens, size and sampled bytes)");
  }
}

}  // namespace gpt
