// The layout's arithmetic and rules (see layout.h).
#include "parallel/layout.h"

#include <algorithm>
#include <iterator>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "parallel/stage_layout.h"

namespace gpt {

// The names --precision takes, in the enum's order.
constexpr const char* kRegimeNames[] = {"fp32", "bf16", "megatron-mixed"};
static_assert(std::size(kRegimeNames) == static_cast<size_t>(PrecisionRegime::kMegatronMixed) + 1);

const char* regime_name(PrecisionRegime p) {
  return kRegimeNames[static_cast<size_t>(p)];
}

// What each regime keeps in which precision, in the enum's order.
constexpr const char* kRegimeDescriptions[] = {
    "this project's fp32: every tensor in fp32, matrix products at the TF32 peak",
    "this project's bf16: bf16 compute copies of the weights, matrix-product operands, "
    "residual stream, activations kept for the backward, tp and pp messages; fp32 arithmetic, "
    "norm statistics, gradients, master weights and AdamW state",
    "Megatron-LM's mixed precision (not a train regime): 16-bit weights, activations and "
    "gradients, fp32 main gradients, master weights and Adam state, dropout 0.1"};
static_assert(std::size(kRegimeDescriptions) == std::size(kRegimeNames));

const char* regime_description(PrecisionRegime p) {
  return kRegimeDescriptions[static_cast<size_t>(p)];
}

std::string Layout::pipeline_layers_text() const {
  if (pipeline_layers_auto) return "auto";
  if (pipeline_layers.empty()) return "even";
  std::string text;
  for (int64_t c : pipeline_layers) {
    if (!text.empty()) text += ',';
    text += std::to_string(c);
  }
  return text;
}

void validate_global_batch_size(int64_t global_batch_size) {
  GPT_INPUT_CHECK(global_batch_size >= 1 && global_batch_size <= kMaxGlobalBatchSize,
                  "--global-batch-size must be in [1, " << kMaxGlobalBatchSize << "] (got "
                                                        << global_batch_size << ")");
}

int Layout::step_microbatches(int64_t global_batch_size, int world) const {
  validate_global_batch_size(global_batch_size);
  const int64_t d = data_parallel(world);
  // micro_batch <= G / d first: d x micro_batch cannot then overflow.
  GPT_INPUT_CHECK(
      d >= 1 && micro_batch <= global_batch_size / d && global_batch_size % (d * micro_batch) == 0,
      "--global-batch-size " << global_batch_size << " is not a multiple of dp " << d
                             << " x --micro-batch-size " << micro_batch);
  return static_cast<int>(global_batch_size / (d * micro_batch));
}

int64_t Layout::chunk_layers(const ModelConfig& model, int stage, int chunk) const {
  return virtual_stage_spec(model, pp, virtual_stages, stage, chunk, pipeline_layers).n_layers;
}

int64_t Layout::most_layers_per_chunk(const ModelConfig& model) const {
  if (pipeline_layers.empty())
    return (model.n_layer + static_cast<int64_t>(pp) * virtual_stages - 1) /
           (static_cast<int64_t>(pp) * virtual_stages);
  return *std::max_element(pipeline_layers.begin(), pipeline_layers.end());
}

int64_t Layout::recomputed_layers(int64_t layers) const {
  if (recompute != Recompute::kFull) return 0;
  return recompute_layers <= 0 ? layers : std::min<int64_t>(recompute_layers, layers);
}

void Layout::validate_sizes() const {
  GPT_INPUT_CHECK(tp >= 1, "--tp must be at least 1 (got " << tp << ")");
  GPT_INPUT_CHECK(pp >= 1, "--pp must be at least 1 (got " << pp << ")");
  GPT_INPUT_CHECK(dp >= 0, "--dp must be at least 1, or 0 to derive it (got " << dp << ")");
  GPT_INPUT_CHECK(virtual_stages >= 1,
                  "--virtual-stages must be at least 1 (got " << virtual_stages << ")");
  GPT_INPUT_CHECK(micro_batch >= 1,
                  "--micro-batch-size must be at least 1 (got " << micro_batch << ")");
  GPT_INPUT_CHECK(recompute_layers >= 0, "--recompute-layers must be at least 0 (0 = all)");
}

void Layout::validate_grid(int world, const std::string& units, const std::string& job) const {
  validate_sizes();
  validate_world(world, units, job);
}

void Layout::validate_world(int world, const std::string& units, const std::string& job) const {
  const int64_t model_ranks = int64_t{tp} * pp;  // in 64 bits: two large sizes wrap an int to 0
  GPT_INPUT_CHECK(world % model_ranks == 0, "--tp " << tp << " x --pp " << pp
                                                    << " does not divide the " << world << " "
                                                    << units << " " << job);
  const auto derived = static_cast<int>(world / model_ranks);
  GPT_INPUT_CHECK(dp == 0 || dp == derived, "--dp " << dp << " disagrees with " << world << " "
                                                    << units << " / (--tp " << tp << " x --pp "
                                                    << pp << ") = " << derived);
}

void Layout::validate(const ModelConfig& model, int world, const std::string& units,
                      const std::string& job) const {
  validate_sizes();
  GPT_INPUT_CHECK(model.n_head % tp == 0,
                  "--tp " << tp << " does not divide --n-head " << model.n_head);
  family_of(model).validate_tp(model, tp);
  validate_world(world, units, job);
  if (!pipeline_layers.empty()) {
    const auto text = [&] { return pipeline_layers_text(); };  // built only for a message
    const int64_t parts = static_cast<int64_t>(pp) * virtual_stages;
    GPT_INPUT_CHECK(static_cast<int64_t>(pipeline_layers.size()) == parts,
                    "--pipeline-layers " << text() << " names " << pipeline_layers.size()
                                         << " model chunks but --pp " << pp
                                         << " x --virtual-stages " << virtual_stages << " is "
                                         << parts);
    int64_t total = 0;
    for (size_t vs = 0; vs < pipeline_layers.size(); ++vs) {
      GPT_INPUT_CHECK(pipeline_layers[vs] >= fewest_chunk_layers(static_cast<int64_t>(vs), parts),
                      "--pipeline-layers " << text() << ": model chunk " << vs
                                           << " holds neither the embedding nor the head and "
                                              "needs at least one layer");
      total += pipeline_layers[vs];
    }
    GPT_INPUT_CHECK(total == model.n_layer, "--pipeline-layers "
                                                << text() << " adds up to " << total
                                                << " layers, not --n-layer " << model.n_layer);
  }
  // auto needs a layer for every chunk but those beside the embedding and the head.
  GPT_INPUT_CHECK(
      !pipeline_layers_auto || model.n_layer >= static_cast<int64_t>(pp) * virtual_stages - 2,
      "--pipeline-layers auto: --n-layer " << model.n_layer << " is too few for --pp " << pp
                                           << " x --virtual-stages " << virtual_stages
                                           << " model chunks");
  GPT_INPUT_CHECK(pipeline_layers_auto || !pipeline_layers.empty() ||
                      model.n_layer % (static_cast<int64_t>(pp) * virtual_stages) == 0,
                  "--n-layer " << model.n_layer << " does not split evenly over --pp " << pp
                               << " x --virtual-stages " << virtual_stages << " model chunks");
  GPT_INPUT_CHECK(!sequence_parallel || model.seq_len % tp == 0,
                  "--sequence-parallel needs --seq-len " << model.seq_len
                                                         << " to be a multiple of --tp " << tp);
  GPT_INPUT_CHECK(recompute_layers == 0 || recompute == Recompute::kFull,
                  "--recompute-layers needs --recompute full");
  // A chunk of fewer blocks recomputes all of them (recomputed_layers); a count above every
  // chunk's is a mistake for 0 (all).
  const int64_t most = most_layers_per_chunk(model);
  GPT_INPUT_CHECK(recompute_layers <= most, "--recompute-layers "
                                                << recompute_layers << " is more than the " << most
                                                << " layers of the largest model chunk");
}

void Layout::validate_step(const ModelConfig& model, int world, int64_t global_batch_size,
                           const std::string& units, const std::string& job) const {
  validate(model, world, units, job);
  step_schedule(global_batch_size, world);  // the schedule's own rules
}

Schedule Layout::step_schedule(int64_t global_batch_size, int world) const {
  return make_schedule(schedule, pp, step_microbatches(global_batch_size, world), virtual_stages);
}

std::string describe(const Layout& l) {
  return GPT_MSG(
      "tp " << l.tp << " pp " << l.pp << " dp " << l.dp << " " << schedule_name(l.schedule)
            << (l.virtual_stages > 1 ? GPT_MSG(" v " << l.virtual_stages) : "") << " mb "
            << l.micro_batch << (l.sequence_parallel ? " sp" : "") << " recompute "
            << recompute_name(l.recompute) << (l.distributed_optimizer ? " dist-opt" : "")
            << (l.precision ? GPT_MSG(" " << regime_name(*l.precision)) : ""));
}

}  // namespace gpt
