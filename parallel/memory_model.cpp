// The memory model (see memory_model.h). Each sum below lists the buffers of one struct of
// layers/ in its order (BlockCache, BlockGrads, HeadCache, HeadGrads, LayerScratch, a stage's
// Cache and GradSet), each rounded as the backend reserves it.
#include "parallel/memory_model.h"

#include <algorithm>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "framework/gemm_layout.h"
#include "parallel/data_parallel.h"
#include "parallel/parameter_shards.h"

namespace gpt {

int64_t reserved_bytes(DeviceKind device, int64_t count, int64_t element_bytes) {
  const int64_t unit = device == DeviceKind::kCpu ? 64 : 256;  // Backend::allocation_granularity
  const int64_t bytes = count * element_bytes;
  return (bytes + unit - 1) / unit * unit;
}

namespace {

struct Rounder {
  DeviceKind device;
  int64_t operator()(int64_t floats) const { return reserved_bytes(device, floats); }
};

// A residual-stream norm's cache (LayerNormCache): its mean (LayerNorm only) and rstd.
int64_t norm_cache_bytes(const LayerSizes& s) {
  const Rounder r{s.device};
  return r(s.ln_mean()) + r(s.ln_stats());
}

int64_t block_cache_bytes(const LayerSizes& s) {
  const Rounder r{s.device};
  const int64_t attention = r(s.gathered_rows()) + r(s.qkv()) + r(s.qk_pre()) +
                            r(s.q_norm_stats()) + r(s.k_norm_stats()) + r(s.attention_cache()) +
                            r(s.attention_out());
  const int64_t mlp = r(s.gathered_rows()) + r(s.ffn_in()) + r(s.ffn());
  return norm_cache_bytes(s) + r(s.ln_out()) + attention + r(s.residual()) + norm_cache_bytes(s) +
         r(s.ln_out()) + mlp;
}

// Under bf16 precision (layers/stored_block_cache.h): the same buffers, each activation in 16
// bits, each statistic in float32, every buffer rounded as the backend reserves it.
int64_t stored_block_cache_bytes(const LayerSizes& s) {
  const Rounder r{s.device};
  const auto r16 = [&s](int64_t count) { return reserved_bytes(s.device, count, 2); };
  const bool probabilities = attention_cache_is_quadratic(s.device);
  const int64_t activations = 2 * (r16(s.ln_out()) + r16(s.gathered_rows())) + r16(s.qkv()) +
                              r16(s.qk_pre()) + r16(s.attention_out()) + r16(s.residual()) +
                              r16(s.ffn_in()) + r16(s.ffn()) +
                              (probabilities ? r16(s.attention_cache()) : 0);
  const int64_t statistics = 2 * norm_cache_bytes(s) + r(s.q_norm_stats()) + r(s.k_norm_stats()) +
                             (probabilities ? 0 : r(s.attention_cache()));
  return activations + statistics;
}

int64_t block_grads_bytes(const LayerSizes& s) {
  const Rounder r{s.device};
  return r(s.gathered_rows()) + r(s.ffn_in()) + 2 * r(s.residual()) + r(s.gathered_rows()) +
         r(s.qkv()) + r(s.qk_pre()) + r(s.residual());
}

int64_t head_cache_bytes(const LayerSizes& s) {
  const Rounder r{s.device};
  return norm_cache_bytes(s) + r(s.head_rows()) + r(s.logits()) + 4 * r(s.row_stat());
}

int64_t scratch_bytes(const LayerSizes& s, const ChunkRecompute& rc) {
  const Rounder r{s.device};
  return r(s.attention_out()) + r(s.attention_scratch()) + r(s.ffn()) + r(s.partial()) +
         r(s.ln_local()) + r(s.attention_rebuilt()) + (rc.full_blocks > 0 ? r(s.residual()) : 0) +
         r(s.rotary_table());
}

// Whether the run computes in bf16: the regime's auto (nullopt) is bf16 on CUDA and float32 on
// the CPU.
bool runs_bf16(const MemoryModelInput& in) {
  return in.device == DeviceKind::kCuda ? in.layout.precision != PrecisionRegime::kFp32
                                        : in.layout.precision == PrecisionRegime::kBf16;
}

// One chunk's activations (its caches, gradient sets and shared buffers), workspace, and the
// wires of its 16-bit pipeline messages.
void add_chunk(const MemoryModelInput& in, const Schedule& schedule, int stage, int chunk,
               MemoryBytes& bytes) {
  const StageSpec spec = virtual_stage_spec(in.model, in.layout.pp, in.layout.virtual_stages, stage,
                                            chunk, in.layout.pipeline_layers);
  const ChunkRecompute rc = chunk_recompute(in.layout.recompute, in.layout.recompute_layers, spec,
                                            schedule.splits_backward());
  const LayerSizes s = layer_sizes(in.model, in.layout.tp, in.layout.sequence_parallel,
                                   in.layout.micro_batch, in.device, rc.mode);
  const Rounder r{in.device};
  const int64_t n = spec.n_layers;
  // Under bf16 the blocks not recomputed in full keep their caches in 16 bits and run on one
  // shared float32 cache (layers/model_stage.h), the one full recomputation rebuilds into.
  const bool stores = runs_bf16(in) && n > rc.full_blocks;
  const int64_t cache =
      (n + 1) * r(s.residual()) + 2 * reserved_bytes(in.device, s.tokens()) +
      (n - rc.full_blocks) * (stores ? stored_block_cache_bytes(s) : block_cache_bytes(s)) +
      (spec.has_head ? head_cache_bytes(s) : 0);
  // A recomputed block runs its W right after its B-input in every schedule, and a whole B also
  // the blocks on the first virtual stage and those stored in bf16 (weight_half_at_once,
  // parallel/layer_sizes.h): those share one set of block gradients a chunk. The others keep theirs
  // in the gradient set until their W.
  const int64_t at_once = weight_halves_at_once(rc, spec.has_embedding, runs_bf16(in), n);
  const int64_t grad_set = (n + 1) * r(s.residual()) + (n - at_once) * block_grads_bytes(s) +
                           (spec.has_head ? r(s.residual()) : 0);
  const int64_t shared_grads = at_once > 0 ? block_grads_bytes(s) : 0;
  const int64_t slots = schedule.cache_slots(stage, chunk);
  const int64_t grad_sets = schedule.grad_sets(stage, chunk);
  // The shared cache: the recomputed blocks' forwards and rebuilds, and bf16's stored blocks.
  const int64_t shared_cache = rc.full_blocks > 0 || stores ? block_cache_bytes(s) : 0;
  bytes[MemoryCategory::kActivations] +=
      slots * cache + grad_sets * grad_set + shared_grads + shared_cache;
  bytes[MemoryCategory::kWorkspace] += scratch_bytes(s, rc);
  if (runs_bf16(in)) {  // the 16-bit pipeline messages' wires (layers/model_stage.h)
    const int64_t wire = reserved_bytes(in.device, s.residual_wire(), 2);
    if (!spec.has_head) bytes[MemoryCategory::kComm] += slots * wire;
    if (!spec.has_embedding) bytes[MemoryCategory::kComm] += grad_sets * wire;
    if (!(spec.has_embedding && spec.has_head)) bytes[MemoryCategory::kComm] += wire;
  }
}

}  // namespace

std::vector<BucketParameter> chunk_parameters(const ModelConfig& model, int tp,
                                              const StageSpec& spec, bool named) {
  const ModelFamily& family = family_of(model);
  const EdgeParameters edge = family.edge_parameters(model);
  const int64_t C = model.d_model, local_vocab = model.padded_vocab(tp) / tp * C;
  std::vector<BucketParameter> params;
  const auto add = [&](const std::vector<LocalParameter>& list) {
    for (const LocalParameter& p : list) params.push_back({p.name, p.numel, false, p.weight_decay});
  };
  if (spec.has_embedding) {
    params.push_back({edge.token_embedding, local_vocab, true, true});
    if (!edge.positions.empty()) params.push_back({edge.positions, model.seq_len * C, false, true});
  }
  if (spec.n_layers > 0) {
    // Every block holds the same sizes.
    std::vector<LocalParameter> block =
        block_local_parameters(family.block_parameters(model, spec.first_layer, tp), tp);
    for (int64_t l = spec.first_layer; l < spec.first_layer + spec.n_layers; ++l) {
      if (named && l > spec.first_layer)
        block = block_local_parameters(family.block_parameters(model, l, tp), tp);
      for (const LocalParameter& p : block)
        params.push_back({named ? p.name : "", p.numel, false, p.weight_decay});
    }
  }
  if (spec.has_head) {  // the head's matrix (untied, or the tied copy) is registered before its
                        // norm
    if (!family.describe(model).tied_head)
      params.push_back({edge.untied_head, local_vocab, false, true});
    else if (!spec.has_embedding)
      params.push_back({edge.token_embedding, local_vocab, true, true});
    add(norm_local_parameters(edge.final_norm));
  }
  return params;
}

int64_t chunk_parameter_floats(const ModelConfig& model, int tp, const StageSpec& spec) {
  int64_t floats = 0;
  for (const BucketParameter& p : chunk_parameters(model, tp, spec, false)) floats += p.numel;
  return floats;
}

namespace {

// Weights, gradients and optimizer state of the rank's parameters `params` (all its chunks, in
// registration order): replicated, or sharded over dp by the bucket plan (padded buffers, 1/dp
// of the optimizer state, and the reduced-gradient shard in comm).
void add_parameter_buffers(const MemoryModelInput& in, const std::vector<BucketParameter>& params,
                           MemoryBytes& bytes) {
  const BucketPlan plan =
      plan_buckets(params, in.dp_bucket_elements, in.layout.dp, in.layout.distributed_optimizer);
  bytes[MemoryCategory::kWeights] = reserved_bytes(in.device, plan.padded_total);
  if (runs_bf16(in))  // the values' 16-bit compute copy (framework/parameter.h)
    bytes[MemoryCategory::kWeights] += reserved_bytes(in.device, plan.padded_total, 2);
  bytes[MemoryCategory::kGrads] = reserved_bytes(in.device, plan.padded_total);
  bytes[MemoryCategory::kOptimizer] =
      in.optimizer_states * reserved_bytes(in.device, plan.shard_total);
  if (plan.shards > 1) bytes[MemoryCategory::kComm] += reserved_bytes(in.device, plan.shard_total);
  if (in.layout.grad_reduce_dtype == GradReduceDtype::kBf16 &&
      in.layout.dp > 1) {  // data_parallel.h's bf16 wires
    bytes[MemoryCategory::kComm] += reserved_bytes(in.device, plan.padded_total, 2);
    if (plan.shards > 1)
      bytes[MemoryCategory::kComm] += reserved_bytes(in.device, plan.shard_total, 2);
  }
}

}  // namespace

MemoryBytes predict_memory(const MemoryModelInput& in, int rank) {
  in.layout.validate(in.model, in.grid().world());  // before the schedule, which assumes them
  return predict_memory(
      in, rank,
      make_schedule(in.layout.schedule, in.layout.pp, in.microbatches, in.layout.virtual_stages));
}

MemoryBytes predict_memory(const MemoryModelInput& in, int rank, const Schedule& schedule) {
  in.layout.validate(in.model, in.grid().world());  // the layout's rules, as every program's
  GPT_CHECK(schedule.kind == in.layout.schedule && schedule.pp == in.layout.pp &&
                schedule.microbatches == in.microbatches &&
                schedule.virtual_stages == in.layout.virtual_stages,
            "the schedule given is not the layout's");
  const int stage = in.grid().coordinates_of(rank).stage;
  MemoryBytes bytes;
  std::vector<BucketParameter> params;
  for (int chunk = 0; chunk < in.layout.virtual_stages; ++chunk) {
    const std::vector<BucketParameter> chunk_params =
        chunk_parameters(in.model, in.layout.tp,
                         virtual_stage_spec(in.model, in.layout.pp, in.layout.virtual_stages, stage,
                                            chunk, in.layout.pipeline_layers),
                         false);
    params.insert(params.end(), chunk_params.begin(), chunk_params.end());
    add_chunk(in, schedule, stage, chunk, bytes);
  }
  add_parameter_buffers(in, params, bytes);
  if (runs_bf16(in) && in.layout.tp > 1) {  // the 16-bit tp messages' wires (tensor_parallel.h)
    const int64_t full = in.layout.micro_batch * in.model.seq_len * in.model.d_model;
    bytes[MemoryCategory::kComm] += reserved_bytes(in.device, full, 2);
    if (in.layout.sequence_parallel)
      bytes[MemoryCategory::kComm] += reserved_bytes(in.device, full / in.layout.tp, 2);
  }
  if (in.device == DeviceKind::kCuda) {
    const DeviceScratch scratch = device_scratch(in, rank);
    bytes[MemoryCategory::kWorkspace] += reserved_bytes(in.device, kCudaGemmWorkspaceBytes, 1) +
                                         reserved_bytes(in.device, 1, 8) +
                                         reserved_bytes(in.device, scratch.scratch, 1) +
                                         reserved_bytes(in.device, scratch.operand_a, 1) +
                                         reserved_bytes(in.device, scratch.operand_b, 1) +
                                         reserved_bytes(in.device, scratch.update_table, 1);
  } else {  // the bf16 operand copies (none in float32)
    const DeviceScratch scratch = device_scratch(in, rank);
    bytes[MemoryCategory::kWorkspace] += reserved_bytes(in.device, scratch.operand_a, 1) +
                                         reserved_bytes(in.device, scratch.operand_b, 1);
  }
  return bytes;
}

namespace {

// Blocks of the CUDA optimizers' table for elements [begin, end) of the flat buffers: the
// parameters' pieces there, merged into runs as optimizers/optimizer.cpp merges them (contiguous,
// same decay), each cut into blocks of kCudaUpdateBlockElements.
int64_t update_table_blocks(const std::vector<BucketParameter>& params, const BucketPlan& plan,
                            int64_t begin, int64_t end) {
  int64_t blocks = 0, run = 0, run_end = 0, offset = 0;
  bool run_decay = false;
  const auto close_run = [&] {
    blocks += (run + kCudaUpdateBlockElements - 1) / kCudaUpdateBlockElements;
    run = 0;
  };
  for (size_t i = 0; i < params.size() && offset < end; ++i) {
    const int64_t piece_begin = std::max(begin, offset);
    const int64_t piece_end = std::min(end, offset + params[i].numel);
    if (piece_begin < piece_end) {
      const bool decay = params[i].weight_decay;
      if (run > 0 && (decay != run_decay || piece_begin != run_end)) close_run();
      run_decay = decay;
      run += piece_end - piece_begin;
      run_end = piece_end;
    }
    offset += params[i].numel + plan.padding_after[i];
  }
  close_run();
  return blocks;
}

// The products of one block on a tp rank: (IC, OC) of each linear as its shard holds it.
std::vector<std::pair<int64_t, int64_t>> block_linears(const BlockParameters& p, int tp) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for_each_block_parameter(
      p, [](const NormSpec&) {},
      [&](const LinearSpec& spec, LinearPlace place) {
        const LocalLinear local = local_linear(spec, place, tp);
        out.push_back({local.in, local.out});
      });
  return out;
}

// The CUDA scratch a norm's weight gradient needs (its partial column sums).
int64_t cuda_norm_scratch_bytes(const NormSpec& spec) {
  return spec.rms ? cuda_rmsnorm_weight_scratch_bytes(spec.C)
                  : cuda_layernorm_weight_scratch_bytes(spec.C);
}

// What a block's norms and bias gradients need of the CUDA scratch.
int64_t cuda_block_scratch_bytes(const BlockParameters& p, int tp) {
  int64_t bytes = 0;
  for_each_block_parameter(
      p, [&](const NormSpec& spec) { bytes = std::max(bytes, cuda_norm_scratch_bytes(spec)); },
      [&](const LinearSpec& spec, LinearPlace place) {
        if (spec.bias)
          bytes = std::max(bytes, cuda_column_sum_scratch_bytes(local_linear(spec, place, tp).out));
      });
  return bytes;
}

// The CPU backend's bf16 operand buffers (framework/cpu/bf16_operands.cpp): float32 copies of
// the rounded operands. Each product copies its first operand (the input, or the output's
// gradient) into A and its second (the weight, or the input for the weight gradient) into B;
// attention copies q, k and v into A and the output's gradient into B.
DeviceScratch cpu_bf16_operands(const MemoryModelInput& in, int rank) {
  DeviceScratch out;
  const int stage = in.grid().coordinates_of(rank).stage;
  const int64_t tp = in.layout.tp, C = in.model.d_model;
  const int64_t N = in.layout.micro_batch * in.model.seq_len;
  const ModelFamily& family = family_of(in.model);
  const auto fit = [&](int64_t a_floats, int64_t b_floats) {
    out.operand_a = std::max(out.operand_a, 4 * a_floats);
    out.operand_b = std::max(out.operand_b, 4 * b_floats);
  };
  for (int chunk = 0; chunk < in.layout.virtual_stages; ++chunk) {
    const StageSpec spec = virtual_stage_spec(in.model, in.layout.pp, in.layout.virtual_stages,
                                              stage, chunk, in.layout.pipeline_layers);
    std::vector<std::pair<int64_t, int64_t>> linears;  // (IC, OC) of the chunk's products
    if (spec.n_layers > 0) {
      const int64_t Q = in.model.q_channels() / tp, KV = in.model.kv_channels_per_rank(tp);
      fit(N * (Q + 2 * KV), N * Q);  // attention's q, k, v; its output's gradient
      linears = block_linears(family.block_parameters(in.model, spec.first_layer, tp), tp);
    }
    if (spec.has_head) linears.push_back({C, in.model.padded_vocab(tp) / tp});
    for (const auto& [IC, OC] : linears) {
      fit(N * IC, OC * IC);  // forward: input, weight
      fit(N * OC, OC * IC);  // input gradient: output gradient, weight
      fit(N * OC, N * IC);   // weight gradient: output gradient, input
    }
  }
  return out;
}

}  // namespace

DeviceScratch device_scratch(const MemoryModelInput& in, int rank) {
  DeviceScratch out;
  const bool cuda = in.device == DeviceKind::kCuda;
  const bool bf16_products = runs_bf16(in);
  if (!cuda && !bf16_products) return out;
  if (!cuda) return cpu_bf16_operands(in, rank);
  const int stage = in.grid().coordinates_of(rank).stage;
  const int64_t tp = in.layout.tp, C = in.model.d_model;
  const int64_t N = in.layout.micro_batch * in.model.seq_len;  // rows of every product
  const ModelFamily& family = family_of(in.model);
  out.scratch = cuda_full_sum_scratch_bytes();  // the loss and the gradient norm
  std::vector<BucketParameter> params;
  for (int chunk = 0; chunk < in.layout.virtual_stages; ++chunk) {
    const StageSpec spec = virtual_stage_spec(in.model, in.layout.pp, in.layout.virtual_stages,
                                              stage, chunk, in.layout.pipeline_layers);
    const std::vector<BucketParameter> chunk_params =
        chunk_parameters(in.model, in.layout.tp, spec, false);
    params.insert(params.end(), chunk_params.begin(), chunk_params.end());
    std::vector<std::pair<int64_t, int64_t>> linears;  // (IC, OC) of the chunk's products
    if (spec.n_layers > 0) {
      const BlockParameters block = family.block_parameters(in.model, spec.first_layer, tp);
      out.scratch = std::max(out.scratch, cuda_block_scratch_bytes(block, tp));
      linears = block_linears(block, tp);
    }
    if (spec.has_head) {
      out.scratch = std::max(out.scratch,
                             cuda_norm_scratch_bytes(family.edge_parameters(in.model).final_norm));
      linears.push_back({C, in.model.padded_vocab(tp) / tp});
    }
    if (spec.has_embedding)
      out.scratch = std::max(out.scratch, cuda_embedding_backward_scratch_bytes(N));
    if (!bf16_products) continue;
    // bf16 copies of each product's operands; the forward's and the input gradient's A is the
    // weight, read from its compute copy (framework/parameter.h), so only the weight gradient's
    // A (the layer's input) is converted.
    for (const auto& [IC, OC] : linears) {
      for (const GemmShape& g :
           {linear_forward_gemm(N, IC, OC), linear_backward_input_gemm(N, IC, OC)})
        out.operand_b = std::max(out.operand_b, 2 * gemm_b_elements(g));
      const GemmShape g = linear_backward_weight_gemm(N, IC, OC);
      out.operand_a = std::max(out.operand_a, 2 * gemm_a_elements(g));
      out.operand_b = std::max(out.operand_b, 2 * gemm_b_elements(g));
    }
  }
  const BucketPlan plan =
      plan_buckets(params, in.dp_bucket_elements, in.layout.dp, in.layout.distributed_optimizer);
  int64_t blocks = 0;
  if (plan.shards == 1) {
    blocks = update_table_blocks(params, plan, 0, plan.padded_total);
  } else {
    for (int dp_rank = 0; dp_rank < plan.shards; ++dp_rank)
      for (const StateSegment& segment : shard_segments(plan, dp_rank))
        blocks = std::max(blocks, update_table_blocks(params, plan, segment.offset,
                                                      segment.offset + segment.numel));
  }
  out.update_table = cuda_update_table_bytes(blocks);
  return out;
}

std::vector<RankMemory> predict_all_ranks(const MemoryModelInput& in) {
  in.layout.validate(in.model, in.grid().world());
  const Schedule schedule =
      make_schedule(in.layout.schedule, in.layout.pp, in.microbatches, in.layout.virtual_stages);
  std::vector<MemoryBytes> per_stage;
  for (int stage = 0; stage < in.layout.pp; ++stage)
    per_stage.push_back(predict_memory(in, stage * in.layout.tp * in.layout.dp, schedule));
  std::vector<RankMemory> ranks;
  for (int rank = 0; rank < in.grid().world(); ++rank) {
    const GridCoordinates at = in.grid().coordinates_of(rank);
    ranks.push_back({rank, at, per_stage[static_cast<size_t>(at.stage)]});
  }
  return ranks;
}

RankMemory heaviest_rank(const std::vector<RankMemory>& ranks) {
  GPT_CHECK(!ranks.empty(), "no ranks to compare");
  RankMemory best = ranks.front();
  for (const RankMemory& r : ranks)
    if (r.bytes.total() > best.bytes.total()) best = r;
  return best;
}

std::vector<RankMemory> heaviest_per_stage(const std::vector<RankMemory>& ranks, int pp) {
  std::vector<RankMemory> best(static_cast<size_t>(pp));
  std::vector<bool> seen(static_cast<size_t>(pp), false);
  for (const RankMemory& r : ranks) {
    const auto s = static_cast<size_t>(r.coordinates.stage);
    if (!seen[s] || r.bytes.total() > best[s].bytes.total()) best[s] = r;
    seen[s] = true;
  }
  return best;
}

double korthikanti_layer_activation_bytes(const ModelConfig& model, int64_t micro_batch, int tp,
                                          bool sequence_parallel, Recompute recompute) {
  const double s = static_cast<double>(model.seq_len), b = static_cast<double>(micro_batch),
               h = static_cast<double>(model.d_model), a = static_cast<double>(model.n_head),
               t = static_cast<double>(tp);
  const double sbh = s * b * h;
  const bool sp = sequence_parallel && tp > 1;
  if (recompute == Recompute::kFull) return 2.0 * sbh / (sp ? t : 1.0);  // the block's input
  if (describe(model).swiglu()) {
    // The same accounting for a SwiGLU block without dropout (the Llama family's): the two
    // norms' inputs and the two column-parallel inputs (8, split only by SP); q and k after the
    // rotation, v, o_proj's input (4q + 4k in units of sbh), gate's and up's outputs and
    // down's input (6f); the softmax output (2as/h).
    const double q = static_cast<double>(model.q_channels()) / h,
                 k = static_cast<double>(model.kv_channels()) / h,
                 f = static_cast<double>(model.ffn_dim()) / h;
    const double split = 4 * q + 4 * k + 6 * f;
    const double quadratic = recompute == Recompute::kSelective ? 0.0 : 2.0 * a * s / h;
    return sbh * ((sp ? 8.0 / t : 8.0) + split / t + quadratic / t);
  }
  const double attention_quadratic = recompute == Recompute::kSelective ? 0.0 : 5.0 * a * s / h;
  // Linear-in-s terms: 24 of the 34 are split by tp, the LayerNorm and dropout 10 only by SP.
  const double linear = sp ? 34.0 / t : 10.0 + 24.0 / t;
  return sbh * (linear + attention_quadratic / t);
}

}  // namespace gpt
