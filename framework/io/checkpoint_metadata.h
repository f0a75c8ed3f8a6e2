// The checksum over a checkpoint's metadata: every root and /optimizer attribute a resume reads
// (step, consumed_samples, seed, config, tokenizer, layout, the optimizer's type, step and
// hyper-parameters) and every dataset's name, shape and crc32. The tensors have their own crc32s;
// this covers the rest, so that a flipped bit in, say, the step or a digit of the config is found
// when a resume candidate is chosen instead of silently changing the run. The writer stores it as
// the root attribute metadata_crc32 (format_version 2); the reader recomputes it from what it read.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/io/checkpoint_format.h"

namespace gpt {

struct DatasetRecord {
  std::vector<int64_t> shape;
  uint32_t crc32 = 0;
};

// crc32 of a canonical text of the metadata: strings length-prefixed, doubles by their bits,
// hyper-parameters and datasets in name order. `optimizer` is null for a file without one.
uint32_t checkpoint_metadata_crc32(const CheckpointMeta& meta, const OptimizerMeta* optimizer,
                                   const std::map<std::string, DatasetRecord>& datasets);

}  // namespace gpt
