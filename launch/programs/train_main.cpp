// train: GPT-2 and Llama-family training on a tp x dp x pp grid of MPI ranks (docs/DESIGN.md
// "Programs"), in four named steps: parse the options, load the inputs (checkpoint and data
// sets), build the runtime and the training state, train. Set-up steps that can fail on some
// ranks only (files, checkpoints, allocation) run under agree_on_failure, so bad input ends
// every rank with one message and no hang.
#include <filesystem>
#include <memory>
#include <string>

#include "framework/io/checkpoint_directory.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/io/shard_record.h"
#include "framework/io/synthetic_corpus.h"
#include "framework/logging.h"
#include "framework/text/text_tokenizer.h"
#include "launch/programs/program.h"
#include "launch/runtime/signals.h"
#include "launch/training/memory_report.h"
#include "launch/training/metrics.h"
#include "launch/training/pipeline_split.h"
#include "launch/training/run_config.h"
#include "launch/training/startup_deadline.h"
#include "launch/training/startup_report.h"
#include "launch/training/trace.h"
#include "launch/training/trainer.h"
#include "launch/training/watchdog.h"

namespace gpt {
namespace {

// What the run starts from: the checkpoint (none for a fresh start) and the data sets.
struct TrainInputs {
  std::unique_ptr<CheckpointReader> checkpoint;
  TokenDataset train, validation;  // validation empty: none
};

// The model and its training state, ready for the first step.
struct TrainState0 {
  std::unique_ptr<Runtime> runtime;
  std::unique_ptr<Optimizer> optimizer;
  TrainState state;
};

// Opens and verifies the checkpoint (--resume, --init-from) and takes the options it fixes,
// then the data sets, checked against each other and the model. Agreed over world; the
// checkpoint's search and verification are collective, so they run in steps of their own.
TrainInputs load_inputs(MPI_Comm world, TrainOptions& options) {
  TrainInputs in;
  std::string path;
  agree_on_failure(world, [&] {
    if (!options.resume.empty() || !options.init_from.empty())
      path = checkpoint_to_load(options, world);
  });
  if (!path.empty()) in.checkpoint = open_checkpoint(path, world);
  agree_on_failure(world, [&] {
    if (in.checkpoint) {
      apply_checkpoint_config(options, *in.checkpoint, options.init_from.empty());
      validate_resumed_options(options, comm_size(world));
    }
    const bool built_in = options.data.empty();
    in.train = built_in ? synthetic_arithmetic_corpus(false) : load_token_dataset(options.data);
    if (!options.val_data.empty()) {
      in.validation = load_token_dataset(options.val_data);
    } else if (built_in) {
      in.validation = synthetic_arithmetic_corpus(true);
    }
    if (in.checkpoint) {
      const CheckpointReader& c = *in.checkpoint;
      if (options.init_from.empty())
        check_recorded_shards(c.meta().config_json, c.path(), in.train);
      // A model's embedding may be larger than its tokenizer's vocabulary (Qwen's 151936 rows
      // for 151669 tokens), never smaller.
      GPT_INPUT_CHECK(in.train.vocab_size <= options.model.vocab_size,
                      in.train.path << " has vocab_size " << in.train.vocab_size
                                    << " but the checkpoint " << c.path() << " has "
                                    << options.model.vocab_size);
      GPT_INPUT_CHECK(c.meta().tokenizer == in.train.tokenizer,
                      in.train.path << " uses tokenizer " << in.train.tokenizer
                                    << " but the checkpoint " << c.path() << " uses "
                                    << c.meta().tokenizer);
    }
    if (!in.checkpoint) options.model.vocab_size = in.train.vocab_size;
    options.model.validate();
    check_dataset_fits(in.train, options.model.seq_len);
    if (!in.validation.empty()) {
      GPT_INPUT_CHECK(in.validation.vocab_size == in.train.vocab_size &&
                          in.validation.tokenizer == in.train.tokenizer,
                      in.validation.path << " has vocab_size " << in.validation.vocab_size
                                         << " and tokenizer " << in.validation.tokenizer << " but "
                                         << in.train.path << " has " << in.train.vocab_size
                                         << " and " << in.train.tokenizer);
      check_dataset_fits(in.validation, options.model.seq_len);
    }
  });
  return in;
}

// The runtime (grid, backend, this rank's chunks with the caches the schedule states), the
// optimizer, and the weights: fresh from the seed, or the checkpoint's (with its optimizer state
// and counters when resuming). Agreed over world.
TrainState0 build_runtime_and_state(MPI_Comm world, const TrainOptions& options,
                                    const CheckpointReader* checkpoint) {
  const Layout& layout = options.layout;
  if (layout.sequence_parallel && layout.tp == 1)
    log::info0("--sequence-parallel has no effect at --tp 1");
  if (layout.distributed_optimizer && layout.data_parallel(comm_size(world)) == 1)
    log::info0("--distributed-optimizer has no effect at dp 1: the optimizer state is not sharded");
  if (layout.grad_reduce_dtype == GradReduceDtype::kBf16 &&
      layout.data_parallel(comm_size(world)) == 1)
    log::info0("--grad-reduce-dtype bf16 has no effect at dp 1: there is no gradient reduction");
  TrainState0 s;
  agree_on_failure(world, [&] {
    s.runtime =
        std::make_unique<Runtime>(world, options.model, runtime_options(options, comm_size(world)));
    const OptimizerOptions oo{options.beta1, options.beta2, options.eps, options.weight_decay,
                              options.momentum};
    s.optimizer = make_optimizer(options.optimizer, s.runtime->store(), oo);
    if (checkpoint == nullptr) {
      s.runtime->store().initialize(options.seed);
      return;
    }
    const bool resuming = options.init_from.empty();
    load_checkpoint(*checkpoint, s.runtime->store(), resuming, !resuming);
    if (!resuming) {
      GPT_LOG0("initialised weights from " << checkpoint->path());
      return;
    }
    s.optimizer->set_step_count(checkpoint->optimizer().step);
    s.state.step = checkpoint->meta().step;
    s.state.consumed_samples = checkpoint->meta().consumed_samples;
    GPT_LOG0("resumed from " << checkpoint->path() << " at step " << s.state.step);
  });
  return s;
}

// Under --distributed-optimizer at dp > 1, what global rank 0 keeps: its share of the optimizer
// state against the full count, and the padding (bucket_plan.h), so a log shows the saving.
void log_distributed_optimizer(Runtime& rt, const Optimizer& optimizer) {
  const ParameterStore& store = rt.store();
  if (!store.optimizer_state_sharded()) return;
  const BucketPlan& plan = rt.bucket_plan();
  int64_t params = 0;
  for (const Parameter& p : store.params()) params += p.numel();
  const int64_t states = static_cast<int64_t>(optimizer.state_names().size());
  GPT_LOG0("--distributed-optimizer: optimizer state sharded over dp "
           << plan.shards << " in " << plan.buckets.size() << " buckets: " << states << " x "
           << store.state_numel() << " floats on this rank instead of " << states << " x " << params
           << " (padding " << plan.padded_total - params << " floats per buffer)");
}

// A run that does not continue a checkpoint of its folder (a fresh start, or --init-from) in a
// folder holding another run's checkpoints would replace and prune them: refused, unless
// --overwrite-checkpoints, which deletes them first. Rank 0.
void check_fresh_start(const TrainOptions& options) {
  const std::vector<std::string> existing = step_file_names(options.checkpoint_dir);
  if (existing.empty()) return;
  const std::string dir = options.checkpoint_dir;
  GPT_INPUT_CHECK(options.overwrite_checkpoints,
                  "--checkpoint-dir " << dir << " holds another run's checkpoints ("
                                      << existing.front()
                                      << (existing.size() > 1 ? " and older" : "")
                                      << "): continue them with --resume auto, give another "
                                         "--checkpoint-dir, or add --overwrite-checkpoints to "
                                         "delete them and start over");
  std::error_code ec;
  for (const std::string& name : existing)
    std::filesystem::remove(std::filesystem::path(dir) / name, ec);
  std::filesystem::remove(std::filesystem::path(dir) / "latest", ec);
  GPT_LOG0("--overwrite-checkpoints: deleted " << existing.size() << " checkpoint(s) in " << dir);
}

// Output places are checked before training, not at the first save: a run must not train for
// hours and then fail to write. The checkpoint folder is locked for the run (rank 0 holds the
// lock). Agreed over world; rank 0 writes the metrics.
std::unique_ptr<MetricsWriter> prepare_outputs(MPI_Comm world, const TrainOptions& options,
                                               int64_t start_step, bool continuing,
                                               std::unique_ptr<CheckpointFolderLock>& lock) {
  const bool writer = comm_rank(world) == 0;
  std::unique_ptr<MetricsWriter> metrics;
  agree_on_failure(world, [&] {
    if (writer) {
      prepare_output_directory(options.checkpoint_dir, "--checkpoint-dir");
      lock = std::make_unique<CheckpointFolderLock>(options.checkpoint_dir);
      check_pointer_entries(options.checkpoint_dir);
      if (!continuing) check_fresh_start(options);
      for (const std::string& name : remove_interrupted_writes(options.checkpoint_dir))
        GPT_LOG0("removed " << name << " in " << options.checkpoint_dir
                            << ": left by an interrupted checkpoint write");
      // No watchdog of this run has started yet (start_watchdog follows): any heartbeat there
      // is a killed job's.
      const std::string heartbeats =
          (std::filesystem::path(options.checkpoint_dir) / ".watchdog").string();
      if (const int stale = remove_stale_heartbeats(heartbeats); stale > 0)
        GPT_LOG0("removed " << stale << " heartbeat file(s) in " << heartbeats
                            << ": left by a job that was killed");
    }
    metrics = std::make_unique<MetricsWriter>(options.metrics, writer, start_step);
    if (writer) check_trace_path(options.trace);
  });
  return metrics;
}

// A Hugging Face tokenizer goes with the checkpoints (framework/text/text_tokenizer.h): its copy
// beside the data set, or beside the checkpoint the run starts from, is placed in the checkpoint
// folder, so generate finds it there. Rank 0; agreed over world.
void carry_tokenizer(MPI_Comm world, const TrainOptions& options, const TokenDataset& train,
                     const std::string& checkpoint_path) {
  if (train.tokenizer.rfind("hf-sha256:", 0) != 0) return;
  agree_on_failure(world, [&] {
    if (comm_rank(world) != 0) return;
    std::vector<std::string> folders = {
        tokenizer_folder_of(train.path.substr(0, train.path.find(',')))};
    if (!checkpoint_path.empty()) folders.push_back(tokenizer_folder_of(checkpoint_path));
    for (const std::string& folder : folders) {
      const std::string json = tokenizer_copy_in(folder, train.tokenizer);
      if (json.empty()) continue;
      place_tokenizer_copy(json, train.tokenizer, options.checkpoint_dir);
      return;
    }
    log::info0("the tokenizer " + train.tokenizer + " of " + train.path +
               " has no tokenizer.json beside the data set: the checkpoints will not carry it "
               "(generate then needs --tokenizer)");
  });
}

// The communication watchdog (--comm-timeout; none at 0), its files beside the checkpoints: a
// directory every node sees. Agreed over world.
std::unique_ptr<Watchdog> start_watchdog(MPI_Comm world, const TrainOptions& options,
                                         ProcessGrid& grid) {
  if (options.comm_timeout <= 0) return nullptr;
  std::unique_ptr<Watchdog> watchdog;
  agree_on_failure(world, [&] {
    watchdog = std::make_unique<Watchdog>(
        grid, (std::filesystem::path(options.checkpoint_dir) / ".watchdog").string(),
        options.comm_timeout);
  });
  return watchdog;
}

int train_main(int argc, char** argv) {
  MPI_Comm world = MPI_COMM_WORLD;
  TrainOptions options;
  if (!parse_options(world, argc, argv,
                     "train: GPT-2 and Llama-family (Llama, Mistral, Qwen2, Qwen3) training on a "
                     "tp x dp x pp grid of MPI ranks",
                     train_options_description(options), &options.given,
                     [&] { finish_train_options(options, comm_size(world)); }))
    return 0;
  // Stop requests end start-up at once; a start-up longer than --startup-timeout ends the job.
  install_stop_handlers();
  StartupDeadline deadline(options.startup_timeout);
  deadline.enter("loading the checkpoint and data sets");
  TrainInputs inputs = load_inputs(world, options);
  // --pipeline-layers auto needs the vocabulary (the head's cost): chosen once it is known.
  agree_on_failure(world, [&] {
    choose_pipeline_layers(options, comm_size(world), predicted_device(options.execution));
  });
  // The memory model needs only the options and the vocabulary: report and check before
  // allocating anything (every rank decides alike).
  MemoryModelInput predicted;
  agree_on_failure(world, [&] {
    predicted = memory_model_input(options, comm_size(world), predicted_device(options.execution));
    if (!options.memory_report) check_memory_limit(predicted, options.execution.memory_limit_gb);
  });
  if (options.memory_report) {
    log::info0(memory_report_table(predicted));
    return 0;
  }
  if (options.layout.recompute == Recompute::kSelective &&
      !attention_cache_is_quadratic(predicted.device))
    log::info0(
        "--recompute selective: the CUDA attention keeps only each row's log-sum-exp, "
        "nothing quadratic in --seq-len to drop; it changes nothing here");
  // Continuing a checkpoint (a resume, not --init-from's fine-tuning start).
  const bool continuing = inputs.checkpoint != nullptr && options.init_from.empty();
  deadline.enter("building the model, its communicators and its training state");
  TrainState0 start = build_runtime_and_state(world, options, inputs.checkpoint.get());
  const std::string start_checkpoint = inputs.checkpoint ? inputs.checkpoint->path() : "";
  inputs.checkpoint.reset();  // read: closed before training
  print_startup_report(world, start.runtime->grid().shape(), start.runtime->threads());
  log_distributed_optimizer(*start.runtime, *start.optimizer);
  deadline.enter("preparing the checkpoint folder and the outputs");
  std::unique_ptr<CheckpointFolderLock> folder_lock;
  std::unique_ptr<MetricsWriter> metrics =
      prepare_outputs(world, options, start.state.step, continuing, folder_lock);
  carry_tokenizer(world, options, inputs.train, start_checkpoint);
  const TokenDataset& data = inputs.train;
  log::info0(
      "data: " + data.path + " (" + std::to_string(data.size()) + " tokens" +
      (data.shards ? " in " + std::to_string(data.shards->shards().size()) + " shards" : "") +
      ", vocab " + std::to_string(data.vocab_size) + ")");
  deadline.enter("starting the watchdog");
  std::unique_ptr<Watchdog> watchdog = start_watchdog(world, options, start.runtime->grid());
  deadline.enter("setting up the trainer");
  const TokenDataset* validation = inputs.validation.empty() ? nullptr : &inputs.validation;
  // The model again with the backend's real kind (auto resolved), as the ledger will be compared.
  const MemoryModelInput memory =
      memory_model_input(options, comm_size(world), start.runtime->backend().kind());
  log_predicted_memory(memory, *metrics);
  // The CUDA backend's per-call scratch at its largest, before the first step: nothing grows later.
  start.runtime->backend().reserve_scratch(device_scratch(memory, comm_rank(world)));
  Trainer trainer(
      options, *start.runtime, inputs.train, validation, *start.optimizer, start.state,
      config_with_shards(run_config_json(options, options.model), inputs.train, validation),
      *metrics);
  deadline.finish();
  take_stop_requests_at_steps();
  const int exit_code = trainer.run();
  report_measured_memory(world, memory, start.runtime->backend(), *metrics);
  return exit_code;
}

}  // namespace
}  // namespace gpt

// Before every library constructor and thread: a stop signal at any moment is a request.
GPT_BLOCK_STOP_SIGNALS_AT_START();

int main(int argc, char** argv) {
  return gpt::run_program(argc, argv, gpt::train_main);
}
