// Run config serialisation and the resume rules (see run_config.h).
#include "launch/training/run_config.h"

#include <cctype>
#include <filesystem>
#include <sstream>
#include <type_traits>
#include <variant>

#include "framework/check.h"
#include "framework/families/model_family.h"
#include "framework/io/checkpoint_directory.h"
#include "framework/io/hf_extras.h"
#include "framework/io/shard_record.h"
#include "framework/json.h"
#include "framework/logging.h"
#include "framework/user_files.h"

namespace gpt {

std::string run_config_json(const TrainOptions& o, const ModelConfig& m) {
  Json j = m;
  j["seed"] = o.seed;
  j["data"] = absolute_data_spec(o.data);
  j["val_data"] = absolute_data_spec(o.val_data);
  j["data_order"] = data_order_name(o.data_order);
  j["global_batch_size"] = o.global_batch_size;
  j["micro_batch_size"] = o.layout.micro_batch;
  // Informational (a resume takes the layout from its command line): the split the run used,
  // and --pipeline-layers as given (auto chose the split).
  j["pipeline_layers"] = o.layout.pipeline_layers_text();
  j["pipeline_layers_option"] = o.pipeline_layers;
  j["steps"] = o.steps;
  j["optimizer"] = optimizer_name(o.optimizer);
  j["lr"] = o.lr;
  j["min_lr"] = o.min_lr;
  j["warmup_steps"] = o.warmup_steps;
  j["weight_decay"] = o.weight_decay;
  j["beta1"] = o.beta1;
  j["beta2"] = o.beta2;
  j["eps"] = o.eps;
  j["momentum"] = o.momentum;
  j["grad_clip"] = o.grad_clip;
  j["eval_every"] = o.eval_every;
  j["eval_windows"] = o.eval_windows;
  // How the run reports and saves: a requeued `--resume auto` continues as it was.
  j["save_every"] = o.save_every;
  j["log_every"] = o.log_every;
  j["metrics"] = o.metrics.empty() ? "" : std::filesystem::absolute(o.metrics).string();
  if (!o.hf_extras.empty()) j["hf"] = parse_json_object(o.hf_extras, "the run's hf fields");
  return j.dump();
}

namespace {

// A stored enum option back from its name (from_name: the options' parser); a name this
// program does not know is an error.
template <typename E>
E stored_choice(const Json& cfg, const char* key, std::optional<E> (*from_name)(const std::string&),
                const std::string& what) {
  const std::string text = json_field<std::string>(cfg, key, what);
  const std::optional<E> kind = from_name(text);
  GPT_INPUT_CHECK(kind.has_value(), what << ": unknown " << key << " '" << text << "'");
  return *kind;
}

// An option's value as the log shows it.
template <typename T>
std::string shown(const T& value) {
  std::ostringstream text;
  text << value;
  return text.str();
}
std::string shown(const std::string& value) {
  return value.empty() ? "none" : value;
}
std::string shown(DataOrder value) {
  return data_order_name(value);
}

// A training option the checkpoint stored under `key`: the file's value unless the option was
// given again (then recorded in from_checkpoint, for errors), and a given value that differs
// from the file's is logged ("--steps 2000 (checkpoint: 1200)").
template <typename T>
void take_stored(TrainOptions& o, const char* option, const char* key, const std::string& file,
                 T& target, const T& stored) {
  if (!o.was_given(option)) {
    target = stored;
    // A file's string goes into an error line: quoted and cut, as any text from outside.
    std::string value = shown(stored);
    if constexpr (!std::is_arithmetic_v<T>) value = quoted_excerpt(value);
    o.from_checkpoint[option] = GPT_MSG("the checkpoint " << file << " holds " << key << " = "
                                                          << value << " in its config");
  } else if (target != stored) {
    GPT_LOG0("--" << option << " " << shown(target) << " (checkpoint: " << shown(stored) << ")");
  }
}

// As take_stored for a number or string under `key`; a key the file lacks (written before it
// was stored) leaves the option as it is.
template <typename T>
void take_field(TrainOptions& o, const Json& cfg, const char* option, const char* key,
                const std::string& file, T& target) {
  const std::string what = file + ": attribute config";
  if (cfg.contains(key)) take_stored(o, option, key, file, target, json_field<T>(cfg, key, what));
}

// The numeric training options a resumed run continues with, by option and config key (the
// layout's micro-batch size, the validation data and the data order are taken beside them).
using NumericField = std::variant<int64_t TrainOptions::*, double TrainOptions::*>;
struct StoredNumber {
  const char* option;
  const char* key;
  NumericField field;
};
const StoredNumber kStoredNumbers[] = {
    {"global-batch-size", "global_batch_size", &TrainOptions::global_batch_size},
    {"steps", "steps", &TrainOptions::steps},
    {"lr", "lr", &TrainOptions::lr},
    {"min-lr", "min_lr", &TrainOptions::min_lr},
    {"warmup-steps", "warmup_steps", &TrainOptions::warmup_steps},
    {"weight-decay", "weight_decay", &TrainOptions::weight_decay},
    {"beta1", "beta1", &TrainOptions::beta1},
    {"beta2", "beta2", &TrainOptions::beta2},
    {"eps", "eps", &TrainOptions::eps},
    {"momentum", "momentum", &TrainOptions::momentum},
    {"grad-clip", "grad_clip", &TrainOptions::grad_clip},
    {"eval-every", "eval_every", &TrainOptions::eval_every},
    {"eval-windows", "eval_windows", &TrainOptions::eval_windows},
    {"save-every", "save_every", &TrainOptions::save_every},
    {"log-every", "log_every", &TrainOptions::log_every},
};

// Every training option a resumed run continues with (docs/DESIGN.md "Checkpoint"): batch sizes,
// --steps, the learning-rate schedule, the optimizer's hyper-parameters, the evaluation
// cadence, the validation data, and how the run saves and reports (--save-every, --log-every,
// --metrics); the layout, schedule and checkpoint folder options are the command line's.
void take_run_options(TrainOptions& o, const Json& cfg, const std::string& file) {
  for (const StoredNumber& n : kStoredNumbers)
    std::visit([&](auto member) { take_field(o, cfg, n.option, n.key, file, o.*member); }, n.field);
  take_field(o, cfg, "micro-batch-size", "micro_batch_size", file, o.layout.micro_batch);
  take_field(o, cfg, "val-data", "val_data", file, o.val_data);
  take_field(o, cfg, "metrics", "metrics", file, o.metrics);
  if (cfg.contains("data_order"))
    take_stored(
        o, "data-order", "data_order", file, o.data_order,
        stored_choice(cfg, "data_order", data_order_from_name, file + ": attribute config"));
}

}  // namespace

void apply_checkpoint_config(TrainOptions& o, const CheckpointReader& checkpoint, bool resuming) {
  const std::string file = checkpoint.path();
  const std::string what = file + ": attribute config";
  const Json cfg = parse_json_object(checkpoint.meta().config_json, what);
  // Model shape, seed and data set come from the file; a conflicting option is an error.
  const ModelConfig stored = model_config_from_json(cfg, what);
  checkpoint.check_holds_model(stored);
  auto take_shape = [&](const char* option, const char* key, int64_t value, int64_t& target) {
    GPT_INPUT_CHECK(!o.was_given(option) || target == value,
                    "--" << option << " " << target << " conflicts with the checkpoint " << file
                         << " (" << key << " = " << value << ")");
    target = value;
  };
  take_shape("n-layer", "n_layer", stored.n_layer, o.model.n_layer);
  take_shape("n-head", "n_head", stored.n_head, o.model.n_head);
  take_shape("d-model", "d_model", stored.d_model, o.model.d_model);
  o.model.vocab_size = stored.vocab_size;
  // The architecture and the Llama family's options come from the file as well.
  const ModelConfig& m = o.model;
  const auto agrees = [&](const char* option, bool same) {
    GPT_INPUT_CHECK(!o.was_given(option) || same,
                    "--" << option << " conflicts with the checkpoint " << file << " (a "
                         << arch_name(stored.arch) << " model; its config holds the shape)");
  };
  for (const ModelField& field : kArchFields) agrees(field.option, field.same(m, stored));
  const int64_t seq_len = o.model.seq_len;
  o.model = stored;
  o.model.seq_len = seq_len;
  // Resumed or fine-tuned, the model is still the imported one: its Hugging Face fields go on.
  const Json extras = hf_extras_from_checkpoint(cfg, what);
  o.hf_extras = extras.empty() ? "" : extras.dump();
  const uint64_t seed = checkpoint.meta().seed;
  if (!resuming) {
    // Fine-tuning: a new --seed, and a --seq-len up to the file's learned positions (GPT-2's;
    // the Llama family's rotary positions take any).
    if (!o.was_given("seed")) o.seed = seed;
    if (!o.was_given("seq-len")) o.model.seq_len = stored.seq_len;
    if (!describe(stored).learned_positions()) return;
    GPT_INPUT_CHECK(o.model.seq_len <= stored.seq_len,
                    "--seq-len " << o.model.seq_len << " is longer than the " << stored.seq_len
                                 << " positions the checkpoint " << file << " learned");
    if (o.model.seq_len < stored.seq_len)
      GPT_LOG0("--seq-len " << o.model.seq_len << ": the checkpoint's " << stored.seq_len
                            << " positions truncated to the first " << o.model.seq_len);
    return;  // fine-tuning may train on other data and optimizers
  }
  take_shape("seq-len", "seq_len", stored.seq_len, o.model.seq_len);
  GPT_INPUT_CHECK(
      !o.was_given("seed") || o.seed == seed,
      "--seed " << o.seed << " conflicts with the checkpoint " << file << " (seed " << seed << ")");
  o.seed = seed;
  // The data: the checkpoint's unless --data names the same files (any path that resolves to
  // the recorded one), or other files the recorded shards' tokens and bytes then identify.
  const std::string data = json_field<std::string>(cfg, "data", what);
  const bool same_data = o.data == data || absolute_data_spec(o.data) == data;
  const bool shards_decide = !data.empty() && !o.data.empty() && cfg.contains("data_shards");
  GPT_INPUT_CHECK(!o.was_given("data") || same_data || shards_decide,
                  "--data " << o.data << " conflicts with the checkpoint " << file
                            << " (trained on " << (data.empty() ? "the built-in corpus" : data)
                            << ")");
  if (!o.was_given("data")) {
    o.data = data;
    if (!data.empty()) GPT_LOG0("data: " << data << " (the checkpoint's)");
  }
  const std::string val_data =
      cfg.contains("val_data") ? json_field<std::string>(cfg, "val_data", what) : "";
  if (o.was_given("val-data") && absolute_data_spec(o.val_data) == val_data) o.val_data = val_data;
  const OptimizerKind optimizer = stored_choice(cfg, "optimizer", optimizer_from_name, what);
  GPT_INPUT_CHECK(!o.was_given("optimizer") || o.optimizer == optimizer,
                  "--optimizer " << optimizer_name(o.optimizer) << " conflicts with the checkpoint "
                                 << file << " (its optimizer state is " << optimizer_name(optimizer)
                                 << ")");
  o.optimizer = optimizer;
  take_run_options(o, cfg, file);
}

namespace {

// Whether `message` names --option as a whole word (not --min-lr for --lr).
bool names_option(const std::string& message, const std::string& option) {
  const std::string flag = "--" + option;
  for (size_t at = message.find(flag); at != std::string::npos; at = message.find(flag, at + 1)) {
    const size_t after = at + flag.size();
    const bool whole =
        after == message.size() ||
        !(std::isalnum(static_cast<unsigned char>(message[after])) || message[after] == '-');
    if (whole && (at == 0 || message[at - 1] == ' ' || message[at - 1] == '(')) return true;
  }
  return false;
}

}  // namespace

void validate_resumed_options(const TrainOptions& o, int world_size) {
  try {
    validate_train_options(o, world_size);
  } catch (const Error& e) {
    const std::string message = e.what();
    std::string sources, flags;
    for (const auto& [option, source] : o.from_checkpoint) {
      if (!names_option(message, option)) continue;
      sources += (sources.empty() ? "" : "; ") + source;
      flags += (flags.empty() ? "--" : ", --") + option;
    }
    if (sources.empty()) throw;
    fail_input(sources + ", which is not valid here: " + message + " (give " + flags +
               " to override the file's value)");
  }
}

std::string checkpoint_to_load(TrainOptions& o, MPI_Comm comm) {
  // A FIFO or a device would block the checkpoint's open: only regular files are read.
  if (o.resume.empty()) {
    require_regular_file(o.init_from, "--init-from");
    return o.init_from;
  }
  if (o.resume != "auto") {
    require_regular_file(o.resume, "--resume");
    return o.resume;
  }
  std::vector<std::string> skipped;
  const std::string path = find_latest_checkpoint(o.checkpoint_dir, &skipped, comm);
  for (const std::string& why : skipped) GPT_WARN0("skipping checkpoint: " << why);
  // With --init-from, the same command starts a fine-tune and continues it after a requeue.
  if (!o.init_from.empty()) {
    if (!path.empty()) {
      GPT_LOG0("--resume auto: continuing " << path << " (--init-from " << o.init_from
                                            << " started this run; not read again)");
      o.init_from.clear();
      return path;
    }
    GPT_LOG0("--resume auto: no checkpoint in " << o.checkpoint_dir
                                                << "; starting from --init-from " << o.init_from);
    o.resume.clear();
    require_regular_file(o.init_from, "--init-from");
    return o.init_from;
  }
  if (path.empty())
    GPT_LOG0("--resume auto: no valid checkpoint in " << o.checkpoint_dir << "; starting fresh");
  return path;
}

}  // namespace gpt
