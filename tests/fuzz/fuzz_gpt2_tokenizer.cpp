// Fuzzes Gpt2Tokenizer's loading (framework/text/gpt2_tokenizer.h): the vocabulary (encoder.json:
// token string -> id in GPT-2's byte alphabet) and the merges (vocab.bpe: "a b" per line), given
// as one input of two files ("==> encoder.json <==" and "==> vocab.bpe <==" lines, fuzz_common.h),
// then encoding and decoding a short text with what was loaded.
#include "framework/text/gpt2_tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = gpt::fuzz::fresh_dir("gpt2");
  std::string vocab = dir + "/encoder.json", merges = dir + "/vocab.bpe";
  for (const auto& [name, bytes] : gpt::fuzz::split_files(
           {reinterpret_cast<const char*>(data), size}, {"encoder.json", "vocab.bpe"}))
    gpt::fuzz::write_file("gpt2/" + name, bytes);
  gpt::fuzz::expect_success_or_input_error([&] {
    gpt::Gpt2Tokenizer tokenizer(vocab, merges);
    const std::vector<int32_t> ids = tokenizer.encode("Hello world, it's 2024!\n\tab  ab");
    (void)tokenizer.decode(ids);
  });
  return 0;
}
