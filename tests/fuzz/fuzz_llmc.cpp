// Fuzzes read_llmc (framework/io/llmc_weights.h): an llm.c gpt2_124M.bin, its header of 256 int32
// (magic, version, the model's sizes) and the float32 tensors it must then hold.
#include "framework/io/llmc_weights.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      gpt::fuzz::write_file("model.bin", {reinterpret_cast<const char*>(data), size});
  gpt::fuzz::expect_success_or_input_error([&] { (void)gpt::read_llmc(path); });
  return 0;
}
