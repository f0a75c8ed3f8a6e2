// The options every program shares (see run_options.h).
#include "launch/runtime/run_options.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "framework/json.h"
#include "launch/runtime/typed_options.h"

namespace po = boost::program_options;

namespace gpt {

void add_layout_options(po::options_description& desc, Layout& l, std::string& pipeline_layers,
                        LayoutOptionStyle style) {
  const bool enumerated = style == LayoutOptionStyle::kEnumerated;
  // A value option: with the field's value as its default, or with none to enumerate.
  const auto sized = [enumerated](auto* field) {
    auto* value = po::value(field);
    return enumerated ? value : value->default_value(*field);
  };
  const auto named = [enumerated](auto* field) {
    return enumerated ? po::value(field) : choice(field);
  };
  const auto flag = [enumerated](bool* field) {
    return enumerated ? po::value(field)->implicit_value(true) : po::bool_switch(field);
  };
  auto add = desc.add_options();
  add("tp", sized(&l.tp), "tensor-parallel size (ranks of one node)");
  add("pp", sized(&l.pp), "pipeline-parallel size (stages)");
  add("dp", sized(&l.dp), "data-parallel size; 0 = world / (tp * pp)");
  add("schedule", named(&l.schedule),
      ("pipeline schedule: " + choice_list<ScheduleKind>(false)).c_str());
  add("virtual-stages", sized(&l.virtual_stages), "model chunks per stage (interleaved 1F1B)");
  add("pipeline-layers", sized(&pipeline_layers),
      enumerated ? "blocks per pipeline stage, as train takes them: even, auto, or counts to price "
                   "(pp x virtual-stages of them, which fixes those sizes' product); default: "
                   "even and auto"
                 : kPipelineLayersHelp);
  add("micro-batch-size", sized(&l.micro_batch), "sequences per microbatch");
  add("sequence-parallel", flag(&l.sequence_parallel),
      "split LayerNorm and residual regions along the sequence over the tp ranks (the sequence "
      "length must be a multiple of tp)");
  add("recompute", named(&l.recompute),
      ("activation recomputation: " + choice_list<Recompute>(false) +
       " (selective: the attention's T x T probabilities are rebuilt in the backward; full: each "
       "block keeps only its input and re-runs its forward; docs/MEMORY.md)")
          .c_str());
  add("recompute-layers", sized(&l.recompute_layers),
      "with --recompute full: recompute only the first N blocks of each stage (0 = all)");
  add("distributed-optimizer", flag(&l.distributed_optimizer),
      "ZeRO-1: shard the optimizer state over dp (gradients reduce-scattered per bucket, each dp "
      "rank updates its shard, the weights all-gathered); no effect at dp 1");
  add("grad-reduce-dtype", choice(&l.grad_reduce_dtype),
      "fp32 | bf16: the dp gradient reduction moves float32 (default) or bf16, half the bytes "
      "(each rank's gradients rounded to bf16, summed in float32 and rounded again); the "
      "gradients accumulate in float32 either way");
}

void add_execution_options(po::options_description& desc, ExecutionOptions& o,
                           std::optional<PrecisionRegime>& precision) {
  auto add = desc.add_options();
  add("device", choice(&o.device),
      (choice_list<DeviceKind>(true) + " (auto: cuda when every rank sees a GPU)").c_str());
  add("precision", choice(&precision), "auto | fp32 | bf16 (auto: bf16 on cuda, fp32 on cpu)");
  add("deterministic", po::bool_switch(&o.deterministic),
      "GPU runs repeat bit for bit (fixed cuBLASLt algorithms without split-K reductions)");
  add("gpu-comm", choice(&o.gpu_comm),
      (choice_list<DeviceTransport>(true) +
       ": how device buffers move between ranks (auto: mpi over host staging when ranks share "
       "a GPU, else nccl)")
          .c_str());
  add("memory-limit-gb", po::value(&o.memory_limit_gb)->default_value(o.memory_limit_gb),
      "the most memory (GB, 1e9 bytes) this project's buffers may take per rank: a layout the "
      "memory model predicts above it stops before allocating. On cuda also the device arena "
      "reserved at start-up (0 = 90% of the free memory, split among ranks sharing the GPU); "
      "on cpu 0 = no limit");
  add("threads", po::value(&o.threads)->default_value(o.threads),
      "CPU threads per rank; 0 = the CPUs this rank may run on, shared among the ranks on them, at "
      "most SLURM_CPUS_PER_TASK");
}

void validate_execution_options(const ExecutionOptions& o) {
  GPT_INPUT_CHECK(
      std::isfinite(o.memory_limit_gb) && o.memory_limit_gb >= 0,
      "--memory-limit-gb must be a number of GB, at least 0 (0 = none, or auto on cuda)");
  GPT_INPUT_CHECK(o.threads >= 0, "--threads must be at least 0");
  // More threads than the machine has CPUs only adds contention, and OpenMP fails to start tens
  // of thousands (a crash, not an error).
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  GPT_INPUT_CHECK(cpus <= 0 || o.threads <= cpus, "--threads " << o.threads << " is more than the "
                                                               << cpus << " CPUs of this machine");
}

void add_model_options(po::options_description& desc, std::string& preset, ModelConfig& model,
                       const char* seq_len_help, const char* vocab_size_help) {
  auto add = desc.add_options();
  std::string presets;
  for (const ModelFamily* family : model_families())
    for (const ModelPreset& p : family->presets)
      presets += std::string(presets.empty() ? "" : " | ") + p.name;
  add("model", po::value(&preset)->default_value(""),
      ("preset: " + presets + " (the shape options below override it)").c_str());
  add("arch",
      po::value<std::string>()->default_value("gpt2")->notifier(
          [&model](const std::string& v) { model.arch = parse_arch(v); }),
      "gpt2 | llama (the Llama family: RMSNorm, rotary positions, grouped-query attention, "
      "SwiGLU, no biases; Mistral, Qwen2 and Qwen3 through the options below)");
  add("n-layer", po::value(&model.n_layer)->default_value(model.n_layer), "transformer blocks");
  add("n-head", po::value(&model.n_head)->default_value(model.n_head), "attention heads");
  add("d-model", po::value(&model.d_model)->default_value(model.d_model), "model width");
  add("seq-len", po::value(&model.seq_len)->default_value(model.seq_len), seq_len_help);
  if (vocab_size_help)
    add("vocab-size", po::value(&model.vocab_size)->default_value(model.vocab_size),
        vocab_size_help);
  add("n-kv-head", po::value(&model.n_kv_head)->default_value(0),
      "llama: key/value heads of grouped-query attention (0 = --n-head)");
  add("head-dim", po::value(&model.head_size)->default_value(0),
      "llama: channels per head (0 = --d-model / --n-head)");
  add("ffn-hidden-size", po::value(&model.ffn_hidden)->default_value(0),
      "llama: the MLP's hidden width (0 = 8/3 --d-model rounded up to a multiple of 256)");
  add("rope-theta", po::value(&model.rope_theta)->default_value(model.rope_theta, "10000"),
      "llama: base of the rotary frequencies");
  add("rope-scaling",
      po::value<std::string>()->default_value("none")->notifier([&model](const std::string& v) {
        GPT_INPUT_CHECK(v == "none" || v == "llama3",
                        "--rope-scaling must be none or llama3 (got " << quoted_excerpt(v) << ")");
        model.rope_scaling = {};
        if (v == "llama3") model.rope_scaling.type = RopeScaling::kLlama3;
      }),
      "llama: none | llama3 (Llama 3.1's rescaled frequencies: factor 8, low and high frequency "
      "factors 1 and 4, 8192 original positions)");
  add("norm-eps", po::value(&model.norm_eps)->default_value(model.norm_eps, "1e-05"),
      "llama: RMSNorm's epsilon");
  add("tie-embeddings", po::bool_switch(&model.tie_embeddings),
      "llama: the output head is the token embedding (GPT-2's always is)");
  add("qkv-bias", po::bool_switch(&model.qkv_bias), "llama: biases on q, k and v (Qwen2)");
  add("qk-norm", po::bool_switch(&model.qk_norm),
      "llama: RMSNorm over each head's q and k before the rotation (Qwen3)");
}

namespace {

// What a preset sets, option by option: apply_model_preset copies the fields of the options the
// user did not give.
using FieldCopy = void (*)(ModelConfig& to, const ModelConfig& from);
const std::pair<const char*, FieldCopy> kPresetFields[] = {
    {"arch", [](ModelConfig& t, const ModelConfig& f) { t.arch = f.arch; }},
    {"n-layer", [](ModelConfig& t, const ModelConfig& f) { t.n_layer = f.n_layer; }},
    {"n-head", [](ModelConfig& t, const ModelConfig& f) { t.n_head = f.n_head; }},
    {"d-model", [](ModelConfig& t, const ModelConfig& f) { t.d_model = f.d_model; }},
    {"seq-len", [](ModelConfig& t, const ModelConfig& f) { t.seq_len = f.seq_len; }},
    {"vocab-size", [](ModelConfig& t, const ModelConfig& f) { t.vocab_size = f.vocab_size; }},
};  // and kArchFields (framework/config.h)

}  // namespace

void apply_model_preset(const std::string& preset, const std::set<std::string>& given,
                        ModelConfig& model) {
  if (preset.empty()) return;
  const ModelPreset& found = find_preset(preset);
  const ModelConfig& shape = found.shape;
  for (const auto& [option, copy] : kPresetFields)
    if (!given.count(option) && (option != std::string("vocab-size") || found.sets_vocab))
      copy(model, shape);
  for (const ModelField& field : kArchFields)
    if (!given.count(field.option)) field.copy(model, shape);
}

void set_pipeline_layers(Layout& layout, const std::string& text) {
  layout.pipeline_layers_auto = text == "auto";
  std::vector<int64_t>& counts = layout.pipeline_layers;
  counts.clear();
  if (text == "even" || text == "auto") return;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    // At most 9 digits: stoll cannot overflow, and no model has a billion layers.
    GPT_INPUT_CHECK(!item.empty() && item.size() <= 9 &&
                        item.find_first_not_of("0123456789") == std::string::npos,
                    "--pipeline-layers " << text << ": '" << item
                                         << "' is not a layer count (give even, auto, or counts "
                                            "such as 3,5)");
    counts.push_back(std::stoll(item));
    start = comma + 1;
  }
}

}  // namespace gpt
