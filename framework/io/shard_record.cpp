// Recording a run's shard list in its config and checking it on resume (see shard_record.h).
#include "framework/io/shard_record.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "framework/json.h"

namespace gpt {
namespace {

Json shard_list(const TokenDataset* data) {
  Json list = Json::array();
  if (data != nullptr && data->shards)
    for (const TokenShard& s : data->shards->shards())
      list.push_back(Json{{"path", s.path}, {"tokens", s.tokens}});
  return list;
}

std::string describe(const std::string& path, int64_t tokens) {
  return path + " (" + std::to_string(tokens) + " tokens)";
}

}  // namespace

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
    if (path != now[i]["path"].get<std::string>() || tokens != now[i]["tokens"].get<int64_t>())
      fail_input(head + "shard " + std::to_string(i + 1) + " is now " +
                 describe(now[i]["path"].get<std::string>(), now[i]["tokens"].get<int64_t>()) +
                 ", recorded " + describe(path, tokens));
  }
}

}  // namespace gpt
