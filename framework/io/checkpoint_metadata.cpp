// The metadata checksum of a checkpoint (see checkpoint_metadata.h).
#include "framework/io/checkpoint_metadata.h"

#include <algorithm>
#include <bit>
#include <sstream>

#include "framework/io/crc32.h"

namespace gpt {

namespace {

void put(std::ostringstream& out, const std::string& key, const std::string& value) {
  out << key << ' ' << value.size() << ':' << value << '\n';
}

}  // namespace

uint32_t checkpoint_metadata_crc32(const CheckpointMeta& meta, const OptimizerMeta* optimizer,
                                   const std::map<std::string, DatasetRecord>& datasets) {
  std::ostringstream out;
  put(out, "format", kCheckpointFormat);
  put(out, "format_version", std::to_string(kCheckpointFormatVersion));
  put(out, "step", std::to_string(meta.step));
  put(out, "consumed_samples", std::to_string(meta.consumed_samples));
  put(out, "seed", std::to_string(meta.seed));
  put(out, "config", meta.config_json);
  put(out, "tokenizer", meta.tokenizer);
  put(out, "layout", meta.layout);
  if (optimizer != nullptr) {
    put(out, "optimizer.type", optimizer->type);
    put(out, "optimizer.step", std::to_string(optimizer->step));
    std::vector<std::pair<std::string, double>> hyper = optimizer->hyperparameters;
    std::sort(hyper.begin(), hyper.end());
    for (const auto& [name, value] : hyper)
      put(out, "optimizer." + name, std::to_string(std::bit_cast<uint64_t>(value)));
  }
  for (const auto& [name, record] : datasets) {
    std::string shape;
    for (int64_t d : record.shape) shape += std::to_string(d) + ",";
    put(out, name, shape + " crc32 " + std::to_string(record.crc32));
  }
  const std::string text = out.str();
  return crc32(text.data(), text.size());
}

}  // namespace gpt
