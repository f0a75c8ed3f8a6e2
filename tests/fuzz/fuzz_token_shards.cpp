// Fuzzes ShardReader (framework/io/token_shards.h), the reader of --data: an HDF5 token shard's
// /tokens dataset (rank, type, size) and attributes (vocab_size, tokenizer, eot, max_token), the
// scan for tokens outside the vocabulary, and reading windows of the stream. The input is an
// h5_recipe.h recipe, not the file's bytes (why: h5_recipe.h); a second shard, when the input
// has a line "==> second <==", must agree with the first.
#include "framework/io/token_shards.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/h5_recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> paths;
  for (const auto& [name, recipe] :
       gpt::fuzz::split_files({reinterpret_cast<const char*>(data), size}, {"first", "second"})) {
    paths.push_back((gpt::fuzz::work_dir() / (name + ".h5")).string());
    gpt::fuzz::write_h5_recipe(paths.back(), recipe);
  }
  if (paths.empty()) return 0;
  gpt::fuzz::expect_success_or_input_error([&] {
    gpt::ShardReader reader(paths);
    std::vector<int32_t> window(16);
    const int64_t n = std::min<int64_t>(reader.size(), 16);
    reader.read(0, n, window.data());
    reader.read(reader.size() - n, n, window.data());
  });
  return 0;
}
