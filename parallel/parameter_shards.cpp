// What a tp rank holds of each parameter (see parameter_shards.h).
#include "parallel/parameter_shards.h"

#include <algorithm>

#include "framework/check.h"
#include "parallel/tensor_parallel.h"

namespace gpt {

namespace {

// The rows of each group a column-parallel rank holds.
ShardRange column_rows(const LinearSpec& spec, int tp_rank, int tp_size) {
  GPT_CHECK(spec.out_features % spec.groups == 0,
            spec.name << ": groups do not divide the output features");
  const int64_t replicas = spec.tp_replicas;  // ranks r .. r + replicas - 1 hold the same rows
  GPT_CHECK(tp_size % replicas == 0, spec.name << ": replicas do not divide tp");
  return shard_range(spec.out_features / spec.groups, static_cast<int>(tp_rank / replicas),
                     static_cast<int>(tp_size / replicas));
}

}  // namespace

LocalLinear local_linear(const LinearSpec& spec, LinearPlace place, int tp_size) {
  if (column_parallel(place))
    return {spec.in_features, column_rows(spec, 0, tp_size).count * spec.groups};
  return {shard_range(spec.in_features, 0, tp_size).count, spec.out_features};
}

LinearShard column_shard(const LinearSpec& spec, int tp_rank, int tp_size) {
  const int64_t groups = spec.groups;
  const int64_t group_rows = spec.out_features / groups, IC = spec.in_features;
  const ShardRange rows = column_rows(spec, tp_rank, tp_size);
  LinearShard shard{.local_in = IC, .local_out = rows.count * groups};
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t first_row = g * group_rows + rows.start;
    shard.weight_slabs.push_back({{first_row, 0}, {rows.count, IC}, g * rows.count * IC});
    shard.bias_slabs.push_back({{first_row}, {rows.count}, g * rows.count});
  }
  return shard;
}

LinearShard row_shard(const LinearSpec& spec, int tp_rank, int tp_size) {
  const ShardRange cols = shard_range(spec.in_features, tp_rank, tp_size);
  const int64_t OC = spec.out_features;
  return {.local_in = cols.count,
          .local_out = OC,
          .weight_slabs = {{{0, cols.start}, {OC, cols.count}, 0}},
          .bias_slabs = {{{0}, {OC}, 0}},
          .bias_replicated = true};  // added after the reduction: the same on every tp rank
}

VocabShard vocab_shard(const ModelConfig& cfg, int tp_rank, int tp_size) {
  const ShardRange rows = shard_range(cfg.padded_vocab(tp_size), tp_rank, tp_size);
  const int64_t valid = std::clamp<int64_t>(cfg.vocab_size - rows.start, 0, rows.count);
  return {rows.start, rows.count, valid};
}

std::vector<LocalParameter> norm_local_parameters(const NormSpec& spec) {
  std::vector<LocalParameter> out{{spec.name + ".weight", spec.C, false}};
  if (!spec.rms) out.push_back({spec.name + ".bias", spec.C, false});
  return out;
}

std::vector<LocalParameter> block_local_parameters(const BlockParameters& p, int tp_size) {
  std::vector<LocalParameter> out;
  for_each_block_parameter(
      p,
      [&](const NormSpec& spec) {
        for (LocalParameter& q : norm_local_parameters(spec)) out.push_back(std::move(q));
      },
      [&](const LinearSpec& spec, LinearPlace place) {
        const LocalLinear local = local_linear(spec, place, tp_size);
        out.push_back({spec.name + ".weight", local.out * local.in, true});
        if (spec.bias) out.push_back({spec.name + ".bias", local.out, false});
      });
  return out;
}

}  // namespace gpt
