// The planner's step-time model (see cost_model.h). Sizes are those of one microbatch on one tp
// rank; "e" is the bytes of one activation element in the regime (fp32 in this project, also
// under bf16, whose products only round their operands; 16-bit in Megatron's).
#include "parallel/planner/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "framework/families/model_family.h"
#include "parallel/bucket_plan.h"
#include "parallel/layer_sizes.h"
#include "parallel/parameter_shards.h"
#include "parallel/planner/core_sharing.h"
#include "parallel/planner/link_model.h"
#include "parallel/planner/lockstep_pipeline.h"
#include "parallel/planner/plan_memory.h"

namespace gpt {
namespace {

// The thread-block tile of large 16-bit tensor-core GEMMs on A100: CUTLASS's default for sm80
// (include/cutlass/gemm/device/default_gemm_configuration.h, DefaultGemmConfiguration for
// OpClassTensorOp and Sm80: ThreadblockShape GemmShape<128, 256, 64>), also among the tiles
// NVIDIA's "Matrix Multiplication Background User's Guide" lists for its wave quantization.
constexpr double kTileLong = 256, kTileShort = 128;

bool megatron(const PlanLayout& l) {
  return l.precision == PrecisionRegime::kMegatronMixed;
}

// The ranks of one pipeline stage (tp x dp consecutive ranks) on one node. On a CPU cluster
// their tp collectives run in lockstep (the dp replicas alike) and share the node's one network
// link when tp crosses nodes; the node's other ranks belong to other stages, whose collectives
// fall elsewhere in time.
int stage_ranks_per_node(const Cluster& cluster, const PlanLayout& l) {
  const int stage = l.tp * l.dp;
  const int per_node = ranks_per_node(cluster, l.world(), l.placement);
  if (l.placement.by_node && l.placement.nodes > 1)
    return std::min(per_node, (stage + l.placement.nodes - 1) / l.placement.nodes);
  return std::min(per_node, stage);
}

double peak_flops(const GpuModel& gpu, PrecisionRegime regime) {
  return regime == PrecisionRegime::kFp32 ? gpu.peak_fp32 : gpu.peak_bf16;
}

// Bytes of an activation or its gradient in a tp or pp message: bf16 in both 16-bit regimes
// (parallel/tensor_parallel.h, parallel/pipeline_executor.h).
double wire_bytes(const PlanLayout& l) {
  return l.regime() == PrecisionRegime::kFp32 ? 4 : 2;
}

struct Linear {
  double out, in;
};
// The column-parallel inputs' products (GPT-2's c_attn and c_fc; the Llama family's q, k, v and
// gate, up, each part one product) and the row-parallel outputs (c_proj twice; o_proj, down), as
// one tp rank's shards hold them.
struct BlockLinears {
  std::vector<Linear> attention_in, mlp_in, out;
};
BlockLinears block_linears(const BlockParameters& block, int tp) {
  BlockLinears out;
  for_each_block_parameter(
      block, [](const NormSpec&) {},
      [&](const LinearSpec& spec, LinearPlace place) {
        const LocalLinear local = local_linear(spec, place, tp);
        const Linear linear{static_cast<double>(local.out), static_cast<double>(local.in)};
        (place == LinearPlace::kAttentionIn ? out.attention_in
         : place == LinearPlace::kMlpIn     ? out.mlp_in
                                            : out.out)
            .push_back(linear);
      });
  return out;
}

// One microbatch on one tp rank.
struct Shapes {
  // e: bytes of an activation as the streaming kernels read and write it (Megatron's 2; this
  // project's kernels work on float32 buffers, and its 16-bit cache storage is priced apart:
  // cache_storage_pass);
  // wire: as sent over tp and pp (2 in both bf16 regimes, 4 in float32)
  double b, s, C, N, Nl, C_l, F_l, heads_l, hd, V_l, e, wire;
  double Q_l, KV_l;       // q and kv channels on this rank (GPT-2: both C_l)
  StreamTraffic traffic;  // the block's streaming kernels (the model family's)
  BlockLinears linears;   // one block's products on this rank
  int tp;
};

Shapes shapes_of(const ModelConfig& m, const PlanLayout& l) {
  Shapes sh{};
  sh.tp = l.tp;
  sh.b = static_cast<double>(l.micro_batch);
  sh.s = static_cast<double>(m.seq_len);
  sh.C = static_cast<double>(m.d_model);
  sh.N = sh.b * sh.s;
  sh.Nl = l.sequence_parallel ? sh.N / l.tp : sh.N;
  sh.C_l = sh.C / l.tp;
  sh.F_l = static_cast<double>(m.ffn_dim()) / l.tp;
  sh.heads_l = static_cast<double>(m.n_head) / l.tp;
  sh.hd = static_cast<double>(m.head_dim());
  sh.V_l = static_cast<double>(m.padded_vocab(l.tp)) / l.tp;
  sh.Q_l = static_cast<double>(m.q_channels()) / l.tp;
  sh.KV_l = static_cast<double>(m.kv_channels_per_rank(l.tp));
  const ModelFamily& family = family_of(m);
  sh.traffic = family.describe(m).traffic;
  sh.linears = block_linears(family.block_parameters(m, 0, l.tp), l.tp);
  sh.e = megatron(l) ? 2 : 4;
  sh.wire = wire_bytes(l);
  return sh;
}

// The tp group's collectives on its link (tp ranks are consecutive: one node unless tp exceeds
// it), each after `idle` seconds of compute, and each a meeting of its ranks (CoreSharing::meet).
// A collective of one rank costs nothing.
struct TpComm {
  LinkModel link;
  int ranks = 1;
  CoreSharing sharing;
  double idle = 0;
  double all_reduce(double bytes) const { return call(Collective::kAllReduce, bytes); }
  double all_gather(double bytes) const { return call(Collective::kAllGather, bytes); }
  double reduce_scatter(double bytes) const { return call(Collective::kReduceScatter, bytes); }

 private:
  double call(Collective op, double bytes) const {
    if (ranks <= 1 || bytes <= 0) return 0;
    return sharing.meet(collective_seconds(link, op, bytes, ranks, idle), link);
  }
};

// What the model needs about one layout on one cluster.
struct Context {
  const ModelConfig& model;
  const PlanLayout& layout;
  const GpuModel& gpu;
  Shapes sh;
  TpComm tp;
  bool cpu = false;  // the CPU backend: attention materialises its probabilities
  // The attention core writes and keeps its (s x s) probabilities (Megatron's unfused core, the
  // CPU backend); this project's fused CUDA kernel keeps none.
  bool attention_keeps_probabilities() const { return cpu || megatron(layout); }
  // A product of an (m x k) and a (k x n) operand, both activations or gradients.
  double gemm(double m, double n, double k, double batch = 1) const {
    return gemm_seconds(gpu, layout.regime(), m, n, k, batch) +
           operand_conversion(m * k + k * n) * batch;
  }
  // A product whose (k x n) operand is a weight: under bf16 read from its compute copy, made
  // once per step (stage_extras), so only the (m x k) operand is converted.
  double weight_gemm(double m, double n, double k) const {
    return gemm_seconds(gpu, layout.regime(), m, n, k, 1) + operand_conversion(m * k);
  }
  // This project's CUDA backend keeps activations in fp32 and, under bf16, rounds each product
  // operand that is not a weight into scratch first (framework/cuda/matmul.cpp): read 4 bytes
  // and write 2 an element, which the product then reads as its 2-byte operand.
  double operand_conversion(double elements) const {
    if (cpu || megatron(layout) || layout.regime() != PrecisionRegime::kBf16) return 0;
    return stream(6 * elements);
  }
  double stream(double bytes) const { return stream_seconds(gpu, bytes); }
};

// A linear of one block: out features (n) by in features (k) on this tp rank.
// The attention core's forward products, (s x s) scores and their product with V, per head.
// In Megatron and on this project's CPU backend these materialise the (s x s) scores (the CPU
// keeps the probabilities, no dropout: the 4.5 passes overcount it by the masks); this
// project's CUDA kernel is fused (never writes them), so only its FLOPs count, at the CUDA
// cores' fp32 rate.
double attention_core_forward(const Context& c) {
  const Shapes& sh = c.sh;
  const double batch = sh.b * sh.heads_l;
  if (c.attention_keeps_probabilities()) {
    const double probs = batch * sh.s * sh.s;  // softmax in and out, dropout in, out and mask
    return c.gemm(sh.s, sh.s, sh.hd, batch) + c.gemm(sh.s, sh.hd, sh.s, batch) +
           c.stream(probs * sh.e * 4.5);
  }
  // This project's kernel computes in fp32 on the CUDA cores (framework/cuda/attention.cu),
  // in every regime.
  return kernel_flop_seconds(c.gpu, c.gpu.attention_kernel_peak(), 4 * batch * sh.s * sh.s * sh.hd);
}

// Backward of the core: gradients of the probabilities, V, Q and K (four products), and in
// Megatron the dropout and softmax backward over the (s x s) probabilities; the fused kernel
// recomputes the scores, 2.5 times the forward's FLOPs.
double attention_core_backward(const Context& c) {
  const Shapes& sh = c.sh;
  const double batch = sh.b * sh.heads_l;
  if (c.attention_keeps_probabilities()) {
    const double probs = batch * sh.s * sh.s;
    return c.gemm(sh.s, sh.s, sh.hd, batch) + 3 * c.gemm(sh.s, sh.hd, sh.s, batch) +
           c.stream(probs * sh.e * 5.5);
  }
  return 2.5 * attention_core_forward(c);
}

// Streaming kernels of one block, in activation elements moved (read + written), by the widths
// they run over: the residual's C on Nl rows, the MLP's F and q's and k's on N rows (the model
// family's StreamTraffic; in Megatron the bias adds are fused with dropout and residual).
double block_stream_forward(const Context& c) {
  const Shapes& sh = c.sh;
  const StreamTraffic& t = sh.traffic;
  const double per_row = megatron(c.layout) ? t.forward_c_megatron : t.forward_c;
  return c.stream((per_row * sh.Nl * sh.C + t.forward_f * sh.N * sh.F_l +
                   t.forward_qk * sh.N * (sh.Q_l + sh.KV_l)) *
                  sh.e);
}
// Backward: the norms' and residuals' gradients, the MLP activation's backward and bias sums,
// the rotations back.
double block_stream_backward(const Context& c) {
  const Shapes& sh = c.sh;
  const StreamTraffic& t = sh.traffic;
  return c.stream((t.backward_c * sh.Nl * sh.C + t.backward_f * sh.N * sh.F_l +
                   t.backward_qk * sh.N * (sh.Q_l + sh.KV_l)) *
                  sh.e);
}

// The forward's tp collectives: the two row-parallel outputs all-reduced, or with sequence
// parallelism both column-parallel inputs all-gathered and both outputs reduce-scattered.
double block_tp_forward(const Context& c) {
  const double bytes = c.sh.N * c.sh.C * c.sh.wire;
  if (c.layout.sequence_parallel) return 2 * (c.tp.all_gather(bytes) + c.tp.reduce_scatter(bytes));
  return 2 * c.tp.all_reduce(bytes);
}

// Whether this project's runtime computes the column-parallel linears' (and the head's logits)
// weight gradients in the input-gradient pass, behind their input gradients' tp reductions: in
// a whole backward (every schedule but zb-h1, whose weight pass runs apart), at tp > 1
// (layers/column_parallel_linear.h, layers/lm_head.h).
bool column_weights_in_input_pass(const PlanLayout& l) {
  return !megatron(l) && l.tp > 1 && l.schedule != ScheduleKind::kZbH1;
}

// The weight-gradient products of the column-parallel linears of one block (their parts
// together): attention's input projection, then the MLP's.
std::array<double, 2> column_weight_gradients(const Context& c) {
  const BlockLinears& w = c.sh.linears;
  std::array<double, 2> out{};
  for (size_t i = 0; i < 2; ++i)
    for (const Linear& col : i == 0 ? w.attention_in : w.mlp_in)
      out[i] += c.gemm(col.out, col.in, c.sh.N);
  return out;
}

// The input-gradient pass's tp collectives, exposed. The column-parallel input gradient's
// reduction overlaps that linear's weight gradient, in this project's whole backwards
// (column_weights_in_input_pass) on GPUs and in Megatron, which under sequence parallelism also
// re-gathers the column-parallel inputs it did not keep while computing the input gradient (this
// project keeps them); the row-parallel output gradients' all-gather is exposed.
double block_tp_backward(const Context& c) {
  const double bytes = c.sh.N * c.sh.C * c.sh.wire;
  const bool sp = c.layout.sequence_parallel;
  const double reduce = sp ? c.tp.reduce_scatter(bytes) : c.tp.all_reduce(bytes);
  const double gather_out = sp ? 2 * c.tp.all_gather(bytes) : 0;
  // On the CPU backend the rank's one core does both the product and the reduction's copies and
  // sums, so the overlap hides nothing measurable there (docs/BENCHMARKS.md, "Hidden tp
  // communication"); on a GPU the collective runs beside the product.
  if (column_weights_in_input_pass(c.layout) && !c.cpu) {
    double exposed = gather_out;
    for (const double wgrad : column_weight_gradients(c)) exposed += std::max(0.0, reduce - wgrad);
    return exposed;
  }
  if (!megatron(c.layout) || !c.layout.framework.tp_backward_overlapped)
    return gather_out + 2 * reduce;
  const BlockLinears& w = c.sh.linears;
  double exposed = gather_out;
  for (const std::vector<Linear>* parts : {&w.attention_in, &w.mlp_in}) {
    double wgrad = 0, dgrad = 0;  // of the layer's parts together
    for (const Linear& col : *parts) {
      wgrad += c.gemm(col.out, col.in, c.sh.N);
      dgrad += c.weight_gemm(c.sh.N, col.in, col.out);
    }
    exposed += std::max(0.0, reduce - wgrad);  // beside the wgrad
    if (sp) exposed += std::max(0.0, c.tp.all_gather(bytes) - dgrad);
  }
  return exposed;
}

// This project's bf16 keeps a block's cache in 16 bits from its forward to its backward
// (layers/stored_block_cache.h): each activation of it is packed after the forward (read 4 bytes,
// write 2 an element) and unpacked before the backward (read 2, write 4); a schedule that runs W
// apart from B (zb-h1) unpacks again for the W. One such pass.
double cache_storage_pass(const Context& c) {
  if (megatron(c.layout) || c.layout.regime() != PrecisionRegime::kBf16) return 0;
  const LayerSizes s =
      layer_sizes(c.model, c.layout.tp, c.layout.sequence_parallel, c.layout.micro_batch,
                  c.cpu ? DeviceKind::kCpu : DeviceKind::kCuda, c.layout.recompute);
  return c.stream(6.0 * static_cast<double>(s.stored_activations()));
}

struct BlockCosts {
  ChunkCosts passes;         // one block, one microbatch, without recomputation
  PassTime selective_extra;  // the attention core's forward again
  PassTime full_extra;       // the whole forward again
};

BlockCosts block_costs(const Context& c) {
  const BlockLinears& w = c.sh.linears;
  const double N = c.sh.N;
  BlockCosts b;
  double fwd = attention_core_forward(c) + block_stream_forward(c);
  double dgrad = attention_core_backward(c) + block_stream_backward(c), wgrad = 0;
  for (const std::vector<Linear>* group : {&w.attention_in, &w.mlp_in, &w.out})
    for (const Linear& lin : *group) {
      fwd += c.weight_gemm(N, lin.out, lin.in);
      dgrad += c.weight_gemm(N, lin.in, lin.out);
      wgrad += c.gemm(lin.out, lin.in, N);
    }
  if (column_weights_in_input_pass(c.layout)) {
    for (const double column : column_weight_gradients(c)) dgrad += column, wgrad -= column;
  }
  b.passes.forward = {fwd, block_tp_forward(c)};
  b.passes.backward_input = {dgrad, block_tp_backward(c)};
  b.passes.backward_weight = {wgrad, 0};
  b.selective_extra = {attention_core_forward(c), 0};
  b.full_extra = b.passes.forward;
  return b;
}

// The embedding (first virtual stage): lookup and position add; its output all-reduced (or
// reduce-scattered) over tp; the output gradient all-gathered back under sequence parallelism;
// wte's gradient scattered in by the weight pass.
ChunkCosts embedding_costs(const Context& c) {
  const Shapes& sh = c.sh;
  const double bytes = sh.N * sh.C * sh.wire;
  const bool sp = c.layout.sequence_parallel;
  ChunkCosts e;
  e.forward = {c.stream(3 * sh.N * sh.C * sh.e),
               sp ? c.tp.reduce_scatter(bytes) : c.tp.all_reduce(bytes)};
  e.backward_input = {0, sp ? c.tp.all_gather(bytes) : 0};
  e.backward_weight = {c.stream(3 * sh.N * sh.C * 4), 0};
  return e;
}

// The head (last virtual stage): ln_f, the vocabulary-parallel logits and cross-entropy (fp32
// logits, three all-reduces of row statistics), and their backward.
ChunkCosts head_costs(const Context& c) {
  const Shapes& sh = c.sh;
  const double bytes = sh.N * sh.C * sh.wire, logits = sh.N * sh.V_l * 4;
  const bool sp = c.layout.sequence_parallel;
  ChunkCosts h;
  h.forward = {
      c.stream(2 * sh.Nl * sh.C * sh.e) + c.weight_gemm(sh.N, sh.V_l, sh.C) + c.stream(3 * logits),
      (sp ? c.tp.all_gather(bytes) : 0) + 3 * c.tp.all_reduce(sh.N * 4)};
  const double reduce = sp ? c.tp.reduce_scatter(bytes) : c.tp.all_reduce(bytes);
  const double wgrad = c.gemm(sh.V_l, sh.C, sh.N);
  h.backward_input = {
      c.stream(2 * logits) + c.weight_gemm(sh.N, sh.C, sh.V_l) + c.stream(3 * sh.Nl * sh.C * sh.e),
      reduce};
  h.backward_weight = {wgrad, 0};
  // This project's whole backward computes the logits' weight gradient while ln_f's output
  // gradient is reduced, as the column-parallel linears do (block_tp_backward).
  if (column_weights_in_input_pass(c.layout)) {
    h.backward_input.compute += wgrad;
    h.backward_weight.compute = 0;
    if (!c.cpu) h.backward_input.tp_exposed = std::max(0.0, reduce - wgrad);
  }
  return h;
}

void add(ChunkCosts& to, const ChunkCosts& from, double times = 1) {
  for (auto [t, f] :
       {std::pair{&to.forward, &from.forward}, std::pair{&to.backward_input, &from.backward_input},
        std::pair{&to.backward_weight, &from.backward_weight}}) {
    t->compute += times * f->compute;
    t->tp_exposed += times * f->tp_exposed;
  }
}

// Where the framework adds each microbatch's weight gradients to the accumulated ones in a
// separate pass (FrameworkProfile::grad_accumulation_bytes), its share per microbatch: every
// microbatch but the first moves those bytes for each weight of the chunk on this tp rank (the
// block's products, the embedding's table and positions, the tied head's copy of the table on
// the last stage; norms and biases are a rounding error at these sizes).
double grad_accumulation_seconds(const Context& c, int64_t layers, int vs) {
  const PlanLayout& l = c.layout;
  if (!megatron(l) || l.framework.grad_accumulation_bytes <= 0 || l.microbatches <= 1) return 0;
  double weights = 0;
  const BlockLinears& w = c.sh.linears;
  for (const std::vector<Linear>* group : {&w.attention_in, &w.mlp_in, &w.out})
    for (const Linear& lin : *group) weights += lin.out * lin.in;
  weights *= static_cast<double>(layers);
  const double table = c.sh.V_l * c.sh.C;
  if (vs == 0) weights += table + c.sh.s * c.sh.C;
  if (vs == l.pp * l.virtual_stages - 1 && vs != 0 && describe(c.model).tied_head) weights += table;
  const double share = static_cast<double>(l.microbatches - 1) / l.microbatches;
  return share * c.stream(weights * l.framework.grad_accumulation_bytes);
}

Context make_context(const ModelConfig& m, const PlanLayout& l, const Cluster& cluster) {
  Context c{m,
            l,
            cluster.gpu,
            shapes_of(m, l),
            {group_link(cluster, l.tp, 1, l.placement, stage_ranks_per_node(cluster, l)), l.tp,
             core_sharing(m, cluster, l)},
            cluster.cpu.active()};
  if (c.tp.link.burst > 0) {
    // A shaped link refills between a block's tp collectives (two, four under sequence
    // parallelism): the block's forward compute over them, the backward's alike.
    const double calls = l.sequence_parallel ? 4 : 2;
    c.tp.idle =
        c.tp.sharing.stretch_pass(block_costs(c).passes.forward.compute, ActionKind::kForward) /
        calls;
  }
  return c;
}

// The parts of a step around the pipeline, per stage.
struct StageExtras {
  double dp_total = 0;  // the gradient reduction's seconds
  double gather = 0;    // the distributed optimizer's parameter all-gather's seconds
  double optimizer = 0;
};

StageExtras stage_extras(const ModelConfig& m, const PlanLayout& l, const Cluster& cluster,
                         const CoreSharing& sharing, int stage) {
  StageExtras x;
  const double params = static_cast<double>(stage_parameters(m, l, stage));
  // fp32 gradients in both regimes, reduced in bf16 under --grad-reduce-dtype bf16
  const double grad_bytes = params * (l.grad_reduce_dtype == GradReduceDtype::kBf16 ? 2 : 4);
  const LinkModel link = group_link(cluster, l.dp, l.tp, l.placement);
  // The buckets' collectives are nonblocking (NCCL's ring on GPUs).
  const auto seconds = [&](Collective op, double bytes) {
    return sharing.nonblocking(link, op, bytes, l.dp);
  };
  if (l.distributed_optimizer) {
    x.dp_total = seconds(Collective::kReduceScatter, grad_bytes);
    x.gather = seconds(Collective::kAllGather, params * (megatron(l) ? 2 : 4));
  } else {
    x.dp_total = seconds(Collective::kAllReduce, grad_bytes);
  }
  // AdamW streams value, gradient and both moments in and value and moments out (28 bytes);
  // clipping reads the gradients once more, and they are zeroed (8). Megatron adds writing the
  // 16-bit weights (2); this project's bf16 refreshes its compute copies from every value after
  // the update (and the gather): read 4, write 2 (framework/parameter.h).
  const double shards = l.distributed_optimizer ? l.dp : 1;
  const double refresh = l.regime() == PrecisionRegime::kBf16 && !megatron(l) ? 6 * params : 0;
  x.optimizer = sharing.stretch_work(
      stream_seconds(cluster.gpu, params / shards * (megatron(l) ? 38 : 36) + refresh));
  return x;
}

}  // namespace

double gemm_seconds(const GpuModel& gpu, PrecisionRegime regime, double m, double n, double k,
                    double batch) {
  if (m <= 0 || n <= 0 || k <= 0 || batch <= 0) return 0;
  // Output tiles run in waves over the SMs; a partial last wave leaves SMs idle.
  const double tiles =
      batch * std::ceil(std::max(m, n) / kTileLong) * std::ceil(std::min(m, n) / kTileShort);
  const double waves = std::ceil(tiles / gpu.sms);
  const double wave_use = tiles / (waves * gpu.sms);
  const double flops = 2 * m * n * k * batch;
  const double compute =
      flops / (peak_flops(gpu, regime) * gpu.gemm_efficiency_at(flops / batch) * wave_use);
  const double operand = regime == PrecisionRegime::kFp32 ? 4 : 2;
  const double memory = stream_seconds(gpu, operand * (m * k + k * n + m * n) * batch);
  return std::max(compute, memory);
}

double stream_seconds(const GpuModel& gpu, double bytes) {
  return bytes / (gpu.memory_bandwidth * gpu.memory_efficiency);
}

double kernel_flop_seconds(const GpuModel& gpu, double peak, double flops) {
  return flops / (peak * gpu.gemm_efficiency);
}

ChunkCosts chunk_costs(const ModelConfig& m, const PlanLayout& l, const Cluster& cluster, int vs) {
  Context c = make_context(m, l, cluster);
  c.tp.sharing = core_sharing(m, cluster, l, vs % l.pp);  // at this stage's layers
  const BlockCosts block = block_costs(c);
  const int64_t layers = l.chunk_layers(m, vs % l.pp, vs / l.pp);
  const int64_t recomputed = l.recomputed_layers(layers);
  ChunkCosts costs;
  add(costs, block.passes, static_cast<double>(layers));
  // Selective recomputation rebuilds the attention's probabilities where they are kept (the
  // CPU backend, Megatron); this project's fused CUDA kernel keeps none, so it recomputes
  // nothing there (attention_cache_is_quadratic, parallel/layer_sizes.h).
  if (l.recompute == Recompute::kSelective && c.attention_keeps_probabilities())
    costs.backward_input.compute += static_cast<double>(layers) * block.selective_extra.compute;
  if (recomputed > 0) {
    costs.backward_input.compute += static_cast<double>(recomputed) * block.full_extra.compute;
    costs.backward_input.tp_exposed +=
        static_cast<double>(recomputed) * block.full_extra.tp_exposed;
  }
  // The blocks not recomputed in full store their caches in 16 bits under this project's bf16.
  const double stored = static_cast<double>(layers - recomputed) * cache_storage_pass(c);
  costs.forward.compute += stored;
  costs.backward_input.compute += stored;
  if (l.schedule == ScheduleKind::kZbH1) costs.backward_weight.compute += stored;
  // A whole B hands its input gradient to the previous stage after its input pass, which also
  // runs the weight halves of the blocks on the shared cache (all of them under this project's
  // bf16, the recomputed ones in fp32; weight_half_at_once, parallel/layer_sizes.h). The first
  // virtual stage runs all its blocks' weight halves there too, but it hands nothing over, so
  // its passes stay split as computed (the last one is what a dp reduction hides behind). ZB-H1
  // runs the recomputed blocks' weight halves in their input pass on every stage, the others in
  // its W.
  if (!megatron(l) && (l.schedule == ScheduleKind::kZbH1 || vs > 0)) {
    const ChunkRecompute rc{.full_blocks = recomputed,
                            .split_backward = l.schedule == ScheduleKind::kZbH1};
    const double at_once = static_cast<double>(weight_halves_at_once(
        rc, false, l.regime() == PrecisionRegime::kBf16, static_cast<int64_t>(layers)));
    costs.backward_input.compute += at_once * block.passes.backward_weight.compute;
    costs.backward_weight.compute -= at_once * block.passes.backward_weight.compute;
  }
  if (vs == 0) add(costs, embedding_costs(c));
  if (vs == l.pp * l.virtual_stages - 1) add(costs, head_costs(c));
  costs.backward_weight.compute += grad_accumulation_seconds(c, layers, vs);
  return c.tp.sharing.stretch_chunk(costs, c.tp.link);
}

namespace {

// Per stage, the pipeline's work: compute and exposed tp seconds over all its actions.
struct StageWork {
  std::vector<double> compute, tp;
};

StageWork stage_work(const PlanLayout& l, const std::vector<ChunkCosts>& per_vs) {
  StageWork w{std::vector<double>(l.pp, 0.0), std::vector<double>(l.pp, 0.0)};
  for (size_t vs = 0; vs < per_vs.size(); ++vs) {
    const int stage = static_cast<int>(vs) % l.pp;
    const ChunkCosts& c = per_vs[vs];
    for (const PassTime* p : {&c.forward, &c.backward_input, &c.backward_weight}) {
      w.compute[stage] += l.microbatches * p->compute;
      w.tp[stage] += l.microbatches * p->tp_exposed;
    }
  }
  return w;
}

std::vector<PassCosts> pass_costs(const std::vector<ChunkCosts>& per_vs) {
  std::vector<PassCosts> costs;
  for (const ChunkCosts& c : per_vs)
    costs.push_back({c.forward.total(), c.backward_input.total(), c.backward_weight.total()});
  return costs;
}

// Per stage: when its last action ends, and how long that action ran (the part of the backward
// a bucketed dp reduction can hide behind).
void stage_ends(const Timeline& t, int pp, std::vector<double>& end, std::vector<double>& last) {
  end.assign(pp, 0.0);
  last.assign(pp, 0.0);
  for (const TimedAction& a : t.actions) {
    if (a.end < end[a.stage]) continue;
    end[a.stage] = a.end;
    last[a.stage] = a.end - a.start;
  }
}

// The bytes of the point-to-point message of one activation or gradient (Megatron sends 1/tp of
// it: sequence parallel, or its scatter-gather trick), the pipeline's slowest link (a stage's
// ranks and the next stage's are tp * dp ranks apart), and the message's seconds on it, after
// `idle` seconds (a pass) since the last one that way.
double p2p_bytes(const ModelConfig& m, const PlanLayout& l) {
  const double e = wire_bytes(l);
  const double split = (l.sequence_parallel || megatron(l)) ? l.tp : 1;
  return static_cast<double>(l.micro_batch * m.seq_len * m.d_model) * e / split;
}
LinkModel p2p_link(const Cluster& cluster, const PlanLayout& l) {
  return group_link(cluster, l.pp, l.tp * l.dp, l.placement);
}
double p2p_time(const ModelConfig& m, const PlanLayout& l, const Cluster& cluster,
                const CoreSharing& sharing, double idle) {
  if (l.pp == 1) return 0;
  const LinkModel link = p2p_link(cluster, l);
  return sharing.exchange(p2p_seconds(link, p2p_bytes(m, l), idle), link);
}

// The step's small blocking reductions after the pipeline, 8 bytes each: the loss over the world
// (ProcessGrid::sum_tp_replicated), the gradient norm's over tp, pp and, with sharded optimizer
// state, dp (optimizers/grad_clip.cpp). Latency on GPUs; Open MPI's 8-byte all-reduce on the
// CPU exchanges by recursive doubling, log2(n) meetings of two ranks.
struct StepReductions {
  double tp = 0, pp = 0, dp = 0;  // the world's loss counted with dp
  double total() const { return tp + pp + dp; }
};

StepReductions step_reductions(const Cluster& cluster, const PlanLayout& l,
                               const CoreSharing& sharing) {
  const auto reduce = [&](int ranks, int stride) {
    if (ranks <= 1) return 0.0;
    const LinkModel link = group_link(cluster, ranks, stride, l.placement);
    return sharing.exchange(collective_seconds(link, Collective::kAllReduce, 8, ranks), link,
                            std::ceil(std::log2(ranks)));
  };
  StepReductions r;
  r.tp = reduce(l.tp, 1);
  r.pp = reduce(l.pp, l.tp * l.dp);
  r.dp = reduce(l.world(), 1) + (l.distributed_optimizer ? reduce(l.dp, l.tp) : 0);
  return r;
}

// chunk_costs of every virtual stage, in order.
std::vector<ChunkCosts> chunk_costs_per_vs(const ModelConfig& m, const PlanLayout& l,
                                           const Cluster& cluster) {
  std::vector<ChunkCosts> per_vs;
  for (int vs = 0; vs < l.pp * l.virtual_stages; ++vs)
    per_vs.push_back(chunk_costs(m, l, cluster, vs));
  return per_vs;
}

}  // namespace

StepPrediction predict_step(const ModelConfig& m, const PlanLayout& l, const Cluster& cluster,
                            const Schedule& schedule) {
  const std::vector<ChunkCosts> per_vs = chunk_costs_per_vs(m, l, cluster);
  const CoreSharing sharing = core_sharing(m, cluster, l);
  std::vector<PassCosts> passes = pass_costs(per_vs);
  // This project's executor sends a full backward's input gradient after its input half;
  // Megatron-LM's (one autograd call for both halves) only after the weight half too.
  if (megatron(l) && schedule.kind != ScheduleKind::kZbH1) {
    for (PassCosts& p : passes) p.backward_input += p.backward_weight, p.backward_weight = 0;
  }
  double shortest_pass = passes.front().forward;
  for (const PassCosts& p : passes)
    shortest_pass = std::min({shortest_pass, p.forward, p.backward_input});
  const double comm = p2p_time(m, l, cluster, sharing, shortest_pass);
  // DeepSpeed's engine runs its own lockstep schedule (lockstep_pipeline.h), not the replay.
  const bool lockstep = megatron(l) && l.framework.lockstep_pipeline && l.pp > 1 &&
                        l.virtual_stages == 1 && schedule.kind == ScheduleKind::k1f1b;
  // Where a stage's exchanges block it, each pass that sends holds its stage for the transfer.
  if (!lockstep && megatron(l) && l.framework.blocking_p2p) {
    const size_t last_vs = passes.size() - 1;
    for (size_t vs = 0; vs < passes.size(); ++vs) {
      if (vs < last_vs) passes[vs].forward += comm;
      if (vs > 0) passes[vs].backward_input += comm;
    }
  }
  // Per stage, when its last action ends and how long that ran; and what the transfers add.
  std::vector<double> end, last;
  double pp_wait = 0;
  if (lockstep) {
    const double steps = lockstep_pipeline_seconds(passes, l.microbatches, comm);
    end.assign(l.pp, steps);
    last.assign(l.pp, 0.0);
    pp_wait = steps - lockstep_pipeline_seconds(passes, l.microbatches, 0);
  } else {
    // Messages above the link's eager limit are sent only once their receiver takes them.
    const bool rendezvous = p2p_bytes(m, l) > p2p_link(cluster, l).eager_bytes;
    const Timeline with_comm = simulate(schedule, ActionCosts{1, 1, 1, comm, rendezvous}, passes);
    const Timeline without = simulate(schedule, ActionCosts{1, 1, 1, 0, rendezvous}, passes);
    stage_ends(with_comm, l.pp, end, last);
    pp_wait = std::max(0.0, with_comm.makespan - without.makespan);
  }
  const StageWork work = stage_work(l, per_vs);
  // The tied embedding's gradient, all-reduced between the first and last stage after the step.
  // Its two members are (pp - 1) tp dp ranks apart: one node's link when both are on it.
  const LinkModel tied_link = group_link(cluster, 2, (l.pp - 1) * l.tp * l.dp, l.placement);
  const double tied =
      l.pp > 1 ? sharing.exchange(
                     collective_seconds(
                         tied_link, Collective::kAllReduce,
                         static_cast<double>(m.padded_vocab(l.tp) / l.tp * m.d_model) * 4, 2),
                     tied_link)
               : 0;
  const StepReductions reductions = step_reductions(cluster, l, sharing);
  StepPrediction p;
  for (int stage = 0; stage < l.pp; ++stage) {
    const StageExtras x = stage_extras(m, l, cluster, sharing, stage);
    // This project posts dp buckets (train's default size) during the last backward, as
    // PyTorch's DDP did in Megatron's 2021 runs; its local DDP (2022) reduced after it.
    const double window = megatron(l) && !l.framework.dp_overlapped ? 0 : last[stage];
    // What one bucket (train's default size) of a collective takes: the part nothing hides.
    const auto one_bucket = [&](double total) {
      return std::min(total, total * static_cast<double>(kDefaultBucketElements) /
                                 static_cast<double>(stage_parameters(m, l, stage)));
    };
    // The updated parameters' all-gather: this project posts it bucket by bucket after the
    // optimizer step and each layer of the next step's first forward waits for its own, so it
    // hides behind that forward (the stage's first chunk, one microbatch) but for its first
    // bucket. Megatron's published runs waited for it after the step.
    const double gather =
        megatron(l) ? x.gather
                    : std::max(one_bucket(x.gather),
                               x.gather - per_vs[static_cast<size_t>(stage)].forward.total());
    const double dp = std::max(one_bucket(x.dp_total), x.dp_total - window) + gather;
    const double total =
        end[stage] + dp + tied + reductions.tp + reductions.pp + reductions.dp + x.optimizer;
    if (total <= p.step_time_s) continue;
    p.step_time_s = total;
    p.critical_stage = stage;
    p.compute_s = work.compute[stage] + x.optimizer;
    p.tp_comm_exposed_s = work.tp[stage] + reductions.tp;
    p.dp_comm_exposed_s = dp + reductions.dp;
    const double idle = std::max(0.0, end[stage] - work.compute[stage] - work.tp[stage]);
    p.bubble_s = std::max(0.0, idle - pp_wait);
    p.pp_comm_exposed_s = idle - p.bubble_s + tied + reductions.pp;
  }
  // On a CPU cluster whose tp crosses nodes, each stage's tp traffic was priced with the node's
  // link to its own; where several stages share a node they share that link, which then has to
  // carry all of theirs within the step, at its rate (no burst: it does not idle while another
  // stage uses it).
  const int stages_on_node =
      ranks_per_node(cluster, l.world(), l.placement) / stage_ranks_per_node(cluster, l);
  if (cluster.cpu.active() && stages_on_node > 1 &&
      group_link(cluster, l.tp, 1, l.placement).crosses_nodes) {
    Cluster unshaped = cluster;
    unshaped.inter_node.burst = 0;
    double link_busy = 0;
    for (double t : stage_work(l, chunk_costs_per_vs(m, l, unshaped)).tp)
      link_busy += t * stages_on_node / l.pp;
    link_busy += reductions.total();  // they follow the traffic
    if (link_busy > p.step_time_s) {
      p.tp_comm_exposed_s += link_busy - p.step_time_s;
      p.step_time_s = link_busy;
    }
  }
  const double tokens = static_cast<double>(l.microbatches) * l.micro_batch * l.dp * m.seq_len;
  p.tokens_per_s_per_gpu = tokens / p.step_time_s / l.world();
  p.model_tflops_per_gpu = p.tokens_per_s_per_gpu * m.flops_per_token() / 1e12;
  p.mfu = p.model_tflops_per_gpu * 1e12 / peak_flops(cluster.gpu, l.regime());
  return p;
}

}  // namespace gpt
