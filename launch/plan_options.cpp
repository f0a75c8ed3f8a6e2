// plan's options and the enumeration of layouts (see plan_options.h).
#include "launch/plan_options.h"

#include <algorithm>
#include <optional>

#include "framework/check.h"
#include "launch/options.h"

namespace po = boost::program_options;

namespace gpt {
namespace {

std::optional<ScheduleKind> schedule_from_name(const std::string& name) {
  for (ScheduleKind k : kTrainingSchedules)
    if (name == schedule_name(k)) return k;
  return std::nullopt;
}

std::optional<Recompute> recompute_from_name(const std::string& name) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    if (name == recompute_name(r)) return r;
  return std::nullopt;
}

std::optional<PrecisionRegime> regime_from_name(const std::string& name) {
  for (PrecisionRegime p :
       {PrecisionRegime::kFp32, PrecisionRegime::kBf16, PrecisionRegime::kMegatronMixed})
    if (name == regime_name(p)) return p;
  return std::nullopt;
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// A fixed option's one value, or every candidate.
template <typename T>
std::vector<T> values(const PlanOptions& o, const char* name, T fixed, std::vector<T> all) {
  if (o.was_given(name)) return {fixed};
  return all;
}

// The rules train applies to a layout (launch/options.cpp, parallel/pipeline_schedule.cpp), with
// their messages; throws the first one `l` breaks.
void check_layout(const PlanOptions& o, const Cluster& cluster, const PlanLayout& l) {
  const ModelConfig& m = o.model;
  const int world = job_ranks(o, cluster);
  GPT_INPUT_CHECK(m.n_head % l.tp == 0,
                  "--tp " << l.tp << " does not divide --n-head " << m.n_head);
  GPT_INPUT_CHECK(m.d_model % l.tp == 0,
                  "--tp " << l.tp << " does not divide --d-model " << m.d_model);
  GPT_INPUT_CHECK(o.allow_tp_across_nodes || l.tp <= cluster.gpus_per_node,
                  "--tp " << l.tp << " spans more than a node of " << cluster.gpus_per_node
                          << " GPUs (--allow-tp-across-nodes allows it)");
  GPT_INPUT_CHECK(
      o.allow_tp_across_nodes || l.tp == 1 || !l.placement.by_node || l.placement.nodes == 1,
      "--tp " << l.tp << " with --map-by node puts each tp group across nodes "
              << "(--allow-tp-across-nodes allows it)");
  GPT_INPUT_CHECK(world % (l.tp * l.pp) == 0, "--tp " << l.tp << " x --pp " << l.pp
                                                      << " does not divide the " << world
                                                      << " GPUs of --nodes " << o.nodes);
  GPT_INPUT_CHECK(!o.was_given("dp") || o.dp == l.dp,
                  "--dp " << o.dp << " disagrees with " << world << " GPUs / (--tp " << l.tp
                          << " x --pp " << l.pp << ") = " << l.dp);
  GPT_INPUT_CHECK(m.n_layer % (static_cast<int64_t>(l.pp) * l.virtual_stages) == 0,
                  "--n-layer " << m.n_layer << " does not split evenly over --pp " << l.pp
                               << " x --virtual-stages " << l.virtual_stages << " model chunks");
  GPT_INPUT_CHECK(
      !l.sequence_parallel || m.seq_len % l.tp == 0,
      "--sequence-parallel needs --seq-len " << m.seq_len << " to be a multiple of --tp " << l.tp);
  GPT_INPUT_CHECK(o.global_batch_size % (l.dp * l.micro_batch) == 0,
                  "--global-batch-size " << o.global_batch_size << " is not a multiple of dp "
                                         << l.dp << " x --micro-batch-size " << l.micro_batch);
  GPT_INPUT_CHECK(l.recompute == Recompute::kFull || l.recompute_layers == 0,
                  "--recompute-layers needs --recompute full");
  GPT_INPUT_CHECK(l.recompute_layers <= l.layers_per_chunk(m),
                  "--recompute-layers " << l.recompute_layers << " is more than the "
                                        << l.layers_per_chunk(m) << " blocks of a model chunk");
  make_schedule(l.schedule, l.pp, l.microbatches, l.virtual_stages);  // its own rules
}

// The schedule-dependent candidates: the schedule and its virtual stages.
std::vector<std::pair<ScheduleKind, int>> schedule_choices(const PlanOptions& o, int pp) {
  std::vector<ScheduleKind> kinds;
  if (o.was_given("schedule"))
    kinds = {*schedule_from_name(o.schedule)};
  else if (pp == 1)
    kinds = {ScheduleKind::k1f1b};
  else
    kinds.assign(std::begin(kTrainingSchedules), std::end(kTrainingSchedules));
  std::vector<std::pair<ScheduleKind, int>> out;
  for (ScheduleKind k : kinds) {
    if (o.was_given("virtual-stages") || k != ScheduleKind::kInterleaved) {
      out.emplace_back(k, o.was_given("virtual-stages") ? o.virtual_stages : 1);
      continue;
    }
    for (int64_t v : divisors(o.model.n_layer / pp))
      if (v >= 2) out.emplace_back(k, static_cast<int>(v));
  }
  return out;
}

// The memory-saving candidates of one grid: recomputation (with, for full, its block counts),
// sequence parallelism and the distributed optimizer.
struct Savings {
  Recompute recompute;
  int recompute_layers;
  bool sequence_parallel, distributed_optimizer;
};
std::vector<Savings> saving_choices(const PlanOptions& o, int tp, int pp, int dp) {
  std::vector<Savings> out;
  const auto recomputes =
      values<Recompute>(o, "recompute", recompute_from_name(o.recompute).value_or(Recompute::kNone),
                        {Recompute::kNone, Recompute::kSelective, Recompute::kFull});
  for (Recompute r : recomputes) {
    std::vector<int> layer_counts = {o.recompute_layers};
    if (r == Recompute::kFull && !o.was_given("recompute-layers")) {
      // All blocks (0), and the powers of two below a stage's count (check_layout drops those
      // above an interleaved chunk's).
      for (int64_t n = 1; n < o.model.n_layer / pp; n *= 2) layer_counts.push_back(n);
    }
    for (int n : layer_counts)
      for (bool sp : values<bool>(o, "sequence-parallel", o.sequence_parallel,
                                  tp > 1 ? std::vector<bool>{false, true} : std::vector{false}))
        for (bool dist : values<bool>(o, "distributed-optimizer", o.distributed_optimizer,
                                      dp > 1 ? std::vector<bool>{false, true} : std::vector{false}))
          out.push_back({r, r == Recompute::kFull ? n : 0, sp, dist});
  }
  return out;
}

}  // namespace

po::options_description plan_options_description(PlanOptions& o) {
  po::options_description all;
  po::options_description model("Model (GPT-2, train's names)");
  add_model_options(model, o.model_preset, o.model, "sequence length",
                    "vocabulary size (GPT-2's 50257)");
  auto add = model.add_options();
  add("global-batch-size", po::value(&o.global_batch_size)->default_value(o.global_batch_size),
      "sequences per optimizer step");
  po::options_description cluster("Cluster");
  add = cluster.add_options();
  add("cluster", po::value(&o.cluster)->default_value(o.cluster),
      "cluster FILE (INI, docs/PLANNER.md) or preset: dgx-a100 | dgx-h100 | h200 | l40s-pcie");
  add("nodes", po::value(&o.nodes)->default_value(o.nodes), "nodes of the job");
  add("ranks", po::value(&o.ranks),
      "ranks of the job, placed as --map-by says (default: every GPU of --nodes; on a "
      "calibrated CPU cluster, ranks beyond its cores share them)");
  add("map-by", po::value(&o.map_by)->default_value(o.map_by),
      "where ranks sit, as mpirun's --map-by: slot (consecutive ranks fill a node) | node "
      "(round robin over the nodes)");
  add("calibrate", po::value(&o.calibrate),
      "measure this machine and write a CPU cluster FILE, then exit (run under mpiexec with "
      "2 or more ranks for the MPI figures; docs/PLANNER.md)");
  add("calibrate-seconds", po::value(&o.calibrate_seconds)->default_value(o.calibrate_seconds),
      "rough time budget of --calibrate, and of --calibrate-turns");
  add("calibrate-turns", po::value(&o.calibrate_turns),
      "add to the CPU cluster FILE written by --calibrate what ranks taking turns on its cores "
      "pay each time two of them meet (a blocking collective, a pipeline message), then exit "
      "(run under mpiexec with as many ranks as the layouts to be priced, at least 2 a core; "
      "docs/PLANNER.md)");
  po::options_description layout(
      "Layout (train's names: each one given is fixed, each one left out is enumerated)");
  add = layout.add_options();
  add("tp", po::value(&o.tp), "tensor-parallel size");
  add("pp", po::value(&o.pp), "pipeline-parallel size");
  add("dp", po::value(&o.dp), "data-parallel size (checked against GPUs / (tp * pp))");
  add("schedule", po::value(&o.schedule), "1f1b | gpipe | interleaved | zb-h1");
  add("virtual-stages", po::value(&o.virtual_stages), "model chunks per stage (interleaved)");
  add("micro-batch-size", po::value(&o.micro_batch_size), "sequences per microbatch");
  add("sequence-parallel", po::value(&o.sequence_parallel)->implicit_value(true),
      "sequence parallelism (=false fixes it off)");
  add("recompute", po::value(&o.recompute), "none | selective | full");
  add("recompute-layers", po::value(&o.recompute_layers),
      "with full: the first N blocks of each model chunk (0 = all)");
  add("distributed-optimizer", po::value(&o.distributed_optimizer)->implicit_value(true),
      "ZeRO-1 over dp (=false fixes it off)");
  add("precision", po::value(&o.precision),
      "fp32 | bf16 | megatron-mixed (16-bit weights and activations, fp32 master weights, as "
      "Megatron-LM runs; priced only when named)");
  add("allow-tp-across-nodes", po::bool_switch(&o.allow_tp_across_nodes),
      "let a tp group span nodes");
  po::options_description output("Output");
  add = output.add_options();
  add("json", po::bool_switch(&o.json), "one JSON object per layout, best first");
  add("top", po::value(&o.top)->default_value(o.top), "rows of the table");
  all.add(model).add(cluster).add(layout).add(output);
  return all;
}

void finish_plan_options(PlanOptions& o) {
  apply_model_preset(o.model_preset, o.given, o.model);
  o.model.validate();
  GPT_INPUT_CHECK(o.global_batch_size >= 1, "--global-batch-size must be at least 1");
  GPT_INPUT_CHECK(o.nodes >= 1, "--nodes must be at least 1 (got " << o.nodes << ")");
  GPT_INPUT_CHECK(!o.was_given("ranks") || o.ranks >= 1,
                  "--ranks must be at least 1 (got " << o.ranks << ")");
  GPT_INPUT_CHECK(o.calibrate_seconds > 0, "--calibrate-seconds must be above 0");
  GPT_INPUT_CHECK(o.calibrate.empty() || o.calibrate_turns.empty(),
                  "--calibrate and --calibrate-turns are separate runs: first --calibrate FILE, "
                  "then --calibrate-turns FILE with more ranks");
  GPT_INPUT_CHECK(o.map_by == "slot" || o.map_by == "node",
                  "--map-by must be one of slot | node (got '" << o.map_by << "')");
  GPT_INPUT_CHECK(o.top >= 1, "--top must be at least 1");
  for (const char* name : {"tp", "pp", "dp", "virtual-stages", "micro-batch-size"}) {
    const int64_t value = std::string(name) == "micro-batch-size" ? o.micro_batch_size
                          : std::string(name) == "tp"             ? o.tp
                          : std::string(name) == "pp"             ? o.pp
                          : std::string(name) == "dp"             ? o.dp
                                                                  : o.virtual_stages;
    GPT_INPUT_CHECK(!o.was_given(name) || value >= 1,
                    "--" << name << " must be at least 1 (got " << value << ")");
  }
  GPT_INPUT_CHECK(o.recompute_layers >= 0, "--recompute-layers must be at least 0");
  GPT_INPUT_CHECK(
      schedule_from_name(o.schedule),
      "--schedule must be one of 1f1b | gpipe | interleaved | zb-h1 (got '" << o.schedule << "')");
  GPT_INPUT_CHECK(
      recompute_from_name(o.recompute),
      "--recompute must be one of none | selective | full (got '" << o.recompute << "')");
  GPT_INPUT_CHECK(
      regime_from_name(o.precision),
      "--precision must be one of fp32 | bf16 | megatron-mixed (got '" << o.precision << "')");
}

int job_ranks(const PlanOptions& o, const Cluster& cluster) {
  const int gpus = o.nodes * cluster.gpus_per_node;
  if (!o.was_given("ranks")) return gpus;
  GPT_INPUT_CHECK(o.ranks <= gpus, "--ranks " << o.ranks << " exceeds the " << gpus
                                              << " GPUs of --nodes " << o.nodes);
  return o.ranks;
}

std::vector<PlanLayout> enumerate_layouts(const PlanOptions& o, const Cluster& cluster) {
  const int world = job_ranks(o, cluster);
  const auto precisions = values<PrecisionRegime>(o, "precision", *regime_from_name(o.precision),
                                                  {PrecisionRegime::kBf16, PrecisionRegime::kFp32});
  std::vector<PlanLayout> layouts;
  std::string first_error;
  for (int64_t tp : values<int64_t>(o, "tp", o.tp, divisors(world)))
    for (int64_t pp : values<int64_t>(o, "pp", o.pp, divisors(world))) {
      const int dp = static_cast<int>(world / (tp * pp));
      for (const auto& [schedule, v] : schedule_choices(o, static_cast<int>(pp)))
        for (int64_t mb : values<int64_t>(o, "micro-batch-size", o.micro_batch_size,
                                          divisors(o.global_batch_size / std::max(1, dp))))
          for (const Savings& s : saving_choices(o, static_cast<int>(tp), static_cast<int>(pp), dp))
            for (PrecisionRegime precision : precisions) {
              PlanLayout l;
              l.tp = static_cast<int>(tp);
              l.pp = static_cast<int>(pp);
              l.dp = std::max(1, dp);
              l.schedule = schedule;
              l.virtual_stages = v;
              l.micro_batch = mb;
              l.microbatches = static_cast<int>(o.global_batch_size / (l.dp * mb));
              l.recompute = s.recompute;
              l.recompute_layers = s.recompute_layers;
              l.sequence_parallel = s.sequence_parallel;
              l.distributed_optimizer = s.distributed_optimizer;
              l.precision = precision;
              l.placement = {o.map_by == "node", o.nodes};
              try {
                check_layout(o, cluster, l);
                layouts.push_back(l);
              } catch (const Error& e) {
                if (first_error.empty()) first_error = e.what();
              }
            }
    }
  GPT_INPUT_CHECK(!layouts.empty(),
                  (first_error.empty() ? "no layout satisfies the given options" : first_error));
  return layouts;
}

}  // namespace gpt
