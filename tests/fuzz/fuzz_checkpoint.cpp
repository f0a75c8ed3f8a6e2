// Fuzzes CheckpointReader (framework/io/checkpoint_reader.h) and the checkpoint's metadata: the
// root attributes (format, complete, format_version, step, seed, the config/tokenizer/layout
// JSON, metadata_crc32), the /model and /optimizer groups, each dataset's type, shape, stored
// size and crc32 attribute, then the model the config attribute describes
// (model_config_from_json, check_holds_model) and reading every dataset whole. The input is an
// h5_recipe.h recipe, not the file's bytes (why: h5_recipe.h). verify() is left out: it is an
// MPI collective over the same crc32s, and the fuzz build runs without MPI_Init.
#include "framework/io/checkpoint_reader.h"
#include "framework/json.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/h5_recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = (gpt::fuzz::work_dir() / "checkpoint.h5").string();
  gpt::fuzz::write_h5_recipe(path, {reinterpret_cast<const char*>(data), size});
  gpt::fuzz::expect_success_or_input_error([&] {
    gpt::CheckpointReader reader(path);
    if (reader.has_optimizer()) (void)reader.optimizer();
    const gpt::Json config = gpt::parse_json_object(reader.meta().config_json, path + ": config");
    reader.check_holds_model(gpt::model_config_from_json(config, path + ": config"));
    for (const std::string& name : reader.datasets()) {
      gpt::Slab slab;
      slab.count = reader.shape(name);
      slab.start.assign(slab.count.size(), 0);
      if (slab.numel() > (1 << 16)) continue;
      std::vector<float> values(static_cast<size_t>(slab.numel()));
      reader.read_slab(name, slab, values.data());
    }
  });
  return 0;
}
