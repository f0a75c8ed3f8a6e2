// load_model_for_inference (see checkpoint_model.h).
#include "launch/inference/checkpoint_model.h"

#include "framework/agreement.h"
#include "framework/families/model_family.h"
#include "framework/io/checkpoint_directory.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/io/hf_extras.h"
#include "framework/json.h"
#include "framework/logging.h"
#include "framework/user_files.h"
#include "launch/runtime/run_options.h"

namespace gpt {
namespace {

// --pipeline-layers auto in eval and generate: the split the checkpoint's run trained with (its
// config's pipeline_layers, informational there) where it has this layout's pp x v counts for
// this model, else even; logged either way.
void take_trained_split(Layout& layout, const ModelConfig& model, const Json& cfg, int world,
                        const std::string& what) {
  layout.pipeline_layers_auto = false;
  std::string trained = "even";
  Layout candidate = layout;
  bool usable = false;
  try {  // the file's text, not an option: a text that is not counts is not used
    if (cfg.contains("pipeline_layers"))
      trained = json_field<std::string>(cfg, "pipeline_layers", what);
    set_pipeline_layers(candidate, trained);
    candidate.validate(model, world);
    usable = !candidate.pipeline_layers.empty();
  } catch (const Error&) {
  }
  if (usable) {
    layout.pipeline_layers = candidate.pipeline_layers;
    log::info0("pipeline layers: " + layout.pipeline_layers_text() +
               " (auto: the split the checkpoint was trained with)");
  } else {
    log::info0("pipeline layers: even (auto: the checkpoint was trained at " +
               shown_excerpt(trained) + ", not a split of " + std::to_string(model.n_layer) +
               " layers over --pp " + std::to_string(layout.pp) + " x --virtual-stages " +
               std::to_string(layout.virtual_stages) + ")");
  }
}

}  // namespace

LoadedModel load_model_for_inference(MPI_Comm world, const std::string& checkpoint_argument,
                                     RuntimeOptions options, int64_t seq_len) {
  LoadedModel loaded;
  agree_on_failure(
      world, [&] { GPT_INPUT_CHECK(!checkpoint_argument.empty(), "--checkpoint is required"); });
  const std::string checkpoint_path = resolve_checkpoint_argument(checkpoint_argument, world);
  agree_on_failure(world, [&] { require_regular_file(checkpoint_path, "--checkpoint"); });
  const std::unique_ptr<CheckpointReader> opened = open_checkpoint(checkpoint_path, world);
  const CheckpointReader& reader = *opened;
  agree_on_failure(world, [&] {
    const std::string what = checkpoint_path + ": config";
    const Json cfg = parse_json_object(reader.meta().config_json, what);
    ModelConfig model = model_config_from_json(cfg, what);
    reader.check_holds_model(model);
    const int64_t stored_seq_len = model.seq_len;
    if (seq_len > 0) {
      GPT_INPUT_CHECK(!describe(model).learned_positions() || seq_len <= stored_seq_len,
                      "--seq-len " << seq_len << " is longer than the " << stored_seq_len
                                   << " positions the checkpoint " << checkpoint_path
                                   << " learned");
      model.seq_len = seq_len;
      model.validate();
    }
    if (options.layout.pipeline_layers_auto)
      take_trained_split(options.layout, model, cfg, comm_size(world), what);
    options.layout.validate(model, comm_size(world));
    loaded.runtime = std::make_unique<Runtime>(world, model, options);
    load_checkpoint(reader, loaded.runtime->store(), false, model.seq_len < stored_seq_len);
    loaded.tokenizer = reader.meta().tokenizer;
    loaded.data = json_field<std::string>(cfg, "data", what);
    if (cfg.contains("val_data")) loaded.val_data = json_field<std::string>(cfg, "val_data", what);
    loaded.step = reader.meta().step;
    loaded.path = checkpoint_path;
    loaded.hf_extras = hf_extras_from_checkpoint(cfg, what);
  });
  return loaded;
}

}  // namespace gpt
