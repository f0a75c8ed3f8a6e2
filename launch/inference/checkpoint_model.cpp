// load_model_for_inference (see checkpoint_model.h).
#include "launch/inference/checkpoint_model.h"

#include "framework/agreement.h"
#include "framework/io/checkpoint_directory.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/json.h"
#include "framework/user_files.h"

namespace gpt {

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
      GPT_INPUT_CHECK(model.llama() || seq_len <= stored_seq_len,
                      "--seq-len " << seq_len << " is longer than the " << stored_seq_len
                                   << " positions the checkpoint " << checkpoint_path
                                   << " learned");
      model.seq_len = seq_len;
      model.validate();
    }
    options.layout.validate(model, comm_size(world));
    loaded.runtime = std::make_unique<Runtime>(world, model, options);
    load_checkpoint(reader, loaded.runtime->store(), false, model.seq_len < stored_seq_len);
    loaded.tokenizer = reader.meta().tokenizer;
    loaded.data = json_field<std::string>(cfg, "data", what);
    if (cfg.contains("val_data")) loaded.val_data = json_field<std::string>(cfg, "val_data", what);
    loaded.step = reader.meta().step;
  });
  return loaded;
}

}  // namespace gpt
