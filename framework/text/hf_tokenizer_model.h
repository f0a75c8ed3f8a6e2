// What HfTokenizer holds once tokenizer.json is read (internal to framework/text): the vocabulary
// and merges as ids, and the normalizer, pre-tokenizer and decoder as flat lists of steps (a
// Sequence is its steps in order). hf_tokenizer_load.cpp fills it; hf_tokenizer.cpp runs it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "framework/text/bpe_merges.h"
#include "framework/text/hf_tokenizer.h"
#include "framework/text/unicode_regex.h"

namespace gpt {

// The bytes of a tokenizer directory's file (tokenizer.json, tokenizer_config.json, a chat
// template), bounded in size; a one-line input error "<what> <path>: ..." when it is missing,
// not a regular file, too large or unreadable.
std::string read_tokenizer_file(const std::string& path, const char* what);

// Heterogeneous lookup: find a std::string key by string_view without building a string.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIds = std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>>;

// A pattern of a Split pre-tokenizer or a Replace step: a literal string or a regex.
struct TextPattern {
  std::string literal;
  std::optional<UnicodeRegex> regex;  // set for {"Regex": ...}
};

struct NormalizerStep {
  enum Kind { kUnicodeForm, kPrepend, kReplace, kLowercase, kStrip } kind = kUnicodeForm;
  std::string text;  // the form (NFC...), the prepended text, or Replace's content
  TextPattern pattern;
  bool strip_left = false, strip_right = false;
};

// Hugging Face's SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum Kind { kSplit, kByteLevel, kMetaspace, kDigits } kind = kSplit;
  // What each step splits by, and how: Split's own; ByteLevel's use_regex (GPT-2's pattern);
  // Metaspace's split (before each replacement character); Digits (runs or single \p{N}).
  TextPattern pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;                               // ByteLevel
  bool use_regex = false;                                      // ByteLevel
  std::string replacement;                                     // Metaspace: "▁"
  enum Prepend { kAlways, kFirst, kNever } prepend = kAlways;  // Metaspace
  bool split = true;                                           // Metaspace
};

struct DecoderStep {
  enum Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind = kByteLevel;
  std::string pattern, content;  // Replace (literal); Strip's character; Metaspace's replacement
  int64_t start = 0, stop = 0;   // Strip
  bool prepend = true;           // Metaspace: drop the leading space of the first token
};

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false, single_word = false, lstrip = false, rstrip = false;
};

struct HfTokenizer::Model {
  std::string json_path, config_path, identity;
  bool byte_level = false;  // the pre-tokenizer ends in ByteLevel: tokens are byte strings

  // id -> the token's string: raw bytes for byte-level files, else the file's UTF-8 text. Ids
  // that neither the vocabulary nor the added tokens use are empty and flagged in `used`.
  std::vector<std::string> token_text;
  std::vector<bool> used;
  std::vector<bool> is_added;
  TokenIds vocab;  // the model's vocabulary, keyed like token_text
  BpeMerges merges;
  std::vector<int32_t> byte_token;  // byte-level: byte -> id; byte_fallback: byte -> "<0xXX>" id
  bool byte_fallback = false, ignore_merges = false, fuse_unk = false;
  int32_t unk = -1;

  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  std::vector<DecoderStep> decoder;
  std::vector<AddedToken> added;  // longest first, for leftmost-longest matching
  // For each first byte, the indices into `added` of the tokens starting with it.
  std::vector<std::vector<uint32_t>> added_by_first_byte = std::vector<std::vector<uint32_t>>(256);

  int64_t bos = -1, eos = -1, document_token = -1;
  bool document_token_first = false;
  bool cuts_after_newline = false;
  // Matches one letter or digit exactly at the start offset (\G): the neighbours of a cut.
  UnicodeRegex letter_or_digit{"\\G(?:\\p{L}|\\p{N})", "the letter-or-digit pattern"};
};

}  // namespace gpt
