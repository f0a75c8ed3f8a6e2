// The tokenizers the programs use, by the name a data set or checkpoint records: "bytes" (token b
// is byte b), "gpt2" (OpenAI's GPT-2 files) or "hf-sha256:<hex>" (a Hugging Face tokenizer.json,
// named by the SHA-256 of its bytes). prepare-data encodes with several workers at once, each
// with its own encoder; generate and eval use worker 0.
//
// Where a Hugging Face tokenizer lives: every file that records one has a copy of it in its own
// folder, as tokenizer.json (and tokenizer_config.json): prepare-data writes one beside its data
// sets, convert --from-hf beside the checkpoint, train into its checkpoint folder (from the data
// set's folder). A folder holds one tokenizer: another one there is an error, not an overwrite.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "framework/text/gpt2_tokenizer.h"
#include "framework/text/hf_tokenizer.h"

namespace gpt {

struct Gpt2Files {
  std::string vocab, merges;  // encoder.json / vocab.json and vocab.bpe / merges.txt
};

class TextTokenizer {
 public:
  // `spec`: bytes, gpt2, or the path of a tokenizer.json or of a directory holding one.
  TextTokenizer(const std::string& spec, const Gpt2Files& gpt2, int workers = 1);
  ~TextTokenizer();

  const std::string& name() const { return name_; }
  int64_t vocab_size() const { return vocab_size_; }
  // Whether decode takes `id`: a model's embedding may have more rows than its tokenizer has
  // tokens (Qwen's files pad it), and a vocabulary may have holes.
  bool has_token(int64_t id) const;
  // The token between documents (-1: none, the bytes tokenizer) and whether it goes before each
  // document (a BOS) rather than after each.
  int64_t document_token() const { return document_token_; }
  bool document_token_first() const { return document_token_first_; }
  const HfTokenizer* hf() const { return hf_.get(); }

  // Appends the ids of `text`; see HfEncoder::encode for `continuation` and `allow_special`.
  // Workers 0..workers-1 may encode at the same time, each from one thread.
  void encode(int worker, std::string_view text, std::vector<int32_t>& ids, uint64_t offset = 0,
              bool continuation = false, bool allow_special = false);
  // The first position >= from (and < text.size()) where the text may be cut without changing
  // its tokens, the part after it encoded as a continuation; npos where none.
  size_t cut_at_or_after(std::string_view text, size_t from) const;
  std::string decode(const int32_t* ids, size_t n) const;
  std::string decode(const std::vector<int32_t>& ids) const {
    return decode(ids.data(), ids.size());
  }

 private:
  std::string name_;
  int64_t vocab_size_ = 256, document_token_ = -1;
  bool document_token_first_ = false;
  std::vector<std::unique_ptr<Gpt2Tokenizer>> gpt2_;  // one per worker
  std::unique_ptr<HfTokenizer> hf_;
  std::vector<std::unique_ptr<HfEncoder>> hf_encoders_;  // one per worker
  std::unique_ptr<RegexScratch> cut_scratch_;            // for cut_at_or_after (one caller)
};

// The folder where the tokenizer copy of a file lies: `path` itself when it is a folder (a
// checkpoint folder, a data set's directory), else the one holding it.
std::string tokenizer_folder_of(const std::string& path);

// The tokenizer.json in `folder` when it is the tokenizer `name` (hf-sha256:...), else "".
std::string tokenizer_copy_in(const std::string& folder, const std::string& name);

// Refuses, before anything is written, a `folder` holding another tokenizer.json than the one
// named `name` (read from `json_path`): an input error naming `what` and both files.
void check_tokenizer_folder(const std::string& json_path, const std::string& name,
                            const std::string& folder, const std::string& what);

// Places a copy of the tokenizer at `json_path` (named `name`) in `folder`: its tokenizer.json
// and, where they lie beside it, tokenizer_config.json, special_tokens_map.json and
// chat_template.jinja. Nothing is written when the folder holds
// the same tokenizer already; another one there is an input error naming both.
void place_tokenizer_copy(const std::string& json_path, const std::string& name,
                          const std::string& folder);

// The tokenizer.json for `name` (hf-sha256:...): `explicit_path` when given (its SHA-256 must
// match), else the copy in `folder`. None found, or one of another SHA-256: an input error naming
// `what` (the checkpoint or data set that records the name).
std::string find_tokenizer_copy(const std::string& name, const std::string& explicit_path,
                                const std::string& folder, const std::string& what);

}  // namespace gpt
