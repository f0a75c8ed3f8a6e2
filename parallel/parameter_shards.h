// What of each parameter a tp rank holds, in one place for the layers that register the
// parameters (layers/) and the memory model that counts them (memory_model.h): a column-parallel
// linear's rows (Megatron's ColumnParallelLinear: each group of rows split by ranks, groups of
// tp_replicas ranks sharing theirs), a row-parallel linear's columns (its bias whole on every
// rank), the vocabulary matrices' padded rows, and a norm's or a position table's whole copy.
// The parameter specs themselves are the model family's (framework/families/model_family.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "framework/families/model_family.h"
#include "framework/parameter.h"

namespace gpt {

// A linear's block on one rank.
struct LinearShard {
  int64_t local_in;                     // columns of the local weight
  int64_t local_out;                    // rows of the local weight, elements of the local bias
  std::vector<Slab> weight_slabs = {};  // what of [OC, IC] they hold
  std::vector<Slab> bias_slabs = {};    // what of [OC]
  bool bias_replicated = false;         // every tp rank holds the same full bias
};
LinearShard column_shard(const LinearSpec& spec, int tp_rank, int tp_size);
LinearShard row_shard(const LinearSpec& spec, int tp_rank, int tp_size);
// A linear's local (IC, OC) alone, without the slabs (the memory and cost models' counts): a
// column-parallel one's where its place in the block is an input, a row-parallel one's where it
// is an output.
struct LocalLinear {
  int64_t in, out;
};
LocalLinear local_linear(const LinearSpec& spec, LinearPlace place, int tp_size);

// The vocabulary rows a rank stores: [start, start + count), count = Vp/tp.
struct VocabShard {
  int64_t start;
  int64_t count;  // stored rows (padding included)
  int64_t valid;  // rows below the real vocabulary size V
};
VocabShard vocab_shard(const ModelConfig& cfg, int tp_rank, int tp_size);

// A parameter's name and the floats one rank stores of it.
struct LocalParameter {
  std::string name;
  int64_t numel;
  bool weight_decay;  // the matrices; not the biases and norm weights
};
// A block's, in registration order, on tp rank 0 of tp_size (every rank stores as many).
std::vector<LocalParameter> block_local_parameters(const BlockParameters& p, int tp_size);
std::vector<LocalParameter> norm_local_parameters(const NormSpec& spec);

}  // namespace gpt
