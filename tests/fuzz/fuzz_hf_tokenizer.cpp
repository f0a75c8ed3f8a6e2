// Fuzzes HfTokenizer's loading (framework/text/hf_tokenizer_load.cpp): a Hugging Face
// tokenizer.json (model, vocabulary, merges, added tokens, normalizers, pre-tokenizers, decoders,
// post-processor) and the tokenizer_config.json beside it (bos/eos tokens), given as one input of
// two files ("==> tokenizer.json <==" and "==> tokenizer_config.json <==" lines, fuzz_common.h),
// then encoding and decoding a short text with what was loaded.
#include "framework/text/hf_tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string dir = gpt::fuzz::fresh_dir("hf");
  for (const auto& [name, bytes] :
       gpt::fuzz::split_files({reinterpret_cast<const char*>(data), size},
                              {"tokenizer.json", "tokenizer_config.json"}))
    gpt::fuzz::write_file("hf/" + name, bytes);
  gpt::fuzz::expect_success_or_input_error([&] {
    gpt::HfTokenizer tokenizer(dir);
    (void)tokenizer.identity();
    (void)tokenizer.document_token();
    gpt::HfEncoder encoder(tokenizer);
    std::vector<int32_t> ids;
    encoder.encode("Hello world, it's 2024! <s> hello\n\n  ab", ids, true);
    encoder.encode("continued text", ids, false, true);
    (void)tokenizer.decode(ids);
  });
  return 0;
}
