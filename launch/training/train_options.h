// The train program's options (docs/DESIGN.md "Programs": the names are a contract; those every
// program shares are launch/runtime/run_options.h's), typed at this boundary: enum-valued options
// (--optimizer, --data-order, --device, ...) are parsed from their names here and travel as enums.
// Every rule an option breaks gives a one-line gpt::Error naming the option; the checks are
// deterministic, so every rank fails alike.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "framework/config.h"
#include "framework/io/dataset.h"
#include "launch/runtime/run_options.h"
#include "launch/runtime/runtime.h"
#include "optimizers/optimizer.h"
#include "parallel/data_parallel.h"
#include "parallel/layout.h"
#include "parallel/pipeline_schedule.h"

namespace gpt {

struct TrainOptions {
  // layout (validated by Layout::validate, with the job's size)
  Layout layout = layout_with_micro_batch(16);
  std::string pipeline_layers = "even";  // --pipeline-layers as given; parsed into layout
  std::string cluster;                   // --cluster: what --pipeline-layers auto prices on
  int ranks_per_node = 0;
  bool allow_tp_across_nodes = false;
  int64_t global_batch_size = 64;
  int64_t dp_bucket_elements = kDefaultBucketElements;
  // Distributed optimizer: the updated weights' all-gather runs behind the next forward.
  bool overlap_param_gather = true;
  // Column-parallel linears compute their weight gradient while their input gradient's tp
  // reduction is in flight.
  bool overlap_tp_comm = true;
  bool memory_report = false;  // print the memory model's prediction per rank and exit
  // model
  std::string model_preset;
  ModelConfig model{4, 4, 128, 48, 256};  // vocab_size comes from the data set
  // data
  std::string data, val_data;
  DataOrder data_order = DataOrder::kRandom;
  int64_t eval_every = 100, eval_windows = 64;
  // optimisation
  int64_t steps = 1200;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  double lr = 3e-3, min_lr = 3e-4;
  int64_t warmup_steps = 50;
  double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, momentum = 0.9;
  double grad_clip = 1.0;
  uint64_t seed = 1234;
  ExecutionOptions execution;  // --device, --precision, --threads, ...
  // checkpoints and output
  std::string checkpoint_dir = "checkpoints";
  int64_t save_every = 0;
  int keep_last = 0;
  bool overwrite_checkpoints = false;  // a fresh start may delete the folder's checkpoints
  std::string resume, init_from;
  std::string metrics, trace;
  int64_t log_every = 1;
  bool log_detail = false;  // the step's time split and bytes on every log line
  // Seconds a communication may wait before the watchdog ends the job (exit 4); 0 = no watchdog.
  double comm_timeout = 600;
  // Seconds from the options parsed to the first step before the job is ended (exit 4); 0 = none.
  double startup_timeout = 600;

  // Options the user set explicitly (command line or config file), by long name.
  std::set<std::string> given;
  bool was_given(const std::string& name) const { return given.count(name) > 0; }
  // The "hf" object of the checkpoint the run starts from (framework/io/hf_extras.h: what an import
  // kept of a Hugging Face directory), as JSON text, written into every checkpoint of the run so
  // that --to-hf of a fine-tune writes it back; "" where there is none.
  std::string hf_extras;
  // Options a resumed checkpoint supplied (not given), by long name: where each came from, as
  // "the checkpoint FILE holds KEY = VALUE in its config", for the errors that name them.
  std::map<std::string, std::string> from_checkpoint;
};

// train's options, bound to the fields of `options` (parse_options in program.h fills them and
// the `given` set).
boost::program_options::options_description train_options_description(TrainOptions& options);
// After parsing: applies --model's preset to the shape options not given, then checks every rule;
// the layout's (tp * pp * dp == world, batch divisibility) need the job's size.
void finish_train_options(TrainOptions& options, int world_size);
// Every rule of finish_train_options, without touching the options (again after a checkpoint
// supplied some of them).
void validate_train_options(const TrainOptions& options, int world_size);

// The value an enum option's name stands for, as --optimizer and --data-order parse it (also
// for the names a checkpoint's config stores); nullopt for a name this program does not know.
std::optional<OptimizerKind> optimizer_from_name(const std::string& name);
std::optional<DataOrder> data_order_from_name(const std::string& name);

// The run's shape on `world_size` ranks: the grid, the schedule of one step (which sizes each
// chunk's caches) and the micro-batch size, as the Runtime takes them.
RuntimeOptions runtime_options(const TrainOptions& options, int world_size);

}  // namespace gpt
