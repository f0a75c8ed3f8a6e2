// The planner's serving model (see serving_model.h). Sizes are per tp rank; "e" is
// ServingSetup::element_bytes.
#include "parallel/planner/serving_model.h"

#include <algorithm>
#include <cmath>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "parallel/planner/cost_model.h"
#include "parallel/planner/link_model.h"
#include "parallel/planner/plan_memory.h"

namespace gpt {
namespace {

// The share of a GPU's memory a server gives its weights and cache: vLLM's default
// gpu_memory_utilization (0.9); the rest is the runtime's, the step's activations and scratch.
constexpr double kServingMemoryShare = 0.9;

double d(int64_t v) {
  return static_cast<double>(v);
}

// The head's matrix on one tp rank (vocabulary-parallel: the padded vocabulary split over tp).
double head_parameters(const ModelConfig& m, int tp) {
  return d(m.padded_vocab(tp) / tp * m.d_model);
}

// Parameters stage `stage` reads in a step on one tp rank: those it holds (the memory model's
// count) less the tables it only looks rows up in (the token embedding, unless the same stage's
// tied head multiplies by it; GPT-2's positions).
double read_parameters(const ServingSetup& s, int stage) {
  const ModelConfig& m = s.model;
  const PlanLayout& l = s.layout;
  double params = d(stage_parameters(m, l, stage));
  if (stage == 0) {
    const BlockDescription block = describe(m);
    if (!(l.pp == 1 && block.tied_head)) params -= head_parameters(m, l.tp);
    if (block.learned_positions()) params -= d(m.seq_len * m.d_model);
  }
  return params;
}

// Bytes of one token's key and value in one layer on one tp rank.
double kv_bytes_per_token_layer(const ServingSetup& s) {
  return 2 * d(s.model.kv_channels_per_rank(s.layout.tp)) * s.element_bytes;
}

double stage_layers(const ServingSetup& s, int stage) {
  return d(s.layout.chunk_layers(s.model, stage, 0));
}

// The rows' multiply rate: this project's row-wise product and attention run in fp32 on the CUDA
// cores (framework/cuda/matmul_rows.cu, attention.cu); a 16-bit server's on the tensor cores.
double flop_seconds(const ServingSetup& s, double flops) {
  const GpuModel& gpu = s.cluster.gpu;
  const double peak = s.element_bytes >= 4 ? gpu.attention_kernel_peak() : gpu.peak_bf16;
  return kernel_flop_seconds(gpu, peak, flops);
}

StageStep stage_step(const ServingSetup& s, const StepRows& r, int stage) {
  const ModelConfig& m = s.model;
  const PlanLayout& l = s.layout;
  const double e = s.element_bytes, layers = stage_layers(s, stage), C = d(m.d_model);
  const bool last = stage == l.pp - 1;
  const double params = read_parameters(s, stage);
  const double head = last ? head_parameters(m, l.tp) : 0;
  StageStep t;
  // HBM: every weight read once a step (the row kernel's reloads for more rows hit the caches),
  // the rows' cached keys and values read and their own written.
  const double kv = kv_bytes_per_token_layer(s) * layers;
  t.memory_s = stream_seconds(s.cluster.gpu, params * e + (r.cached_tokens + r.rows) * kv);
  // FLOPs: 2 per weight per row (the head's only for sampled rows), and the attention's scores
  // and their use, 4 per (query, key) pair per channel of this rank's heads.
  const double q_channels = d(m.q_channels() / l.tp);
  t.compute_s = flop_seconds(s, 2 * (params - head) * r.rows + 2 * head * r.sampled +
                                    4 * r.attended * q_channels * layers);
  // tp: each block all-reduces its attention and MLP outputs, the embedding its lookup; the last
  // stage all-gathers the sampled rows' fp32 logits.
  const LinkModel tp_link = group_link(s.cluster, l.tp, 1, l.placement);
  const auto tp_call = [&](Collective op, double bytes) {
    return collective_seconds(tp_link, op, bytes, l.tp);
  };
  const double activations = r.rows * C * e;
  t.tp_s = 2 * layers * tp_call(Collective::kAllReduce, activations);
  if (stage == 0) t.tp_s += tp_call(Collective::kAllReduce, activations);
  if (last) t.tp_s += tp_call(Collective::kAllGather, r.sampled * d(m.padded_vocab(l.tp)) * 4);
  // pp: the rows' activations to the next stage over the pipeline's slowest link; from the last,
  // the sampled token ids (int32) back to the first for the next step.
  if (l.pp > 1) {
    const LinkModel pp_link = group_link(s.cluster, l.pp, l.tp, l.placement);
    t.hop_s = p2p_seconds(pp_link, last ? r.sampled * 4 : activations);
  }
  return t;
}

// The mean context of a request's decode steps: its prompt and half its output.
double mean_context(const ServingRequest& r) {
  return d(r.prompt_tokens) + d(r.output_tokens) / 2;
}

// The sizes tried for one of tp and pp: the one given, or every power of two up to `most`.
std::vector<int> sizes(int fixed, int most) {
  if (fixed > 0) return {fixed};
  std::vector<int> all;
  for (int n = 1; n <= most; n *= 2) all.push_back(n);
  return all;
}

}  // namespace

StepRows decode_rows(double batch, double context) {
  return {batch, batch, batch * context, batch * context};
}

StepRows prefill_rows(double prompt) {
  return {prompt, 1, prompt * (prompt + 1) / 2, prompt};
}

double StageStep::busy() const {
  return std::max(memory_s, compute_s) + tp_s;
}

double ServingStep::slowest() const {
  double t = 0;
  for (const StageStep& s : stages) t = std::max(t, s.total());
  return t;
}

double ServingStep::in_turn() const {
  double t = 0;
  for (const StageStep& s : stages) t += s.total();
  return t;
}

ServingStep serving_step(const ServingSetup& setup, const StepRows& rows) {
  ServingStep step;
  for (int stage = 0; stage < setup.layout.pp; ++stage)
    step.stages.push_back(stage_step(setup, rows, stage));
  return step;
}

double time_to_first_token(const ServingSetup& setup, const ServingRequest& request) {
  const ServingStep prefill = serving_step(setup, prefill_rows(d(request.prompt_tokens)));
  return prefill.in_turn() - prefill.stages.back().hop_s;  // the token leaves the last stage
}

double time_per_output_token(const ServingSetup& setup, const ServingRequest& request) {
  return serving_step(setup, decode_rows(1, mean_context(request))).in_turn();
}

double serving_weight_bytes(const ServingSetup& setup) {
  double most = 0;
  for (int stage = 0; stage < setup.layout.pp; ++stage)
    most = std::max(most, d(stage_parameters(setup.model, setup.layout, stage)));
  return most * setup.element_bytes;
}

int64_t max_sequences(const ServingSetup& setup, const ServingRequest& request) {
  const double tokens = d(request.prompt_tokens + request.output_tokens);
  double fewest = -1;
  for (int stage = 0; stage < setup.layout.pp; ++stage) {
    const double free = setup.cluster.usable_memory_bytes() * kServingMemoryShare -
                        d(stage_parameters(setup.model, setup.layout, stage)) * setup.element_bytes;
    const double per_sequence =
        tokens * stage_layers(setup, stage) * kv_bytes_per_token_layer(setup);
    const double fit = std::max(0.0, std::floor(free / per_sequence));
    fewest = fewest < 0 ? fit : std::min(fewest, fit);
  }
  return static_cast<int64_t>(fewest);
}

// With pp, the running sequences form min(running, pp) groups in flight; each tick every stage
// runs one group's step, and a group comes round once it has passed every stage: one output
// token per sequence per cycle of max(its pass in turn, groups x the slowest tick). Each request
// also needs its prefill once per output_tokens decode cycles, priced the same way: a group's
// share of max(the prompt's pass in turn, groups x its slowest stage).
double serving_throughput(const ServingSetup& setup, const ServingRequest& request,
                          int64_t running) {
  if (running <= 0) return 0;
  const double n = d(running), out = d(request.output_tokens);
  const double groups = std::min(n, d(setup.layout.pp));
  const ServingStep step =
      serving_step(setup, decode_rows(std::ceil(n / groups), mean_context(request)));
  const double cycle = std::max(step.in_turn(), groups * step.slowest());
  const ServingStep prompt = serving_step(setup, prefill_rows(d(request.prompt_tokens)));
  const double prefill = std::max(prompt.in_turn(), groups * prompt.slowest()) / groups;
  return n * out / (out * cycle + n * prefill);
}

ServingPrediction predict_serving(const ServingSetup& setup, const ServingRequest& request,
                                  const std::vector<int64_t>& concurrency) {
  ServingPrediction p;
  p.weight_bytes = serving_weight_bytes(setup);
  p.max_sequences = max_sequences(setup, request);
  p.ttft_s = time_to_first_token(setup, request);
  p.tpot_s = time_per_output_token(setup, request);
  for (int64_t c : concurrency) {
    const int64_t running = std::min(c, p.max_sequences);
    p.throughput.push_back({c, running, serving_throughput(setup, request, running)});
  }
  return p;
}

std::vector<PlanLayout> serving_layouts(const ModelConfig& model, const Cluster& cluster, int gpus,
                                        int nodes, bool tp_across_nodes, int fixed_tp,
                                        int fixed_pp) {
  // A size given is checked alone, with the layout's own errors; the layouts the model does not
  // split into are left out.
  if (fixed_tp > 0 || fixed_pp > 0) {
    PlanLayout given;
    given.tp = std::max(1, fixed_tp);
    given.pp = std::max(1, fixed_pp);
    given.validate(model, given.tp * given.pp);
  }
  std::vector<PlanLayout> layouts;
  for (int tp : sizes(fixed_tp, gpus))
    for (int pp : sizes(fixed_pp, gpus / tp)) {
      PlanLayout l;
      l.tp = tp;
      l.pp = pp;
      l.placement = {false, nodes};
      const bool crosses = tp > cluster.gpus_per_node && !tp_across_nodes;
      GPT_INPUT_CHECK(fixed_tp == 0 || !crosses, "--tp " << tp << " spans nodes of "
                                                         << cluster.gpus_per_node
                                                         << " GPUs: add --allow-tp-across-nodes");
      if (crosses || static_cast<int64_t>(tp) * pp > gpus) continue;
      try {
        l.validate(model, tp * pp);
      } catch (const Error&) {
        continue;
      }
      layouts.push_back(l);
    }
  GPT_INPUT_CHECK(!layouts.empty(),
                  "no layout of --tp x --pp fits the " << gpus << " GPUs of the job");
  return layouts;
}

}  // namespace gpt
