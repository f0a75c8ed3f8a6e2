// Generating the arithmetic corpus (see synthetic_corpus.h). One RNG draw per line: its low 32
// bits give a and its high 32 bits give b, so the text is a pure function of the line index.
#include "framework/io/synthetic_corpus.h"

#include <charconv>

#include "framework/rng.h"

namespace gpt {
namespace {

// Fixed for all time: changing it changes the built-in corpus and every result measured on it.
constexpr uint64_t kCorpusSeed = 20240601;
constexpr int64_t kTrainTokens = 1'500'000;
constexpr int64_t kValidationTokens = 100'000;
constexpr uint32_t kMinOperand = 100, kOperandRange = 400;  // a, b in [100, 499]

}  // namespace

TokenDataset synthetic_arithmetic_corpus(bool validation) {
  TokenDataset data;
  data.path = validation ? "<built-in validation>" : "<built-in train>";
  data.vocab_size = 256;
  data.tokenizer = "bytes";
  data.eot = -1;
  const int64_t target = validation ? kValidationTokens : kTrainTokens;
  const CounterRng rng(kCorpusSeed, validation ? "arithmetic-validation" : "arithmetic-train");
  data.tokens.reserve(static_cast<size_t>(target) + 16);
  char line[32];
  for (uint64_t i = 0; static_cast<int64_t>(data.tokens.size()) < target; ++i) {
    const uint64_t r = rng.bits(i);
    // Three-digit operands whose sum has three digits: every line has the same 12 characters,
    // so a token's role follows from its distance to the line start and a small model learns
    // the sums within the default run. The modulo bias of 2^32 mod 400 is below 1e-7.
    const uint32_t a = kMinOperand + static_cast<uint32_t>(r) % kOperandRange;
    const uint32_t b = kMinOperand + static_cast<uint32_t>(r >> 32) % kOperandRange;
    char* p = line;
    p = std::to_chars(p, line + sizeof(line), a).ptr;
    *p++ = '+';
    p = std::to_chars(p, line + sizeof(line), b).ptr;
    *p++ = '=';
    p = std::to_chars(p, line + sizeof(line), a + b).ptr;
    *p++ = '\n';
    for (const char* c = line; c != p; ++c)
      data.tokens.push_back(static_cast<int32_t>(static_cast<unsigned char>(*c)));
  }
  return data;
}

}  // namespace gpt
