// Fuzzes the model configs read from JSON (framework/config.h, framework/json.h,
// framework/io/hf_model.h): parse_json_object's depth bound, a checkpoint's config attribute
// (model_config_from_json) and a Hugging Face config.json (read_hf_config, through each
// family's reader), each from the same text.
#include "framework/config.h"
#include "framework/io/hf_model.h"
#include "framework/json.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  gpt::Json config;
  bool parsed = false;
  gpt::fuzz::expect_success_or_input_error([&] {
    config = gpt::parse_json_object(text, "ck.h5: attribute config");
    parsed = true;
  });
  if (!parsed) return 0;
  gpt::fuzz::expect_success_or_input_error([&] {
    const gpt::ModelConfig model = gpt::model_config_from_json(config, "ck.h5: attribute config");
    (void)model.num_parameters(true);
    (void)model.flops_per_token();
  });
  gpt::fuzz::expect_success_or_input_error([&] {
    const gpt::ModelConfig model = gpt::read_hf_config(config, "dir/config.json", 0).model;
    (void)model.num_parameters(true);
  });
  return 0;
}
