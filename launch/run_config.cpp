// Run config serialisation and the resume rules (see run_config.h).
#include "launch/run_config.h"

#include "framework/check.h"
#include "framework/logging.h"
#include "launch/json.h"

namespace gpt {
std::string run_config_json(const TrainOptions& o, const ModelConfig& m) {
  JsonObject j;
  j.add("n_layer", m.n_layer).add("n_head", m.n_head).add("d_model", m.d_model);
  j.add("seq_len", m.seq_len).add("vocab_size", m.vocab_size);
  j.add("seed", o.seed).add("data", o.data).add("val_data", o.val_data);
  j.add("data_order", o.data_order).add("global_batch_size", o.global_batch_size);
  j.add("micro_batch_size", o.micro_batch_size).add("steps", o.steps);
  j.add("optimizer", o.optimizer).add("lr", o.lr).add("min_lr", o.min_lr);
  j.add("warmup_steps", o.warmup_steps).add("weight_decay", o.weight_decay);
  j.add("beta1", o.beta1).add("beta2", o.beta2).add("eps", o.eps).add("momentum", o.momentum);
  j.add("grad_clip", o.grad_clip);
  return j.str();
}

void apply_checkpoint_config(TrainOptions& o, const CheckpointReader& checkpoint, bool resuming) {
  const std::string file = checkpoint.path();
  const auto cfg = parse_flat_json(checkpoint.meta().config_json, file + ": attribute config");
  auto field = [&](const std::string& key) -> const std::string& {
    auto it = cfg.find(key);
    GPT_INPUT_CHECK(it != cfg.end(), file << ": attribute config has no '" << key << "'");
    return it->second;
  };
  // Model shape, seed and data set come from the file; a conflicting option is an error.
  auto take_int = [&](const char* option, const char* key, int64_t& target) {
    const int64_t value = std::stoll(field(key));
    GPT_INPUT_CHECK(!o.was_given(option) || target == value,
                    "--" << option << " " << target << " conflicts with the checkpoint " << file
                         << " (" << key << " = " << value << ")");
    target = value;
  };
  take_int("n-layer", "n_layer", o.model.n_layer);
  take_int("n-head", "n_head", o.model.n_head);
  take_int("d-model", "d_model", o.model.d_model);
  take_int("seq-len", "seq_len", o.model.seq_len);
  o.model.vocab_size = std::stoll(field("vocab_size"));
  const uint64_t seed = checkpoint.meta().seed;
  GPT_INPUT_CHECK(
      !o.was_given("seed") || o.seed == seed,
      "--seed " << o.seed << " conflicts with the checkpoint " << file << " (seed " << seed << ")");
  o.seed = seed;
  if (resuming) {  // fine-tuning (--init-from) may train on other data
    const std::string& data = field("data");
    GPT_INPUT_CHECK(!o.was_given("data") || o.data == data,
                    "--data " << o.data << " conflicts with the checkpoint " << file
                              << " (trained on " << (data.empty() ? "the built-in corpus" : data)
                              << ")");
    o.data = data;
    if (!o.was_given("val-data")) o.val_data = field("val_data");
    if (!o.was_given("data-order")) o.data_order = field("data_order");
  }
  if (!resuming) return;
  // Optimizer options: the file's, unless given again.
  const std::string& optimizer = field("optimizer");
  GPT_INPUT_CHECK(!o.was_given("optimizer") || o.optimizer == optimizer,
                  "--optimizer " << o.optimizer << " conflicts with the checkpoint " << file
                                 << " (its optimizer state is " << optimizer << ")");
  o.optimizer = optimizer;
  auto take_real = [&](const char* option, const char* key, double& target) {
    const double value = std::stod(field(key));
    if (o.was_given(option) && target != value) {
      GPT_LOG0("--" << option << " " << target << " overrides the checkpoint's " << value);
      return;
    }
    target = value;
  };
  take_real("lr", "lr", o.lr);
  take_real("min-lr", "min_lr", o.min_lr);
  take_real("weight-decay", "weight_decay", o.weight_decay);
  take_real("beta1", "beta1", o.beta1);
  take_real("beta2", "beta2", o.beta2);
  take_real("eps", "eps", o.eps);
  take_real("momentum", "momentum", o.momentum);
  take_real("grad-clip", "grad_clip", o.grad_clip);
  double warmup = static_cast<double>(o.warmup_steps);
  take_real("warmup-steps", "warmup_steps", warmup);
  o.warmup_steps = static_cast<int64_t>(warmup);
}

std::string checkpoint_to_load(const TrainOptions& o) {
  if (!o.init_from.empty()) return o.init_from;
  if (o.resume != "auto") return o.resume;
  std::vector<std::string> skipped;
  const std::string path = find_latest_checkpoint(o.checkpoint_dir, &skipped);
  for (const std::string& why : skipped) GPT_WARN0("skipping checkpoint: " << why);
  if (path.empty())
    GPT_LOG0("--resume auto: no valid checkpoint in " << o.checkpoint_dir << "; starting fresh");
  return path;
}

}  // namespace gpt
