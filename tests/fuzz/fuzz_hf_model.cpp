// Fuzzes the import of a Hugging Face model directory (framework/io/hf_weight_files.h,
// gpt2_weights.h, llama_weights.h), as convert --from-hf reads it: config.json,
// model.safetensors.index.json and the safetensors files it names (HfWeightFiles: a missing or
// doubled tensor, a shard name that is not a file of the directory), then the model config.json
// describes checked against the files (sizes, every tensor's name and shape) and its tensors
// read; also what an import keeps beside the model (max_position_embeddings, bos and eos ids,
// generation_config.json: framework/io/hf_extras.h). One input holds the files, each after a "==> NAME <==" line (fuzz_common.h).
#include "framework/io/gpt2_weights.h"
#include "framework/io/hf_extras.h"
#include "framework/io/hf_weight_files.h"
#include "framework/io/llama_weights.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// This project's tensor names and shapes for the model (the Llama family or GPT-2), as convert
// builds them from a ParameterStore; here from the config's sizes directly.
std::map<std::string, std::vector<int64_t>> expected_tensors(const gpt::ModelConfig& m) {
  std::map<std::string, std::vector<int64_t>> t;
  const int64_t C = m.d_model, V = m.vocab_size, F = m.ffn_dim();
  if (!m.llama()) {
    t["wte"] = {V, C};
    t["wpe"] = {m.seq_len, C};
    for (int64_t l = 0; l < m.n_layer; ++l) {
      const std::string h = "h." + std::to_string(l) + ".";
      for (const char* ln : {"ln_1", "ln_2"}) {
        t[h + ln + ".weight"] = {C};
        t[h + ln + ".bias"] = {C};
      }
      t[h + "attn.c_attn.weight"] = {3 * C, C};
      t[h + "attn.c_attn.bias"] = {3 * C};
      t[h + "attn.c_proj.weight"] = {C, C};
      t[h + "attn.c_proj.bias"] = {C};
      t[h + "mlp.c_fc.weight"] = {F, C};
      t[h + "mlp.c_fc.bias"] = {F};
      t[h + "mlp.c_proj.weight"] = {C, F};
      t[h + "mlp.c_proj.bias"] = {C};
    }
    t["ln_f.weight"] = {C};
    t["ln_f.bias"] = {C};
    return t;
  }
  t["embed_tokens.weight"] = {V, C};
  if (!m.tie_embeddings) t["lm_head.weight"] = {V, C};
  t["norm.weight"] = {C};
  for (int64_t l = 0; l < m.n_layer; ++l) {
    const std::string h = "layers." + std::to_string(l) + ".";
    t[h + "input_layernorm.weight"] = {C};
    t[h + "post_attention_layernorm.weight"] = {C};
    t[h + "self_attn.q_proj.weight"] = {m.q_channels(), C};
    t[h + "self_attn.k_proj.weight"] = {m.kv_channels(), C};
    t[h + "self_attn.v_proj.weight"] = {m.kv_channels(), C};
    t[h + "self_attn.o_proj.weight"] = {C, m.q_channels()};
    t[h + "mlp.gate_proj.weight"] = {F, C};
    t[h + "mlp.up_proj.weight"] = {F, C};
    t[h + "mlp.down_proj.weight"] = {C, F};
  }
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = gpt::fuzz::fresh_dir("hf_model");
  for (const auto& [name, bytes] : gpt::fuzz::split_files(
           {reinterpret_cast<const char*>(data), size},
           {"config.json", "model.safetensors", "model.safetensors.index.json",
            "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
            "generation_config.json"}))
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
