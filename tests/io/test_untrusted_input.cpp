// Readers of files made elsewhere against hostile input: deep JSON, sizes whose arithmetic would
// wrap, non-integer numbers where integers are due, and datasets that declare more than the file
// holds. Each must be one line naming the file and the rule broken, never a crash, a library's
// own text or an allocation the file cannot back.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "framework/config.h"
#include "framework/families/model_family.h"
#include "framework/io/checkpoint_format.h"
#include "framework/io/checkpoint_reader.h"
#include "framework/io/hdf5_util.h"
#include "framework/io/hf_model.h"
#include "framework/io/llmc_weights.h"
#include "framework/io/safetensors.h"
#include "framework/io/token_shards.h"
#include "framework/json.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace gpt {
namespace {

class UntrustedInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gpt_untrusted_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A safetensors file of `header` followed by `data_bytes` zero bytes.
  std::string safetensors(const std::string& name, const std::string& header,
                          size_t data_bytes = 0) const {
    const std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    const uint64_t length = header.size();
    out.write(reinterpret_cast<const char*>(&length), sizeof length);
    out << header << std::string(data_bytes, '\0');
    return p;
  }

  fs::path dir_;
};

std::string nested(size_t depth) {
  return "{\"a\": " + std::string(depth, '[') + std::string(depth, ']') + "}";
}

TEST_F(UntrustedInput, DeepJsonIsRefusedBeforeParsing) {
  EXPECT_NO_THROW(parse_json_object(nested(kMaxJsonDepth - 1), "shallow"));
  expect_error([] { parse_json_object(nested(200000), "config of x.h5"); },
               {"config of x.h5: JSON nested deeper than 64 levels"});
  // Brackets inside strings are text, escaped quotes included.
  EXPECT_NO_THROW(parse_json_object("{\"a\": \"\\\"" + std::string(1000, '[') + "\"}", "text"));
  const std::string header = "{\"w\": " + nested(200000) + "}";
  const std::string file = safetensors("deep.safetensors", header);
  expect_error([&] { SafetensorsFile{file}; }, {file, "nested deeper than 64 levels"});
}

// An object of many keys (a request body of 90,000 keys, a safetensors header of 400,000 tensors)
// parses in time linear in its size: a quadratic parse of these 400,000 keys takes minutes, the
// linear one well under a second, so the generous bound only catches the quadratic one.
TEST_F(UntrustedInput, ObjectsOfManyKeysParseInLinearTime) {
  constexpr int kKeys = 400000;
  std::string text = "{";
  for (int i = 0; i < kKeys; ++i)
    text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
  text += "\"k7\": -7, \"last\": [1, {\"z\": 0, \"a\": 1}]}";
  const auto start = std::chrono::steady_clock::now();
  const Json parsed = parse_json_object(text, "body");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0);
  ASSERT_EQ(parsed.size(), static_cast<size_t>(kKeys) + 1);
  // Keys keep the order they were written in; a repeated key keeps its first place and takes its
  // last value, as nlohmann's own parse does.
  auto it = parsed.begin();
  EXPECT_EQ(it.key(), "k0");
  EXPECT_EQ((++it).key(), "k1");
  EXPECT_EQ(parsed.at("k7"), -7);
  EXPECT_EQ(std::next(parsed.begin(), 7).key(), "k7");
  EXPECT_EQ(parsed.at("last").dump(), R"([1,{"z":0,"a":1}])");
  // Every value is nlohmann's own (its sorted-map parse; its ordered one is the quadratic one).
  const LargeJson reference = LargeJson::parse(text);
  ASSERT_EQ(reference.size(), parsed.size());
  for (const auto& [key, value] : parsed.items())
    ASSERT_EQ(reference.at(key), LargeJson::parse(value.dump())) << key;
  EXPECT_EQ(parse_large_json_object(text, "body"), reference);
  expect_error([] { parse_json_object("{\"a\": 1,}", "body"); }, {"body: not valid JSON"});
  expect_error([] { parse_json_object("[1]", "body"); }, {"body: not a JSON object"});
  expect_error([] { parse_json_object("{} {}", "body"); }, {"body: not valid JSON"});
}

TEST_F(UntrustedInput, IntegerFieldsTakeOnlyIntegersInRange) {
  const Json config = Json::parse(R"({"a": 2.7, "b": 1e3, "c": 9223372036854775808, "d": 7,
                                      "e": "a very long string that must not be echoed whole",
                                      "f": [[1]]})");
  expect_error([&] { json_field<int64_t>(config, "a", "cfg.json"); },
               {"cfg.json: 'a' must be a 64-bit integer (found 2.7)"});
  expect_error([&] { json_field<int64_t>(config, "b", "cfg.json"); },
               {"'b' must be a 64-bit integer"});
  expect_error([&] { json_field<int64_t>(config, "c", "cfg.json"); },
               {"'c' must be a 64-bit integer"});
  expect_error([&] { json_field<int32_t>(config, "c", "cfg.json"); },
               {"'c' must be a 32-bit integer"});
  EXPECT_EQ(json_field<int64_t>(config, "d", "cfg.json"), 7);
  EXPECT_EQ(json_field<double>(config, "d", "cfg.json"), 7.0);
  expect_error([&] { json_field<int64_t>(config, "e", "cfg.json"); },
               {"'e' must be a 64-bit integer (found a string)"});
  expect_error([&] { json_field<std::vector<int64_t>>(config, "f", "cfg.json"); },
               {"'f' must be an array of 64-bit integers (found an array)"});
  try {
    json_field<int64_t>(config, "e", "cfg.json");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("echoed"), std::string::npos) << e.what();
  }
  Json hf = family_of(Arch::kGpt2).hf->write_config(ModelConfig{}, "float32");
  hf["n_layer"] = 2.7;
  expect_error([&] { read_hf_config(hf, "dir/config.json", 0); },
               {"dir/config.json: 'n_layer' must be a 64-bit integer (found 2.7)"});
}

// A model field out of range in a file is named by the file and its key, not by an option the
// user never gave; the command line's are named by their options.
TEST_F(UntrustedInput, ModelFieldsAreNamedWhereTheyCameFrom) {
  Json config = Json::object();
  to_json(config, ModelConfig{});
  config["n_layer"] = 1000000000;
  expect_error([&] { model_config_from_json(config, "ck.h5: attribute config"); },
               {"ck.h5: attribute config: n_layer must be in [1, 100000] (got 1000000000)"});
  config["n_layer"] = 2;
  config["n_head"] = 3;
  expect_error([&] { model_config_from_json(config, "ck.h5: attribute config"); },
               {"ck.h5: attribute config: n_head 3 does not divide d_model 128"});
  ModelConfig options;
  options.seq_len = 0;
  expect_error([&] { options.validate(); }, {"--seq-len must be in [1, 4194304] (got 0)"});
}

TEST_F(UntrustedInput, SafetensorsSizesNeverWrap) {
  const std::string wraps = safetensors(
      "wraps.safetensors",
      R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})");
  expect_error([&] { SafetensorsFile{wraps}; },
               {wraps, "tensor \"w\": its shape has a negative dimension or more than 2^63 bytes"});
  const std::string huge = safetensors(
      "huge.safetensors",
      R"({"w": {"dtype": "F32", "shape": [4611686018427387905], "data_offsets": [0, 4]}})", 4);
  expect_error([&] { SafetensorsFile{huge}; }, {huge, "more than 2^63 bytes"});
  const std::string half =
      safetensors("half.safetensors",
                  R"({"w": {"dtype": "F32", "shape": [96], "data_offsets": [0, 384.5]}})", 384);
  expect_error(
      [&] { SafetensorsFile{half}; },
      {half, "tensor \"w\": 'data_offsets' must be an array of 64-bit integers (found an array)"});
  const std::string long_name = std::string(5000, 'x');
  const std::string named = safetensors(
      "named.safetensors",
      "{\"" + long_name + R"(": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  try {
    SafetensorsFile{named};
    ADD_FAILURE() << "F64 accepted";
  } catch (const Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u) << "the tensor's name is echoed whole";
    EXPECT_NE(std::string(e.what()).find("has dtype \"F64\""), std::string::npos) << e.what();
  }
}

TEST_F(UntrustedInput, LlmcHeaderSizesNeverWrap) {
  std::vector<int32_t> header(256, 0);
  const int32_t fields[] = {20240326, 3, 1024, 50257, 1000000, 1, 2147483647, 50304};
  std::copy(std::begin(fields), std::end(fields), header.begin());
  const std::string p = path("model.bin");
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(header.data()), 256 * sizeof(int32_t));
  expect_error([&] { read_llmc(p); },
               {p + ": header: n_layer must be in [1, 100000] (got 1000000)"});
  header[4] = 1;        // one layer
  header[6] = 1 << 16;  // but 2^16 channels: 12 * 2^32 floats, not in a 1 KB file
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(header.data()), 256 * sizeof(int32_t));
  expect_error([&] { read_llmc(p); }, {p + ": 1024 bytes, but its header's model needs"});
}

TEST_F(UntrustedInput, CheckpointDatasetsMustHoldWhatTheyDeclare) {
  const std::string p = path("sparse.h5");
  {
    h5::Handle file(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    const hid_t root = file.id();
    h5::write_string_attribute(root, "format", kCheckpointFormat);
    for (const char* name : {"complete", "step", "consumed_samples", "seed"})
      h5::write_int64_attribute(root, name, std::string(name) == "complete" ? 1 : 0);
    h5::write_int64_attribute(root, "format_version", kCheckpointFormatVersion);
    for (const char* name : {"config", "tokenizer", "layout"})
      h5::write_string_attribute(root, name, "{}");
    h5::Handle model(
        GPT_H5_CHECK(H5Gcreate2(root, "/model", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    // 2^40 floats declared, none written: HDF5 allocates a contiguous dataset's storage late.
    const hsize_t dims[] = {hsize_t{1} << 20, hsize_t{1} << 20};
    h5::Handle space(GPT_H5_CHECK(H5Screate_simple(2, dims, nullptr)));
    h5::Handle data(GPT_H5_CHECK(H5Dcreate2(model.id(), "wte", H5T_IEEE_F32LE, space.id(),
                                            H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
    h5::write_uint32_attribute(data.id(), "crc32", 0);
  }
  ASSERT_LT(fs::file_size(p), 1u << 20);
  expect_error([&] { CheckpointReader{p}; },
               {"checkpoint " + p +
                ": dataset /model/wte of shape [1048576, 1048576] declares 4398046511104 bytes but "
                "stores 0 (never written, truncated or compressed)"});
}

// Found by tests/fuzz/fuzz_config_json.cpp: config.json's activation_function was echoed as it is,
// a newline in it splitting the one-line error.
TEST_F(UntrustedInput, HfConfigValuesAreQuoted) {
  Json hf = family_of(Arch::kGpt2).hf->write_config(ModelConfig{}, "float32");
  hf["activation_function"] = "gelu\nrelu";
  expect_error([&] { read_hf_config(hf, "dir/config.json", 0); },
               {"dir/config.json: activation_function \"gelu\\nrelu\" (this model has GELU's tanh "
                "form, gelu_new)"});
}

// Found by tests/fuzz/fuzz_checkpoint.cpp: a format attribute holding a carriage return was
// echoed as it is, and the error was no longer one line.
TEST_F(UntrustedInput, CheckpointFormatIsShownOnOneLine) {
  const std::string p = path("format.h5");
  {
    h5::Handle file(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    h5::write_string_attribute(file.id(), "format", "gpt-train\rcheckpoint");
  }
  expect_error([&] { CheckpointReader{p}; },
               {"checkpoint " + p +
                ": is not a checkpoint (format attribute "
                "'gpt-train\\x0dcheckpoint', expected 'gpt-train-checkpoint')"});
}

// Found by tests/fuzz/fuzz_token_shards.cpp: a shard declaring a billion tokens and storing none
// was read as fill values, its scan taking as long as the shape claims.
TEST_F(UntrustedInput, TokenShardsMustHoldWhatTheyDeclare) {
  const std::string p = path("sparse_tokens.h5");
  {
    h5::Handle file(H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    h5::write_int64_attribute(file.id(), "vocab_size", 512);
    h5::write_string_attribute(file.id(), "tokenizer", "bytes");
    const hsize_t dims[] = {hsize_t{1} << 30};
    h5::Handle space(GPT_H5_CHECK(H5Screate_simple(1, dims, nullptr)));
    h5::Handle data(GPT_H5_CHECK(H5Dcreate2(file.id(), "tokens", H5T_STD_U16LE, space.id(),
                                            H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)));
  }
  ASSERT_LT(fs::file_size(p), 1u << 20);
  expect_error([&] { ShardReader{{p}}; },
               {"data set " + p +
                ": /tokens declares 1073741824 tokens but stores 0 bytes of them (never written "
                "or truncated)"});
}

}  // namespace
}  // namespace gpt
