// load_model_for_inference (see checkpoint_model.h).
#include "launch/checkpoint_model.h"

#include "launch/json.h"
#include "launch/program.h"

namespace gpt {

LoadedModel load_model_for_inference(MPI_Comm world, const std::string& checkpoint_path,
                                     RuntimeOptions options) {
  LoadedModel loaded;
  agree_on_failure(world, [&] {
    GPT_INPUT_CHECK(!checkpoint_path.empty(), "--checkpoint is required");
    CheckpointReader reader(checkpoint_path);
    const auto cfg = parse_flat_json(reader.meta().config_json, checkpoint_path + ": config");
    auto get = [&](const char* key) {
      auto it = cfg.find(key);
      GPT_INPUT_CHECK(it != cfg.end(), checkpoint_path << ": config has no '" << key << "'");
      return it->second;
    };
    ModelConfig model;
    model.n_layer = std::stoll(get("n_layer"));
    model.n_head = std::stoll(get("n_head"));
    model.d_model = std::stoll(get("d_model"));
    model.seq_len = std::stoll(get("seq_len"));
    model.vocab_size = std::stoll(get("vocab_size"));
    model.validate();
    const int tp = options.grid.shape.tp;
    GPT_INPUT_CHECK(model.n_head % tp == 0,
                    "--tp " << tp << " does not divide the checkpoint's n_head " << model.n_head);
    const int pp = options.grid.shape.pp;
    GPT_INPUT_CHECK(model.n_layer % pp == 0,
                    "--pp " << pp << " does not divide the checkpoint's n_layer " << model.n_layer);
    loaded.runtime = std::make_unique<Runtime>(world, model, options);
    load_checkpoint(reader, loaded.runtime->store(), false);
    loaded.tokenizer = reader.meta().tokenizer;
    loaded.data = get("data");
    loaded.step = reader.meta().step;
  });
  return loaded;
}

}  // namespace gpt
