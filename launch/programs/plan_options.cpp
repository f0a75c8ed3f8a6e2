// plan's options (see plan_options.h).
#include "launch/programs/plan_options.h"

#include "framework/check.h"
#include "launch/programs/options.h"
#include "launch/programs/typed_options.h"

namespace po = boost::program_options;

namespace gpt {

po::options_description plan_options_description(PlanOptions& o) {
  po::options_description all;
  po::options_description model("Model (train's names)");
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
  Layout& l = o.layout;
  add("tp", po::value(&l.tp), "tensor-parallel size");
  add("pp", po::value(&l.pp), "pipeline-parallel size");
  add("dp", po::value(&l.dp), "data-parallel size (checked against GPUs / (tp * pp))");
  add("schedule", po::value(&l.schedule), "1f1b | gpipe | interleaved | zb-h1");
  add("virtual-stages", po::value(&l.virtual_stages), "model chunks per stage (interleaved)");
  add("pipeline-layers", po::value(&o.pipeline_layers),
      "blocks per pipeline stage, as train takes them: even, auto, or counts to price (pp x "
      "virtual-stages of them, which fixes those sizes' product); default: even and auto");
  add("micro-batch-size", po::value(&l.micro_batch), "sequences per microbatch");
  add("sequence-parallel", po::value(&l.sequence_parallel)->implicit_value(true),
      "sequence parallelism (=false fixes it off)");
  add("recompute", po::value(&l.recompute), "none | selective | full");
  add("recompute-layers", po::value(&l.recompute_layers),
      "with full: the first N blocks of each model chunk (0 = all)");
  add("distributed-optimizer", po::value(&l.distributed_optimizer)->implicit_value(true),
      "ZeRO-1 over dp (=false fixes it off)");
  add("precision", po::value(&l.precision),
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
  validate_global_batch_size(o.global_batch_size);
  GPT_INPUT_CHECK(o.nodes >= 1 && o.nodes <= kMaxNodes,
                  "--nodes must be in [1, " << kMaxNodes << "] (got " << o.nodes << ")");
  GPT_INPUT_CHECK(!o.was_given("ranks") || o.ranks >= 1,
                  "--ranks must be at least 1 (got " << o.ranks << ")");
  GPT_INPUT_CHECK(o.calibrate_seconds > 0, "--calibrate-seconds must be above 0");
  GPT_INPUT_CHECK(o.calibrate.empty() || o.calibrate_turns.empty(),
                  "--calibrate and --calibrate-turns are separate runs: first --calibrate FILE, "
                  "then --calibrate-turns FILE with more ranks");
  GPT_INPUT_CHECK(o.map_by == "slot" || o.map_by == "node",
                  "--map-by must be one of slot | node (got '" << o.map_by << "')");
  GPT_INPUT_CHECK(o.top >= 1, "--top must be at least 1");
  // The layout's other rules need the job's size (enumerate_layouts).
  GPT_INPUT_CHECK(!o.was_given("dp") || o.layout.dp >= 1,
                  "--dp must be at least 1 (got " << o.layout.dp << ")");
  o.layout.validate_sizes();
  if (!o.pipeline_layers.empty()) {
    set_pipeline_layers(o.layout, o.pipeline_layers);
    o.splits = o.layout.pipeline_layers_auto ? PipelineSplits::kBalanced : PipelineSplits::kGiven;
    o.layout.pipeline_layers_auto = false;  // plan's layouts are priced at even, then balanced
  }
}

int job_ranks(const PlanOptions& o, const Cluster& cluster) {
  const int gpus = o.nodes * cluster.gpus_per_node;
  if (!o.was_given("ranks")) return gpus;
  GPT_INPUT_CHECK(o.ranks <= gpus, "--ranks " << o.ranks << " exceeds the " << gpus
                                              << " GPUs of --nodes " << o.nodes);
  return o.ranks;
}

LayoutSearch layout_search(const PlanOptions& o, const Cluster& cluster) {
  LayoutSearch s;
  s.model = o.model;
  s.global_batch_size = o.global_batch_size;
  s.world = job_ranks(o, cluster);
  s.nodes = o.nodes;
  s.placement = {o.map_by == "node", o.nodes};
  s.allow_tp_across_nodes = o.allow_tp_across_nodes;
  s.fixed = o.layout;
  for (const char* name :
       {"tp", "pp", "dp", "schedule", "virtual-stages", "micro-batch-size", "sequence-parallel",
        "recompute", "recompute-layers", "distributed-optimizer", "precision"})
    if (o.was_given(name)) s.fixed_options.insert(name);
  return s;
}

}  // namespace gpt
