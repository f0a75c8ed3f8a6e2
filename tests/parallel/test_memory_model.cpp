// Unit tests of the memory model (parallel/memory_model.h) on its own: the parameter split adds
// up to the model's count, the schedule's facts move the activations as they should, selective
// recomputation moves exactly the attention caches, and Korthikanti et al.'s formulas. That the
// model equals the ledger to the byte is proven end to end by every train run of the suite
// (tests/integration/test_memory.py and gpt_harness.train).
#include <gtest/gtest.h>

#include "framework/check.h"
#include "parallel/memory_model.h"

namespace gpt {
namespace {

void set_grid(MemoryModelInput& in, GridShape grid) {
  in.layout.tp = grid.tp;
  in.layout.dp = grid.dp;
  in.layout.pp = grid.pp;
}

MemoryModelInput small_input() {
  MemoryModelInput in;
  in.layout.dp = 1;
  in.model = {.n_layer = 4, .n_head = 4, .d_model = 64, .seq_len = 32, .vocab_size = 300};
  in.layout.micro_batch = 2;
  in.microbatches = 4;
  return in;
}

int64_t activations(const MemoryModelInput& in, int rank) {
  return predict_memory(in, rank)[MemoryCategory::kActivations];
}

// GPT-2 124M's shape on one CUDA rank in fp32 at micro-batch 1 (N = 1024 rows, C = 768).
MemoryModelInput gpt2_124m_on_cuda() {
  MemoryModelInput in;
  in.layout.dp = 1;
  in.model = {.n_layer = 12, .n_head = 12, .d_model = 768, .seq_len = 1024, .vocab_size = 50257};
  in.layout.micro_batch = 1;
  in.device = DeviceKind::kCuda;
  in.layout.precision = PrecisionRegime::kFp32;
  return in;
}

TEST(MemoryModel, ParametersAddUpToTheModel) {
  const MemoryModelInput in = small_input();
  const ModelConfig& m = in.model;
  for (int pp : {1, 2, 4}) {
    int64_t total = 0;
    for (int stage = 0; stage < pp; ++stage)
      total += chunk_parameter_floats(m, 1, virtual_stage_spec(m, pp, 1, stage, 0));
    // The padded vocabulary rows, and with pp > 1 the last stage's copy of wte.
    const int64_t wte = m.padded_vocab(1) * m.d_model;
    EXPECT_EQ(total, m.num_parameters(true) + (m.padded_vocab(1) - m.vocab_size) * m.d_model +
                         (pp > 1 ? wte : 0))
        << "pp " << pp;
  }
}

TEST(MemoryModel, WeightsGradsAndOptimizerFollowTheParameters) {
  MemoryModelInput in = small_input();
  const MemoryBytes adamw = predict_memory(in, 0);
  EXPECT_EQ(adamw[MemoryCategory::kWeights], adamw[MemoryCategory::kGrads]);
  EXPECT_EQ(adamw[MemoryCategory::kOptimizer], 2 * adamw[MemoryCategory::kWeights]);
  in.optimizer_states = 1;
  EXPECT_EQ(predict_memory(in, 0)[MemoryCategory::kOptimizer], adamw[MemoryCategory::kWeights]);
  EXPECT_EQ(adamw[MemoryCategory::kComm], 0);
}

// ZeRO-1: weights and grads grow by the bucket padding, the optimizer state is the shard of the
// padded buckets (distributed_optimizer_shard_floats), the reduced-gradient shard is comm.
TEST(MemoryModel, DistributedOptimizerShardsTheStatePlusPadding) {
  MemoryModelInput in = small_input();
  set_grid(in, GridShape{1, 3, 2});  // dp 3 does not divide the buckets: padding in play
  in.dp_bucket_elements = 5000;
  const MemoryBytes replicated = predict_memory(in, 0);
  in.layout.distributed_optimizer = true;
  for (int stage = 0; stage < 2; ++stage) {
    const std::vector<BucketParameter> params =
        chunk_parameters(in.model, 1, virtual_stage_spec(in.model, 2, 1, stage, 0));
    int64_t full = 0;
    for (const BucketParameter& p : params) full += p.numel;
    const int64_t shard = distributed_optimizer_shard_floats(params, 5000, 3);
    const int64_t padding = distributed_optimizer_padding_floats(params, 5000, 3);
    EXPECT_GT(padding, 0);
    EXPECT_EQ(shard * 3, full + padding);
    const MemoryBytes zero = predict_memory(in, stage * 3);
    EXPECT_EQ(zero[MemoryCategory::kWeights], reserved_bytes(DeviceKind::kCpu, full + padding));
    EXPECT_EQ(zero[MemoryCategory::kGrads], zero[MemoryCategory::kWeights]);
    EXPECT_EQ(zero[MemoryCategory::kOptimizer], 2 * reserved_bytes(DeviceKind::kCpu, shard));
    EXPECT_EQ(zero[MemoryCategory::kComm], reserved_bytes(DeviceKind::kCpu, shard));
  }
  EXPECT_LT(predict_memory(in, 0)[MemoryCategory::kOptimizer],
            replicated[MemoryCategory::kOptimizer] / 2);
  set_grid(in, GridShape{1, 1, 2});  // a no-op at dp 1
  const MemoryBytes dp1 = predict_memory(in, 0);
  in.layout.distributed_optimizer = false;
  EXPECT_EQ(dp1, predict_memory(in, 0));
}

TEST(MemoryModel, OneFOneBHoldsAtMostPpMicrobatchesGpipeAllOfThem) {
  MemoryModelInput in = small_input();
  set_grid(in, GridShape{.tp = 1, .dp = 1, .pp = 2});
  const int64_t four = activations(in, 0);
  in.microbatches = 8;
  EXPECT_EQ(activations(in, 0), four) << "1F1B: stage 0 holds pp caches whatever m is";
  in.layout.schedule = ScheduleKind::kGpipe;
  const int64_t gpipe8 = activations(in, 0);
  in.microbatches = 4;
  EXPECT_GT(gpipe8, activations(in, 0)) << "GPipe holds every microbatch";
}

TEST(MemoryModel, SelectiveMovesExactlyTheAttentionCaches) {
  MemoryModelInput in = small_input();
  set_grid(in, GridShape{.tp = 1, .dp = 1, .pp = 2});
  const MemoryBytes none = predict_memory(in, 0);
  in.layout.recompute = Recompute::kSelective;
  const MemoryBytes selective = predict_memory(in, 0);
  const ModelConfig& m = in.model;
  const int64_t one =
      reserved_bytes(DeviceKind::kCpu, in.layout.micro_batch * m.n_head * m.seq_len * m.seq_len);
  const int64_t slots = 2, blocks = 2;  // stage 0 of 1F1B at pp 2 holds two; 2 blocks a stage
  EXPECT_EQ(none[MemoryCategory::kActivations] - selective[MemoryCategory::kActivations],
            slots * blocks * one);
  EXPECT_EQ(selective[MemoryCategory::kWorkspace] - none[MemoryCategory::kWorkspace], one)
      << "one rebuilt cache in the stage's scratch";
  in.device = DeviceKind::kCuda;  // only the log-sum-exp is kept: nothing to drop
  in.layout.recompute = Recompute::kNone;
  const MemoryBytes cuda_none = predict_memory(in, 0);
  in.layout.recompute = Recompute::kSelective;
  EXPECT_EQ(predict_memory(in, 0), cuda_none);
  EXPECT_GE(cuda_none[MemoryCategory::kWorkspace], int64_t{32} << 20) << "cuBLASLt workspace";
}

TEST(MemoryModel, FullRecomputeKeepsBlockInputsAndOneRebuiltCache) {
  MemoryModelInput in = small_input();
  set_grid(in, GridShape{.tp = 1, .dp = 1, .pp = 2});
  const int64_t none = activations(in, 0);
  in.layout.recompute = Recompute::kFull;
  const int64_t full = activations(in, 0);
  in.layout.recompute_layers = 1;
  const int64_t one_block = activations(in, 0);
  EXPECT_LT(full, one_block);
  EXPECT_LT(one_block, none);
  // A block cache X: both blocks of both slots dropped, one shared rebuilt cache gained, saves
  // 4X - X; one block of both slots, 2X - X.
  EXPECT_EQ(none - full, 3 * (none - one_block));
}

// Full recomputation keeps fewer activation bytes than none in every schedule, in fp32 and bf16,
// on both stages of pp 2 (two blocks a stage, four microbatches), and selective (whose CPU
// attention drops its probabilities) fewer than none. Under ZB-H1 a rebuilt cache per block held
// until its split W kept more than none (the shared cache on top of what none keeps): the
// recomputed blocks run their W inside their B-input instead.
TEST(MemoryModel, FullRecomputeKeepsFewerThanNoneInEverySchedule) {
  MemoryModelInput in = small_input();
  set_grid(in, GridShape{.tp = 1, .dp = 1, .pp = 2});
  for (const ScheduleKind kind : {ScheduleKind::k1f1b, ScheduleKind::kGpipe,
                                  ScheduleKind::kInterleaved, ScheduleKind::kZbH1}) {
    in.layout.schedule = kind;
    in.layout.virtual_stages = kind == ScheduleKind::kInterleaved ? 2 : 1;
    for (const PrecisionRegime precision : {PrecisionRegime::kFp32, PrecisionRegime::kBf16}) {
      in.layout.precision = precision;
      for (int stage = 0; stage < 2; ++stage) {
        in.layout.recompute = Recompute::kNone;
        const int64_t none = activations(in, stage);
        in.layout.recompute = Recompute::kSelective;
        const int64_t selective = activations(in, stage);
        in.layout.recompute = Recompute::kFull;
        const int64_t full = activations(in, stage);
        EXPECT_LT(full, none) << schedule_name(kind) << " " << regime_name(precision) << " stage "
                              << stage;
        EXPECT_LT(selective, none) << schedule_name(kind) << " stage " << stage;
      }
    }
  }
}

// The CUDA backend's per-call scratch, by hand for 2 layers, C 64, T 32, B 4 (N 128), vocab 256:
// the widest column sum is the fc bias (8 x 128 x 4C bytes); bf16 copies of the largest A (the
// mlp projection's input, 4C x N) and B (the logits' gradient, N x V); the optimizers' table has
// 26 blocks: wte+wpe 18432 decayed (3), per layer 11 (the 12288, 16384 and 16384-element matrices
// take 2 each, the rest 1, and the vectors between matrices merge), and the last bias with ln_f.
TEST(MemoryModel, CudaScratchIsTheLargestRequest) {
  MemoryModelInput in;
  in.layout.dp = 1;
  in.model = {.n_layer = 2, .n_head = 4, .d_model = 64, .seq_len = 32, .vocab_size = 256};
  in.layout.micro_batch = 4;
  in.layout.precision = PrecisionRegime::kFp32;
  EXPECT_EQ(device_scratch(in, 0).scratch, 0);  // the CPU backend has none
  in.device = DeviceKind::kCuda;
  const DeviceScratch fp32 = device_scratch(in, 0);
  EXPECT_EQ(fp32.scratch, 8 * 128 * 256);
  EXPECT_EQ(fp32.operand_a + fp32.operand_b, 0);
  EXPECT_EQ(fp32.update_table, 16 * (26 + 1));
  in.layout.precision = PrecisionRegime::kBf16;
  const DeviceScratch bf16 = device_scratch(in, 0);
  EXPECT_EQ(bf16.operand_a, 2 * 256 * 128);
  EXPECT_EQ(bf16.operand_b, 2 * 128 * 256);
  // Counted as workspace (each a multiple of the arena's 256-byte block here).
  const int64_t bf16_workspace = predict_memory(in, 0)[MemoryCategory::kWorkspace];
  in.layout.precision = PrecisionRegime::kFp32;
  EXPECT_EQ(bf16_workspace - predict_memory(in, 0)[MemoryCategory::kWorkspace], 2 * 65536);
}

// The CPU backend's bf16 operand copies (float32 values rounded to bf16), same model as above:
// the largest first operand is a (N, 4C) input or gradient (the fc output's gradient, the
// projection's input, the logits' gradient: 128 x 256 floats), the largest second the projection's
// input for its weight gradient (128 x 256); attention's q, k, v (128 x 192) fit. Auto precision
// on the CPU is float32 and takes none.
TEST(MemoryModel, CpuBf16OperandCopies) {
  MemoryModelInput in;
  in.layout.dp = 1;
  in.model = {.n_layer = 2, .n_head = 4, .d_model = 64, .seq_len = 32, .vocab_size = 256};
  in.layout.micro_batch = 4;
  const int64_t fp32_workspace = predict_memory(in, 0)[MemoryCategory::kWorkspace];
  EXPECT_EQ(device_scratch(in, 0).operand_a, 0);
  in.layout.precision = PrecisionRegime::kBf16;
  const DeviceScratch bf16 = device_scratch(in, 0);
  EXPECT_EQ(bf16.operand_a, 4 * 128 * 256);
  EXPECT_EQ(bf16.operand_b, 4 * 128 * 256);
  EXPECT_EQ(bf16.scratch + bf16.update_table, 0);  // the CUDA kernels' buffers: none on the CPU
  EXPECT_EQ(predict_memory(in, 0)[MemoryCategory::kWorkspace] - fp32_workspace, 2 * 131072);
}

// bf16 storage of the block caches (layers/stored_block_cache.h), GPT-2 124M's shape on CUDA at
// micro-batch 1 (N = 1024 rows, C = 768, every buffer a multiple of the 256-byte block): a
// block's 15 N*C activation elements (both LayerNorm outputs, qkv, the attention output, x1, the
// MLP's two) go from 4 bytes to 2; its statistics (both LayerNorms' mean and rstd, 4N, and the
// fused attention's log-sum-exp, 12 heads x T) stay float32; one shared float32 cache is added.
// With 12 blocks in one cache slot: 12 * 30 N*C - 4 * (15 N*C + 16 N) bytes saved.
TEST(MemoryModel, Bf16StoresBlockCachesInSixteenBits) {
  MemoryModelInput in = gpt2_124m_on_cuda();
  const int64_t fp32 = activations(in, 0);
  in.layout.precision = PrecisionRegime::kBf16;
  const int64_t bf16 = activations(in, 0);
  const int64_t N = 1024, C = 768;
  EXPECT_EQ(fp32 - bf16, 12 * 30 * N * C - 4 * (15 * N * C + 16 * N));
  const LayerSizes s = layer_sizes(in.model, 1, false, 1, DeviceKind::kCuda, Recompute::kNone);
  EXPECT_EQ(s.stored_activations(), 15 * N * C);
  // Full recomputation of every block stores nothing: bf16 changes no activation byte.
  in.layout.recompute = Recompute::kFull;
  const int64_t full_bf16 = activations(in, 0);
  in.layout.precision = PrecisionRegime::kFp32;
  EXPECT_EQ(activations(in, 0), full_bf16);
}

TEST(MemoryModel, AWholeBackwardSharesItsBlocksGradients) {
  // GPT-2 124M's shape on CUDA in fp32 at micro-batch 1, pp 1: one more block adds its cache
  // (15 N C activations and 16 N statistics) and its input's residual and gradient, and under a
  // whole B nothing else; ZB-H1, whose W runs apart, also keeps its 10 N C of BlockGrads.
  MemoryModelInput in = gpt2_124m_on_cuda();
  const int64_t N = 1024, C = 768;
  for (const ScheduleKind kind : {ScheduleKind::k1f1b, ScheduleKind::kZbH1}) {
    in.layout.schedule = kind;
    in.model.n_layer = 12;
    const int64_t twelve = activations(in, 0);
    in.model.n_layer = 11;
    const int64_t block = 4 * (15 * N * C + 16 * N) + 2 * 4 * N * C;
    const int64_t grads = kind == ScheduleKind::kZbH1 ? 4 * 10 * N * C : 0;
    EXPECT_EQ(twelve - activations(in, 0), block + grads) << schedule_name(kind);
  }
  // pp 2, 1F1B, the second stage (one cache slot): in fp32 its weight halves follow the input
  // gradient's send, so each block keeps its own; in bf16 every block is on the shared cache.
  in.layout.schedule = ScheduleKind::k1f1b;
  in.model.n_layer = 12;
  in.layout.pp = 2;
  for (const PrecisionRegime precision : {PrecisionRegime::kFp32, PrecisionRegime::kBf16}) {
    in.layout.precision = precision;
    in.layout.pipeline_layers = {6, 6};
    const int64_t six = activations(in, 1);
    in.layout.pipeline_layers = {6, 5};
    in.model.n_layer = 11;
    const int64_t five = activations(in, 1);
    in.model.n_layer = 12;
    if (precision == PrecisionRegime::kFp32)
      EXPECT_EQ(six - five, 4 * (15 * N * C + 16 * N) + 2 * 4 * N * C + 4 * 10 * N * C);
    else  // the block's cache in 16 bits, its statistics in fp32
      EXPECT_EQ(six - five, 2 * 15 * N * C + 4 * 16 * N + 2 * 4 * N * C);
  }
}

TEST(MemoryModel, Bf16KeepsAComputeCopyOfTheWeights) {
  // GPT-2 124M on CUDA: 2 bytes a parameter more in the weights (Megatron's 16-bit weights beside
  // fp32 master weights), and the products convert only their non-weight operand.
  MemoryModelInput in = gpt2_124m_on_cuda();
  const MemoryBytes fp32 = predict_memory(in, 0);
  in.layout.precision = PrecisionRegime::kBf16;
  const MemoryBytes bf16 = predict_memory(in, 0);
  const int64_t P = chunk_parameter_floats(in.model, 1, virtual_stage_spec(in.model, 1, 1, 0, 0));
  EXPECT_EQ(fp32[MemoryCategory::kWeights], reserved_bytes(DeviceKind::kCuda, P));
  EXPECT_EQ(bf16[MemoryCategory::kWeights],
            reserved_bytes(DeviceKind::kCuda, P) + reserved_bytes(DeviceKind::kCuda, P, 2));
  // The largest converted A operand: mlp.c_proj's weight-gradient input (N x 4C), no longer wte
  // (V x C), whose compute copy its products read.
  const DeviceScratch scratch = device_scratch(in, 0);
  EXPECT_EQ(scratch.operand_a, 2 * 1024 * 3072 * in.layout.micro_batch);
  EXPECT_EQ(scratch.operand_b, 2 * 1024 * 50304 * in.layout.micro_batch);
}

TEST(MemoryModel, HeaviestRanks) {
  MemoryModelInput in = small_input();
  set_grid(in, GridShape{.tp = 2, .dp = 2, .pp = 2});
  const std::vector<RankMemory> all = predict_all_ranks(in);
  ASSERT_EQ(all.size(), 8u);
  const std::vector<RankMemory> per_stage = heaviest_per_stage(all, 2);
  EXPECT_EQ(per_stage[0].rank, 0);
  EXPECT_EQ(per_stage[1].rank, 4);
  EXPECT_EQ(per_stage[1].coordinates.stage, 1);
  EXPECT_EQ(heaviest_rank(all).bytes.total(),
            std::max(per_stage[0].bytes.total(), per_stage[1].bytes.total()));
}

TEST(MemoryModel, KorthikantiFormulas) {
  const ModelConfig m{
      .n_layer = 1, .n_head = 16, .d_model = 1024, .seq_len = 2048, .vocab_size = 50257};
  const double sbh = 2048.0 * 4 * 1024, as_h = 16.0 * 2048 / 1024;
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(m, 4, 1, false, Recompute::kNone),
                   sbh * (34 + 5 * as_h));
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(m, 4, 8, false, Recompute::kNone),
                   sbh * (10 + 24.0 / 8 + 5 * as_h / 8));
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(m, 4, 8, true, Recompute::kSelective),
                   sbh * 34 / 8);
  EXPECT_DOUBLE_EQ(korthikanti_layer_activation_bytes(m, 4, 1, false, Recompute::kFull), 2 * sbh);
}

TEST(MemoryModel, RecomputeNames) {
  EXPECT_STREQ(recompute_name(Recompute::kNone), "none");
  EXPECT_STREQ(recompute_name(Recompute::kSelective), "selective");
  EXPECT_STREQ(recompute_name(Recompute::kFull), "full");
}

}  // namespace
}  // namespace gpt
