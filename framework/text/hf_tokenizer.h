// Hugging Face tokenizers from their `tokenizer.json` (plus `tokenizer_config.json` beside it for
// the BOS/EOS tokens): the BPE model (byte-level as in Llama 3 and Qwen, or SentencePiece-style
// with a ▁ normaliser and byte fallback as in Llama 2 and Mistral), the normalizers, the pre-
// tokenizers, the decoders and the added tokens. What is implemented is listed in docs/DATA.md;
// anything else in a file (a Unigram or WordPiece model, an unknown normalizer) is an input error
// naming the JSON key. The reference is Hugging Face's `encode(text, add_special_tokens=False)`
// (tested against transformers.js's port of it).
//
// HfTokenizer is immutable once loaded and shared by threads; each thread encodes through its own
// HfEncoder (regex match state and a cache of words already merged).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "framework/text/unicode_regex.h"

namespace gpt {

class HfEncoder;

// The identity HfTokenizer::identity() gives the file at `json_path`, computed from its bytes
// alone (no parse): for checking a copy.
std::string hf_tokenizer_identity(const std::string& json_path);

class HfTokenizer {
 public:
  // `path` is a tokenizer.json or a directory holding one (a Hugging Face model directory).
  // Every file is untrusted: sizes are bounded and each problem is a one-line input error naming
  // the file and the JSON key.
  explicit HfTokenizer(const std::string& path);
  ~HfTokenizer();
  HfTokenizer(const HfTokenizer&) = delete;
  HfTokenizer& operator=(const HfTokenizer&) = delete;

  // The name data sets and checkpoints record: "hf-sha256:" and the SHA-256 of tokenizer.json's
  // bytes, so the same file anywhere is the same tokenizer and any edit is another one.
  const std::string& identity() const;
  const std::string& json_path() const;    // the tokenizer.json read
  const std::string& config_path() const;  // the tokenizer_config.json read, or empty
  // One more than the largest id of the vocabulary and the added tokens.
  int64_t vocab_size() const;
  // Whether `id` names a token (ids below vocab_size() may be holes of the vocabulary).
  bool has_token(int64_t id) const;
  // Ids from tokenizer_config.json's bos_token / eos_token, -1 where none.
  int64_t bos() const;
  int64_t eos() const;
  // The token prepare-data puts between documents, and whether it goes before each document
  // (a BOS the model expects: add_bos_token, or a post-processor template starting with it)
  // rather than after each (the end-of-document token: "<|endoftext|>" where the vocabulary has
  // it as a special token, else eos_token). -1 where the files name neither.
  int64_t document_token() const;
  bool document_token_first() const;
  // The id of an added or vocabulary token given by its text, or -1.
  int64_t token_id(const std::string& text) const;

  // Whether the text may be cut after a "\n" between two letters or digits (\p{L}, \p{N}) and
  // the two parts encoded separately (the second as a continuation) with the same ids as the
  // whole: true for the pre-tokenizers where that is proven (see hf_tokenizer_load.cpp);
  // prepare-data then splits one document between workers.
  bool cuts_after_newline() const;
  // The first such place at or after `from` (and before text.size()), or npos; npos always
  // where !cuts_after_newline(). `scratch` is the calling thread's.
  size_t cut_at_or_after(std::string_view text, size_t from, RegexScratch& scratch) const;

  // Whether decode(encode(x)) == x for every text x: a byte-level file without a normalizer
  // (Qwen's NFC gives back the NFC form of the text).
  bool decodes_exactly() const;

  // The text of the ids: the decoder of the file applied to the tokens' strings. Byte-level
  // files give the exact bytes (decode(encode(x)) == x); SentencePiece-style ones as the
  // reference decodes. An id outside the vocabulary is an input error.
  std::string decode(const int32_t* ids, size_t n) const;
  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }

  // Defined in hf_tokenizer_model.h, internal to framework/text.
  struct Model;

 private:
  friend class HfEncoder;

  // The identity HfTokenizer::identity() gives the file at `json_path`, computed from its bytes
  // alone (no parse): for checking a copy.
  std::string hf_tokenizer_identity(const std::string& json_path);
  std::unique_ptr<Model> m_;
};

class HfEncoder {
 public:
  explicit HfEncoder(const HfTokenizer& tokenizer);
  ~HfEncoder();
  HfEncoder(const HfEncoder&) = delete;
  HfEncoder& operator=(const HfEncoder&) = delete;

  // Appends the ids of `text`. Special added tokens written in the text are matched only with
  // `allow_special` (else encoded as ordinary text); non-special added tokens always are, as
  // Hugging Face does. `continuation` says the text continues a document cut where
  // cuts_after_newline() allows: the start-of-text normalisation (Prepend, a prefix space) is
  // then not applied. Invalid UTF-8 is an input error giving the byte offset plus `offset`.
  void encode(std::string_view text, std::vector<int32_t>& ids, bool allow_special = false,
              bool continuation = false, uint64_t offset = 0);
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false);

 private:
  struct State;
  const HfTokenizer& tokenizer_;
  std::unique_ptr<State> state_;
};

}  // namespace gpt
