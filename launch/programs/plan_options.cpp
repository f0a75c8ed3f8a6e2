// plan's options (see plan_options.h).
#include "launch/programs/plan_options.h"

#include <algorithm>
#include <cmath>

#include "framework/check.h"
#include "framework/json.h"
#include "launch/runtime/typed_options.h"
#include "launch/training/train_options.h"

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
      "Layout (train's names: each one given is fixed, each one left out is enumerated; a switch "
      "given =false is fixed off)");
  add_layout_options(layout, o.layout, o.pipeline_layers, LayoutOptionStyle::kEnumerated);
  add = layout.add_options();
  Layout& l = o.layout;
  add("precision", po::value(&l.precision),
      "fp32 | bf16 | megatron-mixed (16-bit weights and activations, fp32 master weights, as "
      "Megatron-LM runs; priced only when named)");
  add("allow-tp-across-nodes", po::bool_switch(&o.allow_tp_across_nodes),
      "let a tp group span nodes");
  add("memory-headroom", po::value(&o.memory_headroom_gb)->default_value(o.memory_headroom_gb),
      "GB (1e9 bytes) each rank needs beside the buffers the memory model predicts (CUDA context, "
      "NCCL, allocator slack): a layout fits within the GPU's memory less it (train on cuda "
      "reserves 90% of the free memory by default: 8 on an 80 GB GPU matches it)");
  po::options_description serving("Serving (--serve)");
  add = serving.add_options();
  add("serve", po::bool_switch(&o.serve),
      "price serving with continuous batching instead of training: TTFT, TPOT and throughput "
      "of each tp x pp layout (docs/PLANNER.md, \"Serving\")");
  add("prompt-tokens", po::value(&o.prompt_tokens)->default_value(o.prompt_tokens),
      "with --serve: tokens of each request's prompt");
  add("output-tokens", po::value(&o.output_tokens)->default_value(o.output_tokens),
      "with --serve: tokens each request generates");
  add("concurrency", po::value(&o.concurrency_text)->default_value(o.concurrency_text),
      "with --serve: comma-separated counts of requests served at once, a throughput column each");
  add("bytes-per-weight", po::value(&o.bytes_per_weight)->default_value(o.bytes_per_weight),
      "with --serve: 4 (this project's fp32 serving, on the CUDA cores) | 2 (an fp16/bf16 "
      "server on the tensor cores); also the bytes of a cached key or value and an activation");
  po::options_description output("Output");
  add = output.add_options();
  add("json", po::bool_switch(&o.json), "one JSON object per layout, best first");
  add("top", po::value(&o.top)->default_value(o.top), "rows of the table");
  all.add(model).add(cluster).add(layout).add(serving).add(output);
  return all;
}

namespace {

// --concurrency's list: positive counts separated by commas.
std::vector<int64_t> parse_concurrency(const std::string& text) {
  const auto fail = [&] {
    fail_input("--concurrency must be positive counts separated by commas (got " +
               quoted_excerpt(text) + ")");
  };
  std::vector<int64_t> counts;
  size_t start = 0;
  while (true) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    if (item.empty() || item.size() > 9 ||
        item.find_first_not_of("0123456789") != std::string::npos)
      fail();
    counts.push_back(std::stoll(item));
    if (counts.back() < 1) fail();
    if (end == text.size()) return counts;
    start = end + 1;
  }
}

// --serve's own options and the training ones it does not take.
void check_serving_options(PlanOptions& o) {
  const char* serving_only[] = {"prompt-tokens", "output-tokens", "concurrency",
                                "bytes-per-weight"};
  if (!o.serve) {
    for (const char* name : serving_only)
      GPT_INPUT_CHECK(!o.was_given(name), "--" << name << " prices serving: add --serve");
    return;
  }
  for (const char* name :
       {"global-batch-size", "dp", "schedule", "virtual-stages", "pipeline-layers",
        "micro-batch-size", "sequence-parallel", "recompute", "recompute-layers",
        "distributed-optimizer", "precision", "calibrate", "calibrate-turns", "top", "map-by"})
    GPT_INPUT_CHECK(
        !o.was_given(name),
        "--" << name << " prices training; --serve takes --tp, --pp and its own options");
  GPT_INPUT_CHECK(o.prompt_tokens >= 1,
                  "--prompt-tokens must be at least 1 (got " << o.prompt_tokens << ")");
  GPT_INPUT_CHECK(o.output_tokens >= 1,
                  "--output-tokens must be at least 1 (got " << o.output_tokens << ")");
  GPT_INPUT_CHECK(o.prompt_tokens <= o.model.seq_len - o.output_tokens,
                  "--prompt-tokens " << o.prompt_tokens << " + --output-tokens " << o.output_tokens
                                     << " exceed the model's --seq-len " << o.model.seq_len);
  GPT_INPUT_CHECK(o.bytes_per_weight == 4 || o.bytes_per_weight == 2,
                  "--bytes-per-weight must be 4 or 2 (got " << o.bytes_per_weight << ")");
  o.concurrency = parse_concurrency(o.concurrency_text);
}

}  // namespace

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
  GPT_INPUT_CHECK(
      std::isfinite(o.memory_headroom_gb) && o.memory_headroom_gb >= 0,
      "--memory-headroom must be a number of GB, at least 0 (got " << o.memory_headroom_gb << ")");
  check_serving_options(o);
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

void apply_memory_headroom(const PlanOptions& o, Cluster& cluster) {
  const double headroom = o.memory_headroom_gb * kGB;
  GPT_INPUT_CHECK(headroom < cluster.gpu.memory_bytes,
                  "--memory-headroom " << o.memory_headroom_gb << " leaves nothing of the "
                                       << cluster.gpu.memory_bytes / kGB << " GB of a "
                                       << cluster.gpu.name);
  cluster.memory_headroom_bytes = headroom;
}

int job_ranks(const PlanOptions& o, const Cluster& cluster) {
  const int gpus = o.nodes * cluster.gpus_per_node;
  if (!o.was_given("ranks")) return gpus;
  GPT_INPUT_CHECK(o.ranks <= gpus, "--ranks " << o.ranks << " exceeds the " << gpus
                                              << " GPUs of --nodes " << o.nodes);
  return o.ranks;
}

std::vector<PlanLayout> serving_layout_search(const PlanOptions& o, const Cluster& cluster) {
  GPT_INPUT_CHECK(!cluster.cpu.active(),
                  "--serve prices GPU clusters; a CPU machine's serving is measured by "
                  "tests/benchmarks/bench_serve.py");
  return serving_layouts(o.model, cluster, job_ranks(o, cluster), o.nodes, o.allow_tp_across_nodes,
                         o.was_given("tp") ? o.layout.tp : 0, o.was_given("pp") ? o.layout.pp : 0);
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
