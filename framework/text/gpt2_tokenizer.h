// OpenAI's GPT-2 byte-level BPE tokenizer, exactly (the reference is tiktoken's "gpt2" encoding,
// encode_ordinary): text is cut into pieces by GPT-2's pre-tokenization regex (PCRE2, Unicode
// properties), each piece's UTF-8 bytes start as one token per byte and are merged pair by pair,
// lowest merge rank first, until no ranked pair is left. Reads the two standard files: the
// vocabulary (encoder.json / vocab.json: token string -> id, strings in GPT-2's byte-to-unicode
// alphabet) and the merges (vocab.bpe / merges.txt: "a b" per line, earliest = lowest rank).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "framework/text/bpe_merges.h"
#include "framework/text/unicode_regex.h"

namespace gpt {

// The sizes of OpenAI's GPT-2 vocabulary, for token files that carry ids without the vocabulary
// (llm.c's and nanoGPT's .bin): 50,000 merges, 256 bytes and <|endoftext|> last.
inline constexpr int64_t kGpt2VocabSize = 50257;
inline constexpr int64_t kGpt2Eot = 50256;

class Gpt2Tokenizer {
 public:
  // Loads and validates both files; a missing or malformed file throws a one-line input error
  // naming the file (and the line or entry) and what is wrong.
  Gpt2Tokenizer(const std::string& vocab_path, const std::string& merges_path);
  ~Gpt2Tokenizer();
  Gpt2Tokenizer(const Gpt2Tokenizer&) = delete;
  Gpt2Tokenizer& operator=(const Gpt2Tokenizer&) = delete;

  int64_t vocab_size() const { return static_cast<int64_t>(token_bytes_.size()); }
  // The id of "<|endoftext|>" (50256 in GPT-2's files), or -1 when the vocabulary has none.
  int64_t eot() const { return eot_; }

  // Appends the ids of `text` (ordinary text: "<|endoftext|>" in it is encoded as characters).
  // Invalid UTF-8 throws an input error giving the byte offset of the first bad sequence, plus
  // `offset` (where `text` starts in a longer input that is encoded in pieces).
  // Not const: it keeps a cache of pieces already merged (text repeats its words).
  void encode(std::string_view text, std::vector<int32_t>& ids, uint64_t offset = 0);
  std::vector<int32_t> encode(std::string_view text);

  // The bytes the ids stand for (decode(encode(x)) == x); an id outside the vocabulary throws.
  std::string decode(const int32_t* ids, size_t n) const;
  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }

 private:
  void encode_piece(std::string_view piece, std::vector<int32_t>& ids);

  std::vector<std::string> token_bytes_;                 // id -> the bytes it stands for
  std::unordered_map<std::string, int32_t> byte_token_;  // the bytes -> id
  BpeMerges merges_;
  std::unordered_map<std::string, std::vector<int32_t>> cache_;  // piece -> its ids
  int64_t eot_ = -1;
  UnicodeRegex regex_;
  RegexScratch scratch_;
};

}  // namespace gpt
