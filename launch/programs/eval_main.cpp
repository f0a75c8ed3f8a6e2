// eval: a checkpoint's mean loss and perplexity over the first K sequential windows of a data
// set (docs/DESIGN.md "Programs"); runs as one rank or in a tp x dp layout.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "framework/io/synthetic_corpus.h"
#include "framework/logging.h"
#include "launch/inference/checkpoint_model.h"
#include "launch/programs/program.h"
#include "launch/runtime/evaluation.h"
#include "launch/runtime/run_options.h"

namespace po = boost::program_options;

namespace gpt {
namespace {

int eval_main(int argc, char** argv) {
  MPI_Comm world = MPI_COMM_WORLD;
  const int world_size = comm_size(world);
  std::string checkpoint, data;
  int64_t windows = 64, seq_len = 0;
  Layout layout = layout_with_micro_batch(8);  // the grid and micro-batch of the forward passes
  po::options_description desc;
  auto add = desc.add_options();
  add("checkpoint", po::value(&checkpoint)->default_value(""),
      "checkpoint file (.h5), or a checkpoint folder (its newest valid file)");
  add("data", po::value(&data)->default_value(""),
      "token data set; empty = the validation set the checkpoint's run used (the built-in "
      "split for built-in runs)");
  add("eval-windows", po::value(&windows)->default_value(windows), "the first K windows");
  add("seq-len", po::value(&seq_len)->default_value(0),
      "window length; 0 = the checkpoint's (GPT-2: at most it; Llama family: any)");
  add("micro-batch-size", po::value(&layout.micro_batch)->default_value(layout.micro_batch),
      "sequences per forward");
  add("tp", po::value(&layout.tp)->default_value(layout.tp),
      "tensor-parallel size; dp = ranks / (tp x pp)");
  add("pp", po::value(&layout.pp)->default_value(layout.pp), "pipeline stages");
  std::string pipeline_layers = "even";
  add("pipeline-layers", po::value(&pipeline_layers)->default_value(pipeline_layers),
      kPipelineLayersHelp);
  ExecutionOptions execution;
  add_execution_options(desc, execution, layout.precision);
  if (!parse_options(world, argc, argv, "eval: mean loss and perplexity of a checkpoint", desc,
                     nullptr, [&] {
                       validate_execution_options(execution);
                       GPT_INPUT_CHECK(!checkpoint.empty(), "--checkpoint is required");
                       GPT_INPUT_CHECK(windows >= 1, "--eval-windows must be at least 1");
                       GPT_INPUT_CHECK(seq_len >= 0, "--seq-len must be at least 0");
                       // The model's shape comes with the checkpoint: the layout's rules are
                       // checked against it when it is loaded (load_model_for_inference).
                       layout.validate(ModelConfig{}, world_size);
                       // Checked against the checkpoint's layers as it is loaded.
                       set_pipeline_layers(layout, pipeline_layers);
                     }))
    return 0;
  RuntimeOptions ro;
  ro.layout = layout;
  // A forward of more sequences than there are windows only pads (and would allocate for them).
  ro.layout.micro_batch = std::min(layout.micro_batch, windows);
  ro.execution = execution;
  LoadedModel model = load_model_for_inference(world, checkpoint, ro, seq_len);
  TokenDataset dataset;
  agree_on_failure(world, [&] {
    if (data.empty()) data = model.val_data;
    const bool built_in = data.empty();
    GPT_INPUT_CHECK(!built_in || model.data.empty(),
                    "--data is required: the checkpoint was trained on "
                        << model.data << " without a validation set");
    dataset = built_in ? synthetic_arithmetic_corpus(true) : load_token_dataset(data);
    // A Hugging Face tokenizer is named by its file's SHA-256: data made with another one is
    // other ids for the same text.
    const auto is_hf = [](const std::string& t) { return t.rfind("hf-sha256:", 0) == 0; };
    GPT_INPUT_CHECK(!(is_hf(dataset.tokenizer) || is_hf(model.tokenizer)) ||
                        dataset.tokenizer == model.tokenizer,
                    dataset.path << " uses the tokenizer " << dataset.tokenizer
                                 << " but the checkpoint " << checkpoint << " uses "
                                 << model.tokenizer);
    // A model's embedding may be larger than its tokenizer's vocabulary (Qwen's 151936 rows
    // for 151669 tokens), never smaller.
    GPT_INPUT_CHECK(dataset.vocab_size <= model.runtime->model().vocab_size,
                    dataset.path << " has vocab_size " << dataset.vocab_size
                                 << " but the checkpoint has "
                                 << model.runtime->model().vocab_size);
    check_dataset_fits(dataset, model.runtime->model().seq_len);
  });
  const EvalResult r = evaluate(*model.runtime, dataset, windows);
  char line[256];
  std::snprintf(line, sizeof line, "%s: loss %.6f | perplexity %.4f | %lld windows, %lld tokens",
                dataset.path.c_str(), r.loss, std::exp(r.loss), static_cast<long long>(r.windows),
                static_cast<long long>(r.tokens));
  log::info0(line);
  return 0;
}

}  // namespace
}  // namespace gpt

int main(int argc, char** argv) {
  return gpt::run_program(argc, argv, gpt::eval_main);
}
