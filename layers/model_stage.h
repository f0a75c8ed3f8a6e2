// One pipeline stage of a model of any family (framework/families/): [embedding] + blocks
// [first_layer, first_layer + n_layers) + [final norm, head, loss]. With pp = 1 it is the whole
// model. It owns its layers (their parameters live in the ParameterStore), `num_caches` forward
// caches (one per microbatch in flight: the schedule decides how many) and `num_grad_sets` gradient
// sets (what weight halves still read), and the scratch its layers share. Activations: acts[l] is
// the input of local block l, acts[n_layers] the stage output; each is (Nl, C): all N = B*T rows,
// or this rank's N/tp rows with sequence parallelism. A gradient set holds their gradients d_acts
// alike. Recomputation (ChunkRecompute, parallel/memory_model.h): with kSelective the attention
// rebuilds its dropped cache in each backward; with kFull the first `full_blocks` blocks keep no
// cache per microbatch (acts[l], their input, stays), and their backward first re-runs their
// forward into the chunk's one shared cache, and runs the block's weight half at once, before the
// next block reuses it: in every schedule, ZB-H1 too (holding a rebuilt cache per block until a
// later W would keep more than no recomputation does). Under bf16 precision each other block's
// cache is kept per microbatch as a StoredBlockCache (16-bit activations): the block runs on the
// chunk's shared float32 cache, which is stored after its forward and loaded back before its
// backward; a split W loads it again. A whole B (every schedule but ZB-H1) runs a block's weight
// half right after its input half where nothing is gained by waiting (weight_half_at_once): for
// the blocks on the shared cache, which is still there, and on the first virtual stage, whose
// input gradient nobody waits for. Those blocks share one BlockGrads per chunk. Elsewhere the
// weight halves follow the input gradient's send, reading a BlockGrads per block in the
// gradient set. Generation adds a decode state
// (StageDecodeState): every block's paged key/value pool, and the buffers of a step's token rows
// (decode_rows.h) run through the same layers, row by row.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "framework/config.h"
#include "framework/device_array.h"
#include "layers/decode_rows.h"
#include "layers/embedding.h"
#include "layers/lm_head.h"
#include "layers/stored_block_cache.h"
#include "layers/transformer_block.h"
#include "parallel/stage_layout.h"

namespace gpt {

// What generation keeps on a stage: per local block the paged key/value pool of this rank's
// heads (whose blocks the caller hands to sequences), and the buffers of one step of up to
// capacity.rows token rows. acts[l] is the input of local block l, acts[n_layers] the stage's
// output; the last stage copies the rows whose logits are wanted into head_input and leaves
// their logits in head.logits.
struct StageDecodeState {
  DecodeCapacity capacity;
  int64_t max_blocks = 0;                             // blocks of a sequence of seq_len positions
  std::vector<KvCache> kv;                            // n_layers
  std::vector<DeviceArray<float>> acts;               // n_layers + 1 of (rows,C)
  DeviceArray<int32_t> tokens;                        // (rows) first stage
  DeviceArray<int32_t> slots, block_tables, lengths;  // the step's DecodeRows, in backend memory
  std::vector<int32_t> positions, host_lengths;       // (rows) host copies
  BlockCache block;  // of `rows` rows, shared by the blocks: a decode step keeps nothing after one
  DeviceArray<float> head_input;     // last stage: (rows,C)
  HeadCache head;                    // last stage: logits (rows,Vp/tp)
  int64_t rows = 0, logit_rows = 0;  // of the last step
};

// Several ModelStages (the model chunks of interleaved schedules) can share one ParameterStore:
// construct them all, then call store.allocate() before running any.
class ModelStage {
 public:
  ModelStage(ParameterStore& store, TensorParallel& tp, const ModelConfig& cfg,
             const StageSpec& spec, int64_t micro_batch, int num_caches, int num_grad_sets,
             const ChunkRecompute& recompute = {});
  ModelStage(const ModelStage&) = delete;  // its layers keep references to its scratch
  ModelStage& operator=(const ModelStage&) = delete;

  const StageSpec& spec() const { return spec_; }
  const ModelConfig& model() const { return cfg_; }
  int64_t micro_batch() const { return mb_.B; }
  int64_t rows() const { return mb_.N; }         // N = B*T
  int64_t local_rows() const { return mb_.Nl; }  // Nl
  int num_caches() const { return static_cast<int>(caches_.size()); }
  int num_grad_sets() const { return static_cast<int>(grad_sets_.size()); }
  const ChunkRecompute& recompute() const { return recompute_; }

  // Forward of one microbatch into cache `slot`. tokens (first stage) and targets (last stage)
  // are host arrays of N tokens; the others may be null. A non-first stage must have received
  // its input into input_activation(slot) first.
  void forward(int slot, const int32_t* tokens, const int32_t* targets);
  // Input-gradient half for cache `slot` into gradient set `grad_set`; the last stage starts from
  // loss_scale * sum of token losses, the others from output_grad(grad_set), received first.
  // weight_follows: backward_weight comes right after (a whole backward, not a zero-bubble
  // schedule's split one), so with tp communication overlap on, the blocks' column-parallel
  // weight gradients and the head's logits weight gradient run here, behind their input
  // gradients' tp reductions. The weight halves of the blocks weight_half_at_once names run
  // here too (under a split backward, ZB-H1's, those of the recomputed blocks only).
  void backward_input(int slot, int grad_set, float loss_scale, bool weight_follows = false);
  // Weight-gradient half, reading what backward_input left in `grad_set`: the head's, the
  // embedding's and the other blocks'.
  void backward_weight(int slot, int grad_set);
  void backward(int slot, int grad_set, float loss_scale) {
    backward_input(slot, grad_set, loss_scale, true);
    backward_weight(slot, grad_set);
  }

  // (Nl,C) each: the stage's input and output in cache `slot`, their gradients in `grad_set`.
  float* input_activation(int slot) { return caches_[slot].acts.front().data(); }
  float* output_activation(int slot) { return caches_[slot].acts.back().data(); }
  float* output_grad(int grad_set) { return grad_sets_[grad_set].d_acts.back().data(); }
  float* input_grad(int grad_set) { return grad_sets_[grad_set].d_acts.front().data(); }
  // bf16 precision's 16-bit pipeline messages (PipelineChunk's wires): null in float32, and where
  // the stage sends or receives no such message.
  uint16_t* activation_wire(int slot) { return caches_[slot].wire.data(); }
  uint16_t* gradient_wire(int grad_set) { return grad_sets_[grad_set].wire.data(); }
  uint16_t* receive_wire() { return receive_wire_.data(); }
  void pack_boundary(uint16_t* wire, const float* values);
  void unpack_boundary(float* values, const uint16_t* wire);

  // Called from backward_weight with the registration-index range [first, end) of each layer's
  // parameters as soon as their gradients are final for this backward (the dp buckets'
  // trigger); empty to stop.
  using WeightReadyHook = std::function<void(size_t first, size_t end)>;
  void set_weight_ready_hook(WeightReadyHook hook) { weight_ready_ = std::move(hook); }
  // Called from forward with each layer's range just before the layer reads its weights (the
  // distributed optimizer's parameter gather waits there, bucket by bucket); empty to stop.
  // Then, under bf16 precision, the layer's stale compute copies are refreshed from the values.
  void set_weight_needed_hook(WeightReadyHook hook) { weight_needed_ = std::move(hook); }
  // The parameter values may have changed since the last forward (an optimizer step, a
  // checkpoint or weights loaded): each layer's next forward refreshes its compute copies.
  void values_changed() { store_.mark_values_changed(); }

  // After the step's last backward: sums over tp the gradients that sequence parallelism left
  // partial (the norms'), and Qwen3's q/k norms' at tp > 1; and over each group of tp ranks that
  // shares key/value heads, their k and v projections'. A no-op where there are none.
  void reduce_partial_tp_grads();

  // Last stage: sum of the token losses of the first `valid_rows` sequences of `slot` (all B by
  // default), and this tp rank's logits (N, Vp/tp).
  double loss_sum(int slot, int64_t valid_rows = -1);
  const float* local_logits(int slot) { return caches_[slot].head.logits.data(); }
  // Last stage: the logits of token row `row` of `slot` (0 <= row < N) over the real vocabulary
  // (V floats, padding dropped), gathered over tp into host memory on every tp rank.
  std::vector<float> gather_last_logits(int slot, int64_t row);
  VocabShard vocab() const { return vocab_; }

  // ---- generation (needs tp without sequence parallelism; decode_rows.h). decode runs a step's
  // token rows through the stage: their tokens on the first stage, else the input received into
  // decode_input(state) first (batch.rows() rows of C floats); the output is decode_output.
  StageDecodeState make_decode_state(const DecodeCapacity& capacity) const;
  void decode(StageDecodeState& state, const DecodeBatch& batch);
  float* decode_input(StageDecodeState& state) { return state.acts.front().data(); }
  float* decode_output(StageDecodeState& state) { return state.acts.back().data(); }
  // Last stage, after decode: the logits of the step's logit_rows (each V floats, padding dropped,
  // in logit_rows' order), gathered over tp in one exchange, on every tp rank.
  std::vector<std::vector<float>> gather_decoded_logits(const StageDecodeState& state);

 private:
  struct Cache {
    std::vector<DeviceArray<float>> acts;  // n_layers + 1 of (Nl,C)
    DeviceArray<uint16_t> wire;            // bf16, not the last stage: the output's message
    DeviceArray<int32_t> tokens;           // (N)
    DeviceArray<int32_t> targets;          // (N)
    EmbeddingCache embedding;
    std::vector<BlockCache> blocks;  // empty (no buffers) for the blocks recomputed in full, and
                                     // under bf16 storage
    std::vector<StoredBlockCache> stored;  // bf16 storage: the blocks not recomputed in full
    HeadCache head;
  };
  struct GradSet {
    std::vector<DeviceArray<float>> d_acts;  // n_layers + 1 of (Nl,C): the gradients of acts
    DeviceArray<uint16_t> wire;      // bf16, not the first stage: the input gradient's message
    std::vector<BlockGrads> blocks;  // what each block's W reads (none: weight_half_at_once)
    HeadGrads head;
    // backward_input computed the weight halves that hide tp reductions (the column-parallel
    // linears', the head's logits product)
    bool overlapped_weights_done = false;
  };
  Cache make_cache() const;
  GradSet make_grad_set() const;
  // This rank's logits of one row (Vp/tp floats in backend memory), gathered over tp.
  std::vector<float> gather_logits(const float* local_row);
  // bf16 precision: 16-bit pipeline messages and stored block caches.
  bool bf16() const { return backend_.precision() == Precision::kBf16; }
  int64_t wire_elements() const { return mb_.residual_wire(); }
  bool recomputes(size_t block) const {
    return static_cast<int64_t>(block) < recompute_.full_blocks;
  }
  // Whether block l keeps its cache as a StoredBlockCache (bf16 precision, not recomputed).
  bool stores(size_t block) const { return bf16() && !recomputes(block); }
  // Whether block l's backward runs on the shared cache (recomputed or stored).
  bool on_shared_cache(size_t block) const { return recomputes(block) || stores(block); }
  // The cache block l's backward reads: its own; its stored one, loaded into the shared cache;
  // or (recomputed) its forward re-run from its input into the shared cache.
  const BlockCache& backward_cache(Cache& c, size_t l);
  BlockCache& load_stored(const Cache& c, size_t l);
  void block_weight_pass(const Cache& c, const GradSet& g, size_t l);
  // Whether block l's weight half runs inside backward_input (parallel/layer_sizes.h's rule);
  // elsewhere it runs in backward_weight, after the input gradient was handed to the previous
  // stage.
  bool weight_half_at_once(size_t block) const {
    return gpt::weight_half_at_once(recompute_, spec_.has_embedding, bf16(),
                                    static_cast<int64_t>(block));
  }
  // What block l's input half leaves for its weight half: the chunk's one shared_grads_ when
  // that follows at once, else its own in the gradient set.
  BlockGrads& block_grads(GradSet& g, size_t l) {
    return weight_half_at_once(l) ? shared_grads_ : g.blocks[l];
  }
  const BlockGrads& block_grads(const GradSet& g, size_t l) const {
    return weight_half_at_once(l) ? shared_grads_ : g.blocks[l];
  }
  struct ParamRange;
  void ready(const ParamRange& params);   // the weight-ready hook, for a non-empty range
  void needed(const ParamRange& params);  // the weight-needed hook, likewise

  Backend& backend_;
  TensorParallel& tp_;
  ParameterStore& store_;
  ModelConfig cfg_;
  StageSpec spec_;
  ChunkRecompute recompute_;
  LayerSizes mb_;
  VocabShard vocab_;
  LayerScratch scratch_;  // shared by every layer below
  std::unique_ptr<Embedding> embedding_;
  std::vector<std::unique_ptr<TransformerBlock>> blocks_;
  std::unique_ptr<LmHead> head_;
  DeviceArray<uint16_t> receive_wire_;  // bf16, a stage that receives: the messages in
  std::vector<Cache> caches_;
  std::vector<GradSet> grad_sets_;
  // Full recompute: the recomputed blocks' forwards write here, and so do their rebuilds.
  // bf16 storage: every stored block runs its forward here, and its backward halves load it here.
  BlockCache shared_cache_;
  // The blocks whose weight half follows their input half at once all write their input halves
  // here: one BlockGrads per chunk, not one per block and gradient set.
  BlockGrads shared_grads_;
  // Registration-index ranges of each layer's parameters.
  struct ParamRange {
    size_t first = 0, end = 0;
  };
  ParamRange embedding_params_, head_params_;
  std::vector<ParamRange> block_params_;
  WeightReadyHook weight_ready_;
  WeightReadyHook weight_needed_;
};

}  // namespace gpt
