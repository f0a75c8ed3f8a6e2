// train: GPT-2 training on a tp x dp x pp grid of MPI ranks (DESIGN.md "Programs").
// Set-up steps that can fail on some ranks only (files, checkpoints) run under
// agree_on_failure, so bad input ends every rank with one message and no hang.
#include <memory>
#include <optional>

#include "framework/io/checkpoint.h"
#include "framework/io/synthetic_corpus.h"
#include "framework/logging.h"
#include "launch/metrics.h"
#include "launch/program.h"
#include "launch/run_config.h"
#include "launch/signals.h"
#include "launch/trace.h"
#include "launch/trainer.h"

namespace gpt {
namespace {

// --schedule's value (options.cpp has checked it) as the schedule it names.
ScheduleKind schedule_kind(const std::string& name) {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::k1f1b, ScheduleKind::kInterleaved,
                            ScheduleKind::kZbH1}) {
    if (name == schedule_name(kind)) return kind;
  }
  fail_input("--schedule " + name + " is not one of gpipe, 1f1b, interleaved, zb-h1");
}

int train_main(int argc, char** argv) {
  MPI_Comm world = MPI_COMM_WORLD;
  int world_size = 1, rank = 0;
  MPI_Comm_size(world, &world_size);
  MPI_Comm_rank(world, &rank);
  TrainOptions options;
  if (!parse_options(world, argc, argv, train_options_description(options), &options.given,
                     [&] { finish_train_options(options, world_size); }))
    return 0;

  std::unique_ptr<CheckpointReader> checkpoint;
  TokenDataset train, validation;
  agree_on_failure(world, [&] {
    const std::string path = options.resume.empty() && options.init_from.empty()
                                 ? std::string()
                                 : checkpoint_to_load(options);
    if (!path.empty()) {
      checkpoint = std::make_unique<CheckpointReader>(path);
      apply_checkpoint_config(options, *checkpoint, options.init_from.empty());
    }
    train = options.data.empty() ? synthetic_arithmetic_corpus(false)
                                 : load_token_dataset(options.data);
    if (!options.val_data.empty()) {
      validation = load_token_dataset(options.val_data);
    } else if (options.data.empty()) {
      validation = synthetic_arithmetic_corpus(true);
    }
    if (checkpoint) {
      GPT_INPUT_CHECK(options.model.vocab_size == train.vocab_size,
                      train.path << " has vocab_size " << train.vocab_size << " but the checkpoint "
                                 << checkpoint->path() << " has " << options.model.vocab_size);
      GPT_INPUT_CHECK(checkpoint->meta().tokenizer == train.tokenizer,
                      train.path << " uses tokenizer " << train.tokenizer << " but the checkpoint "
                                 << checkpoint->path() << " uses " << checkpoint->meta().tokenizer);
    }
    options.model.vocab_size = train.vocab_size;
    options.model.validate();
    check_dataset_fits(train, options.model.seq_len);
    if (!validation.tokens.empty()) {
      GPT_INPUT_CHECK(validation.vocab_size == train.vocab_size,
                      validation.path << " has vocab_size " << validation.vocab_size << " but "
                                      << train.path << " has " << train.vocab_size);
      check_dataset_fits(validation, options.model.seq_len);
    }
  });

  RuntimeOptions ro;
  ro.grid.shape = {options.tp, world_size / (options.tp * options.pp), options.pp};
  ro.grid.ranks_per_node = options.ranks_per_node;
  ro.grid.allow_tp_across_nodes = options.allow_tp_across_nodes;
  ro.execution = options.execution;
  ro.micro_batch = options.micro_batch_size;
  ro.sequence_parallel = options.sequence_parallel;
  if (options.sequence_parallel && options.tp == 1)
    log::info0("--sequence-parallel has no effect at --tp 1");
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<Optimizer> optimizer;
  TrainState state;
  Schedule schedule;
  agree_on_failure(world, [&] {
    // The schedule is fixed by the layout and the batch: it decides how many caches to hold.
    const int dp = world_size / (options.tp * options.pp);
    const int microbatches =
        static_cast<int>(options.global_batch_size / (dp * options.micro_batch_size));
    schedule = make_schedule(schedule_kind(options.schedule), options.pp, microbatches,
                             options.virtual_stages);
    ro.virtual_stages = options.virtual_stages;
    ro.layers_per_stage = parse_layers_per_stage(options);
    ro.schedule = schedule;
    rt = std::make_unique<Runtime>(world, options.model, ro);
    OptimizerOptions oo{options.beta1, options.beta2, options.eps, options.weight_decay,
                        options.momentum};
    optimizer = make_optimizer(options.optimizer, rt->store(), oo);
    if (!checkpoint) {
      rt->store().initialize(options.seed);
      return;
    }
    const bool resuming = options.init_from.empty();
    load_checkpoint(*checkpoint, rt->store(), resuming);
    if (resuming) {
      optimizer->set_step_count(checkpoint->optimizer().step);
      state.step = checkpoint->meta().step;
      state.consumed_samples = checkpoint->meta().consumed_samples;
      GPT_LOG0("resumed from " << checkpoint->path() << " at step " << state.step);
    } else {
      GPT_LOG0("initialised weights from " << checkpoint->path());
    }
  });
  checkpoint.reset();
  // Output places are checked before training, not at the first save: a run must not train for
  // hours and then fail to write.
  std::unique_ptr<MetricsWriter> metrics;
  agree_on_failure(world, [&] {
    if (rank == 0) prepare_output_directory(options.checkpoint_dir, "--checkpoint-dir");
    metrics = std::make_unique<MetricsWriter>(options.metrics, rank == 0);
    if (rank == 0) check_trace_path(options.trace);
  });
  log::info0("data: " + train.path + " (" + std::to_string(train.tokens.size()) +
             " tokens, vocab " + std::to_string(train.vocab_size) + ")");
  install_stop_handlers();
  Trainer trainer(options, *rt, train, validation.tokens.empty() ? nullptr : &validation,
                  *optimizer, state, run_config_json(options, options.model), *metrics,
                  std::move(schedule));
  return trainer.run();
}

}  // namespace
}  // namespace gpt

int main(int argc, char** argv) {
  gpt::block_stop_signals();  // before MPI and OpenMP start threads: they inherit the block
  return gpt::run_program(argc, argv, gpt::train_main);
}
