// Fuzzes SafetensorsFile (framework/io/safetensors.h): a safetensors file's 8-byte header length,
// its JSON header (dtypes, shapes, data offsets, __metadata__) and reading every tensor it lists.
#include "framework/io/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      gpt::fuzz::write_file("model.safetensors", {reinterpret_cast<const char*>(data), size});
  gpt::fuzz::expect_success_or_input_error([&] {
    gpt::SafetensorsFile file(path);
    (void)file.metadata("format");
    for (const std::string& name : file.names()) {
      (void)file.shape(name);
      (void)file.read(name);
    }
  });
  return 0;
}
