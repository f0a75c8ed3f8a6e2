// The resolved shard list of a run, kept in its checkpoints' config (key "data_shards": one
// {"path", "tokens", "bytes", "sample_crc32"} object per training shard, in order, paths absolute;
// "val_data_shards" likewise), and the resume check against it: a glob or directory that later
// names other files, or a shard that changed length, would silently change which tokens sample j
// reads, so a resume whose shards differ from the recorded ones is an error naming the first
// difference. A shard at another path with the recorded tokens, bytes and samples (the data
// moved or copied) is the same shard, and the log says so.
#pragma once

#include <string>

#include "framework/io/dataset.h"

namespace gpt {

// A --data value with each comma-separated item made absolute and lexically normal: what a run
// records, so that a resume from another working directory finds the same files.
std::string absolute_data_spec(const std::string& spec);

// config_json (a JSON object's text) with data_shards and val_data_shards added (empty lists for
// the built-in corpus or no validation set).
std::string config_with_shards(const std::string& config_json, const TokenDataset& train,
                               const TokenDataset* validation);

// Throws an input error naming the first difference between the training shards recorded in a
// checkpoint's config and train's. Checkpoints written before shards were recorded (no
// data_shards key) pass.
void check_recorded_shards(const std::string& config_json, const std::string& checkpoint_path,
                           const TokenDataset& train);

}  // namespace gpt
