// Fuzzes import_bin_tokens (framework/io/bin_tokens.h): an llm.c .bin token shard (a header of
// 256 int32: magic, version, token count; then uint16 tokens) or a headerless nanoGPT .bin,
// imported as an HDF5 data set with GPT-2's vocabulary.
#include "framework/io/bin_tokens.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input =
      gpt::fuzz::write_file("tokens.bin", {reinterpret_cast<const char*>(data), size});
  const std::string output = (gpt::fuzz::work_dir() / "tokens.h5").string();
  gpt::fuzz::expect_success_or_input_error(
      [&] { (void)gpt::import_bin_tokens(input, output, 50257, "gpt2", 50256); });
  return 0;
}
