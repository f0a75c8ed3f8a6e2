// Fuzzes the import of a Hugging Face model directory (framework/io/hf_weight_files.h,
// hf_model.h and the families' Hugging Face formats), as convert --from-hf reads it: config.json,
// model.safetensors.index.json and the safetensors files it names (HfWeightFiles: a missing or
// doubled tensor, a shard name that is not a file of the directory), then the model config.json
// describes checked against the files (sizes, every tensor's name and shape) and its tensors
// read; also what an import keeps beside the model (max_position_embeddings, bos and eos ids,
// generation_config.json: framework/io/hf_extras.h). One input holds the files, each after a
// "==> NAME <==" line (fuzz_common.h).
#include "framework/families/model_family.h"
#include "framework/io/hf_extras.h"
#include "framework/io/hf_model.h"
#include "framework/io/hf_weight_files.h"
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
    const gpt::HfModel hf = gpt::read_hf_config(config, config_path, 0);
    (void)gpt::read_hf_extras(config, config_path, dir);
    const gpt::HfModelWeights weights(dir, hf, config_path);
    (void)weights.metadata("format");
    const std::map<std::string, std::vector<int64_t>> expected = expected_tensors(hf.model);
    weights.check(expected);
    for (const auto& entry : expected) (void)weights.read(entry.first);
  });
  return 0;
}
