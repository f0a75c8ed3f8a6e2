// Fuzzes the import of a Hugging Face model directory (framework/io/hf_weight_files.h,
// gpt2_weights.h, llama_weights.h), as convert --from-hf reads it: config.json,
// model.safetensors.index.json and the safetensors files it names (HfWeightFiles: a missing or
// doubled tensor, a shard name that is not a file of the directory), then the model config.json
// describes checked against the files (sizes, every tensor's name and shape) and its tensors
// read; also what an import keeps beside the model (max_position_embeddings, bos and eos ids,
// generation_config.json: framework/io/hf_extras.h). One input holds the files, each after a
// "==> NAME <==" line (fuzz_common.h).
#include "framework/families/model_family.h"
#include "framework/io/gpt2_weights.h"
#include "framework/io/hf_extras.h"
#include "framework/io/hf_weight_files.h"
#include "framework/io/llama_weights.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// This project's tensor names and shapes for the model, as its family lists them (convert builds
// the same from a ParameterStore).
std::map<std::string, std::vector<int64_t>> expected_tensors(const gpt::ModelConfig& m) {
  std::map<std::string, std::vector<int64_t>> t;
  for (const gpt::LogicalParameter& p : gpt::logical_parameters(m)) t[p.name] = p.shape;
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = gpt::fuzz::fresh_dir("hf_model");
  for (const auto& [name, bytes] :
       gpt::fuzz::split_files({reinterpret_cast<const char*>(data), size},
                              {"config.json", "model.safetensors", "model.safetensors.index.json",
                               "model-00001-of-00002.safetensors",
                               "model-00002-of-00002.safetensors", "generation_config.json"}))
    gpt::fuzz::write_file("hf_model/" + name, bytes);
  gpt::fuzz::expect_success_or_input_error([&] {
    const std::string config_path = dir + "/config.json";
    const gpt::Json config = gpt::read_hf_json(config_path, "--from-hf");
    const std::string type = gpt::hf_model_type(config, config_path);
    (void)gpt::read_hf_extras(config, config_path, dir);
    gpt::HfWeightFiles files(dir);
    (void)files.metadata("format");
    if (gpt::is_llama_family(type)) {
      const gpt::ModelConfig model = gpt::llama_model_from_hf_config(config, type, config_path, 0);
      gpt::check_llama_model_size(files, model, config_path);
      gpt::check_llama_tensors(files, expected_tensors(model), model, config_path);
      for (const std::string& name : files.names()) (void)files.read(name);
    } else {
      const gpt::ModelConfig model = gpt::model_from_hf_config(config, config_path);
      gpt::SafetensorsFile file(dir + "/" + gpt::kHfSingleWeightsFile);
      gpt::check_hf_model_size(file, model, config_path);
      (void)gpt::read_hf_tensors(file, expected_tensors(model));
    }
  });
  return 0;
}
