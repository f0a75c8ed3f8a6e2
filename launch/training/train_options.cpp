// Option parsing and validation for train (see train_options.h).
#include "launch/training/train_options.h"

#include <unistd.h>

#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <fstream>
#include <iostream>
#include <optional>
#include <utility>

#include "framework/check.h"
#include "framework/json.h"
#include "launch/runtime/typed_options.h"
#include "optimizers/lr_schedule.h"

namespace po = boost::program_options;

namespace gpt {
namespace {

// A default as --help shows it: 0.003, not 0.0030000000000000001.
std::string short_text(double value) {
  return GPT_MSG(value);
}

po::options_description layout_options(TrainOptions& o) {
  po::options_description layout("Layout");
  add_layout_options(layout, o.layout, o.pipeline_layers, LayoutOptionStyle::kDefaults);
  auto add = layout.add_options();
  add("cluster", po::value(&o.cluster),
      "FILE|PRESET: the hardware --pipeline-layers auto prices the splits on, as plan's --cluster "
      "(default on cuda: dgx-h100; on the CPU a file from plan --calibrate is needed)");
  add("ranks-per-node", po::value(&o.ranks_per_node)->default_value(o.ranks_per_node),
      "simulated node size for the tp placement rule; 0 = detect");
  add("allow-tp-across-nodes", po::bool_switch(&o.allow_tp_across_nodes),
      "allow a tp group to span nodes");
  add("dp-bucket-size", po::value(&o.dp_bucket_elements)->default_value(o.dp_bucket_elements),
      "gradient elements per dp all-reduce bucket");
  add("no-overlap-param-gather",
      po::bool_switch()->notifier([&o](bool off) { o.overlap_param_gather = !off; }),
      "with --distributed-optimizer: wait for the updated weights' all-gather right after the "
      "optimizer step, instead of bucket by bucket behind the next forward (same results)");
  add("no-overlap-tp-comm",
      po::bool_switch()->notifier([&o](bool off) { o.overlap_tp_comm = !off; }),
      "wait for each column-parallel linear's input-gradient tp reduction before computing its "
      "weight gradient, instead of computing it while the reduction is in flight (same results)");
  add("memory-report", po::bool_switch(&o.memory_report),
      "print every rank's predicted memory per category and exit without training");
  add("global-batch-size", po::value(&o.global_batch_size)->default_value(o.global_batch_size),
      "sequences per optimizer step, over all dp ranks");
  return layout;
}

po::options_description model_options(TrainOptions& o) {
  po::options_description model("Model");
  add_model_options(model, o.model_preset, o.model, "sequence length (and learned positions)");
  return model;
}

po::options_description data_options(TrainOptions& o) {
  po::options_description data("Data");
  auto add = data.add_options();
  add("data", po::value(&o.data)->default_value(""),
      "training tokens: an HDF5 file (see prepare-data), several comma-separated, a glob or a "
      "directory of shards (docs/DATA.md); empty = the built-in arithmetic corpus");
  add("val-data", po::value(&o.val_data)->default_value(""),
      "validation tokens, named as --data; empty = the built-in held-out split when --data is "
      "empty");
  add("data-order", choice(&o.data_order),
      ("sample order: " + choice_list<DataOrder>(false)).c_str());
  add("eval-every", po::value(&o.eval_every)->default_value(o.eval_every),
      "validation every N steps (0 = never)");
  add("eval-windows", po::value(&o.eval_windows)->default_value(o.eval_windows),
      "validation windows (the first K of the file)");
  return data;
}

po::options_description optimization_options(TrainOptions& o) {
  po::options_description optim("Optimization");
  auto add = optim.add_options();
  add("steps", po::value(&o.steps)->default_value(o.steps), "total optimizer steps of the run");
  add("optimizer", choice(&o.optimizer),
      ("optimizer: " + choice_list<OptimizerKind>(false)).c_str());
  add("lr", po::value(&o.lr)->default_value(o.lr, short_text(o.lr)), "peak learning rate");
  add("min-lr", po::value(&o.min_lr)->default_value(o.min_lr, short_text(o.min_lr)),
      "final learning rate (cosine)");
  add("warmup-steps", po::value(&o.warmup_steps)->default_value(o.warmup_steps),
      "linear warm-up steps");
  add("weight-decay",
      po::value(&o.weight_decay)->default_value(o.weight_decay, short_text(o.weight_decay)),
      "decoupled (AdamW) or L2 (SGD) weight decay on weights and embeddings");
  add("beta1", po::value(&o.beta1)->default_value(o.beta1, short_text(o.beta1)), "AdamW beta1");
  add("beta2", po::value(&o.beta2)->default_value(o.beta2, short_text(o.beta2)), "AdamW beta2");
  add("eps", po::value(&o.eps)->default_value(o.eps, short_text(o.eps)), "AdamW epsilon");
  add("momentum", po::value(&o.momentum)->default_value(o.momentum, short_text(o.momentum)),
      "SGD momentum");
  add("grad-clip", po::value(&o.grad_clip)->default_value(o.grad_clip, short_text(o.grad_clip)),
      "global gradient-norm clip (0 = off)");
  add("seed", po::value(&o.seed)->default_value(o.seed), "seed of init and data order");
  return optim;
}

po::options_description output_options(TrainOptions& o) {
  po::options_description run("Execution and output");
  add_execution_options(run, o.execution, o.layout.precision);
  auto add = run.add_options();
  add("checkpoint-dir", po::value(&o.checkpoint_dir)->default_value(o.checkpoint_dir),
      "where checkpoints go");
  add("save-every", po::value(&o.save_every)->default_value(o.save_every),
      "checkpoint every N steps (0 = only at the end)");
  add("overwrite-checkpoints", po::bool_switch(&o.overwrite_checkpoints),
      "a run that does not resume may start in a --checkpoint-dir holding checkpoints: they are "
      "deleted first");
  add("keep-last", po::value(&o.keep_last)->default_value(o.keep_last),
      "keep only the newest N checkpoints (0 = keep all)");
  add("resume", po::value(&o.resume)->default_value(""), "checkpoint FILE, or auto");
  add("init-from", po::value(&o.init_from)->default_value(""),
      "load weights only from a checkpoint (fine-tuning)");
  add("metrics", po::value(&o.metrics)->default_value(""), "JSON-lines metrics file");
  add("trace", po::value(&o.trace)->default_value(""),
      "write one merged Chrome trace FILE of steps 2..4: every rank's actions and pipeline "
      "waits (scripts/trace_to_svg.py draws it)");
  add("log-every", po::value(&o.log_every)->default_value(o.log_every), "log every N steps");
  add("log-detail", po::bool_switch(&o.log_detail),
      "also log the step's time split (compute, tp, dp, pipeline wait) and bytes moved");
  add("comm-timeout",
      po::value(&o.comm_timeout)->default_value(o.comm_timeout, short_text(o.comm_timeout)),
      "SECONDS a collective, message or checkpoint write may wait before the watchdog ends the "
      "job with exit code 4 and a report naming the stalled rank (0 = off)");
  add("startup-timeout",
      po::value(&o.startup_timeout)
          ->default_value(o.startup_timeout, short_text(o.startup_timeout)),
      "SECONDS start-up (data, checkpoint, communicators, devices, checkpoint folder) may take "
      "before the first step, else the job ends with exit code 4 naming what a rank was doing "
      "(0 = off)");
  return run;
}

}  // namespace

po::options_description train_options_description(TrainOptions& o) {
  po::options_description all;
  all.add(layout_options(o)).add(model_options(o)).add(data_options(o));
  all.add(optimization_options(o)).add(output_options(o));
  return all;
}

namespace {

void check_train_options(const TrainOptions& o) {
  o.model.validate();
  GPT_INPUT_CHECK(o.layout.precision != PrecisionRegime::kMegatronMixed,
                  "--precision megatron-mixed is the planner's regime of Megatron-LM's runs; "
                  "train runs fp32 or bf16");
  GPT_INPUT_CHECK(o.dp_bucket_elements >= 1, "--dp-bucket-size must be at least 1");
  GPT_INPUT_CHECK(o.ranks_per_node >= 0, "--ranks-per-node must be at least 0");
  validate_global_batch_size(o.global_batch_size);
  GPT_INPUT_CHECK(o.eval_every >= 0, "--eval-every must be at least 0");
  GPT_INPUT_CHECK(o.eval_windows >= 1, "--eval-windows must be at least 1");
  GPT_INPUT_CHECK(!(o.val_data.empty() == false && o.data.empty()),
                  "--val-data needs --data (the built-in corpus has its own held-out split)");
  // The optimizer's and the schedule's own rules (optimizers/), one per hyper-parameter.
  LrSchedule{o.lr, o.min_lr, o.warmup_steps, o.steps}.validate();
  for (const auto& [key, value] : {std::pair<const char*, double>{"weight_decay", o.weight_decay},
                                   {"beta1", o.beta1},
                                   {"beta2", o.beta2},
                                   {"eps", o.eps},
                                   {"momentum", o.momentum},
                                   {"grad_clip", o.grad_clip}})
    check_hyperparameter(key, value);
  validate_execution_options(o.execution);
  GPT_INPUT_CHECK(o.save_every >= 0, "--save-every must be at least 0");
  GPT_INPUT_CHECK(o.keep_last >= 0, "--keep-last must be at least 0");
  GPT_INPUT_CHECK(o.log_every >= 1, "--log-every must be at least 1");
  GPT_INPUT_CHECK(std::isfinite(o.comm_timeout) && o.comm_timeout >= 0,
                  "--comm-timeout must be a number of seconds, at least 0 (0 = off)");
  GPT_INPUT_CHECK(std::isfinite(o.startup_timeout) && o.startup_timeout >= 0,
                  "--startup-timeout must be a number of seconds, at least 0 (0 = off)");
  GPT_INPUT_CHECK(o.resume.empty() || o.init_from.empty() || o.resume == "auto",
                  "--resume FILE and --init-from exclude each other (--resume auto with "
                  "--init-from continues the folder's checkpoint, or starts from --init-from's)");
  GPT_INPUT_CHECK(!o.checkpoint_dir.empty(), "--checkpoint-dir must not be empty");
}

}  // namespace

std::optional<OptimizerKind> optimizer_from_name(const std::string& name) {
  return find_choice<OptimizerKind>(name);
}

std::optional<DataOrder> data_order_from_name(const std::string& name) {
  return find_choice<DataOrder>(name);
}

RuntimeOptions runtime_options(const TrainOptions& o, int world_size) {
  RuntimeOptions ro;
  ro.layout = o.layout;
  ro.layout.dp = o.layout.data_parallel(world_size);
  ro.ranks_per_node = o.ranks_per_node;
  ro.allow_tp_across_nodes = o.allow_tp_across_nodes;
  ro.execution = o.execution;
  ro.dp_bucket_elements = o.dp_bucket_elements;
  ro.schedule = o.layout.step_schedule(o.global_batch_size, world_size);
  return ro;
}

void finish_train_options(TrainOptions& o, int world_size) {
  apply_model_preset(o.model_preset, o.given, o.model);
  set_pipeline_layers(o.layout, o.pipeline_layers);
  validate_train_options(o, world_size);
}

void validate_train_options(const TrainOptions& o, int world_size) {
  check_train_options(o);
  o.layout.validate(o.model, world_size);
  o.layout.step_microbatches(o.global_batch_size, world_size);
}

}  // namespace gpt
