// Reading tokenizer.json and tokenizer_config.json into HfTokenizer::Model. Every value comes
// from an untrusted file: sizes are bounded before anything is built, each key's type is checked,
// and every problem is one input error naming the file and the JSON key (model.merges[12], ...).
#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/hf_tokenizer_model.h"
#include "framework/text/unicode_text.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

// Real tokenizer.json files are at most tens of MB (Llama 3's is 9 MB); vocabularies of a few
// hundred thousand tokens.
constexpr uintmax_t kMaxFileBytes = 256u << 20;
constexpr size_t kMaxVocab = 1u << 22;  // ids too: token_text is indexed by id
constexpr size_t kMaxTokenBytes = 1u << 16;

// GPT-2's pre-tokenization pattern, what ByteLevel's use_regex applies (see pretokenize_regex).
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
// The Split patterns for which a cut after "\n" between two letters or digits is proven a piece
// boundary (HfTokenizer::cuts_after_newline): Llama 3's (and OpenAI's cl100k), and Qwen2's and
// Qwen3's. The argument: the letter or digit before the "\n" ends a piece (the alternatives that
// take letters or digits cannot go on into "\n"), and at the "\n" only `\s*[\r\n]+` matches,
// taking the "\n" alone because a letter or digit follows; matching has no lookbehind, so the
// rest splits as it would on its own. GPT-2's pattern (ByteLevel's use_regex) likewise.
constexpr const char* kNewlineSafePatterns[] = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
};

// Reads `what` from `json` for messages: "tokenizer.json FILE: KEY: ...".
struct Reader {
  std::string file;
  [[noreturn]] void fail(const std::string& key, const std::string& message) const {
    fail_input(file + ": " + key + ": " + message);
  }
  const LargeJson& member(const LargeJson& object, const std::string& key,
                          const std::string& path) const {
    const auto it = object.find(key);
    if (it == object.end()) fail(path + "." + key, "missing");
    return *it;
  }
  template <typename T>
  T value(const LargeJson& object, const std::string& key, const std::string& path,
          T fallback) const {
    const auto it = object.find(key);
    if (it == object.end() || it->is_null()) return fallback;
    std::optional<T> v = json_value<T>(*it);
    if (!v) fail(path + "." + key, "expected " + json_expected<T>() + ", found " + json_found(*it));
    return *v;
  }
  std::string type(const LargeJson& object, const std::string& path) const {
    if (!object.is_object()) fail(path, "expected an object, found " + json_found(object));
    const std::string t = value<std::string>(object, "type", path, "");
    if (t.empty()) fail(path + ".type", "missing");
    return t;
  }
};

std::string sha256_hex(const std::string& bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int length = 0;
  GPT_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(), nullptr),
            "SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 15]);
  }
  return out;
}

// Hugging Face's regexes are Oniguruma's, where `\s` is Unicode's White_Space; PCRE2's `\s`
// under UCP differs at a few code points, so `\s` and `\S` are spelled out.
std::string pcre2_pattern(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char c = pattern[++i];
      if (c == 's')
        out += "\\p{White_Space}";
      else if (c == 'S')
        out += "\\P{White_Space}";
      else
        out += {'\\', c};
    } else {
      out.push_back(pattern[i]);
    }
  }
  return out;
}

TextPattern read_pattern(const Reader& r, const LargeJson& object, const std::string& path) {
  const LargeJson& p = r.member(object, "pattern", path);
  TextPattern out;
  if (p.is_object() && p.contains("String")) {
    out.literal = r.value<std::string>(p, "String", path + ".pattern", "");
    if (out.literal.empty()) r.fail(path + ".pattern.String", "empty");
  } else if (p.is_object() && p.contains("Regex")) {
    const std::string regex = r.value<std::string>(p, "Regex", path + ".pattern", "");
    out.literal = regex;
    out.regex.emplace(pcre2_pattern(regex), r.file + ": " + path + ".pattern.Regex");
  } else {
    r.fail(path + ".pattern", "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  return out;
}

// Real files have a handful of steps; the pre-tokenizer runs its steps by recursion, one level a
// step, so their number is bounded before any is read.
constexpr size_t kMaxSteps = 64;

// A "Sequence" step: its list `key` read step by step through read_step (which recurses into a
// nested sequence), every step counted against kMaxSteps before it is read.
template <typename Step>
void read_sequence(const Reader& r, const LargeJson& n, const std::string& key,
                   const std::string& path, std::vector<Step>& steps,
                   void (*read_step)(const Reader&, const LargeJson&, const std::string&,
                                     std::vector<Step>&)) {
  const std::string list_path = path + "." + key;
  const LargeJson& list = r.member(n, key, path);
  if (!list.is_array()) r.fail(list_path, "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    if (steps.size() >= kMaxSteps)
      r.fail(list_path, "more than " + std::to_string(kMaxSteps) + " steps in all");
    read_step(r, list[i], list_path + "[" + std::to_string(i) + "]", steps);
  }
}

void read_normalizer(const Reader& r, const LargeJson& n, const std::string& path,
                     std::vector<NormalizerStep>& steps) {
  if (n.is_null()) return;
  const std::string type = r.type(n, path);
  NormalizerStep s;
  if (type == "Sequence") {
    read_sequence(r, n, "normalizers", path, steps, read_normalizer);
    return;
  } else if (is_normalization_form(type)) {
    s.kind = NormalizerStep::kUnicodeForm;
    s.text = type;
  } else if (type == "Prepend") {
    s.kind = NormalizerStep::kPrepend;
    s.text = r.value<std::string>(n, "prepend", path, "");
  } else if (type == "Replace") {
    s.kind = NormalizerStep::kReplace;
    s.pattern = read_pattern(r, n, path);
    s.text = r.value<std::string>(n, "content", path, "");
  } else if (type == "Lowercase") {
    s.kind = NormalizerStep::kLowercase;
  } else if (type == "Strip") {
    s.kind = NormalizerStep::kStrip;
    s.strip_left = r.value<bool>(n, "strip_left", path, true);
    s.strip_right = r.value<bool>(n, "strip_right", path, true);
  } else {
    r.fail(path + ".type", quoted_excerpt(type) +
                               " is not supported (NFC, NFD, NFKC, NFKD, Prepend, Replace, "
                               "Lowercase, Strip, Sequence)");
  }
  steps.push_back(std::move(s));
}

SplitBehavior read_behavior(const Reader& r, const LargeJson& n, const std::string& path) {
  const std::string b = r.value<std::string>(n, "behavior", path, "Isolated");
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  r.fail(path + ".behavior", quoted_excerpt(b) + " is not a split behavior");
}

void read_pre_tokenizer(const Reader& r, const LargeJson& n, const std::string& path,
                        std::vector<PreTokenizerStep>& steps) {
  if (n.is_null()) return;
  const std::string type = r.type(n, path);
  PreTokenizerStep s;
  if (type == "Sequence") {
    read_sequence(r, n, "pretokenizers", path, steps, read_pre_tokenizer);
    return;
  }
  if (!steps.empty() && steps.back().kind == PreTokenizerStep::kByteLevel)
    r.fail(path,
           "a pre-tokenizer after ByteLevel is not supported (it would see byte-level "
           "characters)");
  if (type == "Split") {
    s.kind = PreTokenizerStep::kSplit;
    s.pattern = read_pattern(r, n, path);
    s.behavior = read_behavior(r, n, path);
    s.invert = r.value<bool>(n, "invert", path, false);
  } else if (type == "ByteLevel") {
    s.kind = PreTokenizerStep::kByteLevel;
    s.add_prefix_space = r.value<bool>(n, "add_prefix_space", path, true);
    s.use_regex = r.value<bool>(n, "use_regex", path, true);
    if (s.use_regex) {
      s.pattern.literal = kGpt2Pattern;
      s.pattern.regex.emplace(pcre2_pattern(kGpt2Pattern), "GPT-2's pattern");
    }
  } else if (type == "Metaspace") {
    s.kind = PreTokenizerStep::kMetaspace;
    s.replacement = r.value<std::string>(n, "replacement", path, "\xE2\x96\x81");
    if (s.replacement.empty() ||
        utf8_length(static_cast<unsigned char>(s.replacement[0])) != s.replacement.size())
      r.fail(path + ".replacement", "expected one character");
    const std::string scheme =
        r.value<std::string>(n, "prepend_scheme", path,
                             r.value<bool>(n, "add_prefix_space", path, true) ? "always" : "never");
    if (scheme == "always")
      s.prepend = PreTokenizerStep::kAlways;
    else if (scheme == "first")
      s.prepend = PreTokenizerStep::kFirst;
    else if (scheme == "never")
      s.prepend = PreTokenizerStep::kNever;
    else
      r.fail(path + ".prepend_scheme", quoted_excerpt(scheme) + " is not always, first, never");
    s.split = r.value<bool>(n, "split", path, true);
    s.pattern.literal = s.replacement;  // split: before each replacement character
    s.behavior = SplitBehavior::kMergedWithNext;
  } else if (type == "Digits") {
    s.kind = PreTokenizerStep::kDigits;
    s.pattern.literal = "\\p{N}";
    s.pattern.regex.emplace("\\p{N}", "the digits pattern");
    s.behavior = r.value<bool>(n, "individual_digits", path, false) ? SplitBehavior::kIsolated
                                                                    : SplitBehavior::kContiguous;
  } else {
    r.fail(path + ".type", quoted_excerpt(type) +
                               " is not supported (Split, ByteLevel, Metaspace, Digits, Sequence)");
  }
  steps.push_back(std::move(s));
}

void read_decoder(const Reader& r, const LargeJson& n, const std::string& path,
                  std::vector<DecoderStep>& steps) {
  if (n.is_null()) return;
  const std::string type = r.type(n, path);
  DecoderStep s;
  if (type == "Sequence") {
    read_sequence(r, n, "decoders", path, steps, read_decoder);
    return;
  } else if (type == "ByteLevel") {
    s.kind = DecoderStep::kByteLevel;
  } else if (type == "Replace") {
    s.kind = DecoderStep::kReplace;
    const TextPattern p = read_pattern(r, n, path);
    if (p.regex) r.fail(path + ".pattern", "a Regex pattern in a decoder is not supported");
    s.pattern = p.literal;
    s.content = r.value<std::string>(n, "content", path, "");
  } else if (type == "ByteFallback") {
    s.kind = DecoderStep::kByteFallback;
  } else if (type == "Fuse") {
    s.kind = DecoderStep::kFuse;
  } else if (type == "Strip") {
    s.kind = DecoderStep::kStrip;
    s.content = r.value<std::string>(n, "content", path, " ");
    s.start = r.value<int64_t>(n, "start", path, 0);
    s.stop = r.value<int64_t>(n, "stop", path, 0);
    if (s.content.size() != 1 || s.start < 0 || s.stop < 0 || s.start > 1024 || s.stop > 1024)
      r.fail(path, "expected one ASCII character and counts in [0, 1024]");
  } else if (type == "Metaspace") {
    s.kind = DecoderStep::kMetaspace;
    s.content = r.value<std::string>(n, "replacement", path, "\xE2\x96\x81");
    const std::string scheme =
        r.value<std::string>(n, "prepend_scheme", path,
                             r.value<bool>(n, "add_prefix_space", path, true) ? "always" : "never");
    s.prepend = scheme != "never";
  } else {
    r.fail(path + ".type", quoted_excerpt(type) +
                               " is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, "
                               "Metaspace, Sequence)");
  }
  steps.push_back(std::move(s));
}

// A token of the vocabulary as the model works on it: raw bytes for byte-level files.
std::string model_string(const Reader& r, const HfTokenizer::Model& m,
                         const std::array<int, 512>& alphabet, const std::string& text,
                         const std::string& key) {
  if (text.empty() || text.size() > kMaxTokenBytes)
    r.fail(key, "a token of " + std::to_string(text.size()) + " bytes");
  if (!m.byte_level) return text;
  std::string bytes;
  if (!byte_alphabet_decode(text, alphabet, bytes))
    r.fail(key, quoted_excerpt(text) + " is not written in the byte-level alphabet");
  return bytes;
}

void set_token(const Reader& r, HfTokenizer::Model& m, int32_t id, std::string text,
               const std::string& key) {
  const auto i = static_cast<size_t>(id);
  if (i >= m.token_text.size()) {
    m.token_text.resize(i + 1);
    m.used.resize(i + 1, false);
    m.is_added.resize(i + 1, false);
  }
  if (m.used[i] && m.token_text[i] != text)
    r.fail(key, "id " + std::to_string(id) + " is used twice (" + quoted_excerpt(m.token_text[i]) +
                    " and " + quoted_excerpt(text) + ")");
  m.used[i] = true;
  m.token_text[i] = std::move(text);
}

void read_model(const Reader& r, const LargeJson& model, HfTokenizer::Model& m) {
  const std::string type = r.type(model, "model");
  if (type != "BPE")
    r.fail("model.type", quoted_excerpt(type) +
                             " is not supported (BPE only; Unigram, WordPiece "
                             "and WordLevel models are not implemented)");
  if (r.value<double>(model, "dropout", "model", 0.0) != 0.0)
    r.fail("model.dropout", "BPE dropout is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!r.value<std::string>(model, key, "model", "").empty())
      r.fail(std::string("model.") + key, "is not supported");
  m.byte_fallback = r.value<bool>(model, "byte_fallback", "model", false);
  m.ignore_merges = r.value<bool>(model, "ignore_merges", "model", false);
  m.fuse_unk = r.value<bool>(model, "fuse_unk", "model", false);
  const std::array<int, 512> alphabet = byte_alphabet_to_byte();

  const LargeJson& vocab = r.member(model, "vocab", "model");
  if (!vocab.is_object() || vocab.empty() || vocab.size() > kMaxVocab)
    r.fail("model.vocab", "expected an object of 1 to " + std::to_string(kMaxVocab) + " tokens");
  for (const auto& [text, value] : vocab.items()) {
    const std::string key = "model.vocab[" + quoted_excerpt(text) + "]";
    const std::optional<int32_t> id = json_value<int32_t>(value);
    if (!id || *id < 0 || static_cast<size_t>(*id) >= kMaxVocab)
      r.fail(key, "expected an id in [0, " + std::to_string(kMaxVocab) + "), found " +
                      json_found(value));
    std::string s = model_string(r, m, alphabet, text, key);
    set_token(r, m, *id, s, key);
    if (!m.vocab.emplace(std::move(s), *id).second)
      r.fail(key, "the same token twice in the vocabulary");
  }

  const LargeJson& merges = r.member(model, "merges", "model");
  if (!merges.is_array() || merges.size() > kMaxVocab)
    r.fail("model.merges", "expected an array of at most " + std::to_string(kMaxVocab) + " merges");
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string key = "model.merges[" + std::to_string(i) + "]";
    std::string left, right;
    const LargeJson& e = merges[i];
    if (e.is_string()) {  // "left right"
      const std::string& s = e.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 >= s.size() ||
          s.find(' ', space + 1) != std::string::npos)
        r.fail(key, "expected two tokens separated by one space, found " + quoted_excerpt(s));
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      left = e[0].get<std::string>();
      right = e[1].get<std::string>();
    } else {
      r.fail(key, "expected \"left right\" or [left, right], found " + json_found(e));
    }
    const std::string lb = model_string(r, m, alphabet, left, key);
    const std::string rb = model_string(r, m, alphabet, right, key);
    const auto l = m.vocab.find(lb), rt = m.vocab.find(rb), merged = m.vocab.find(lb + rb);
    if (l == m.vocab.end() || rt == m.vocab.end() || merged == m.vocab.end())
      r.fail(key, quoted_excerpt(left + " " + right) + " names a token missing from model.vocab");
    m.merges.add(l->second, rt->second, merged->second);
  }

  const std::string unk = r.value<std::string>(model, "unk_token", "model", "");
  if (!unk.empty()) {
    const auto it = m.vocab.find(unk);
    if (it == m.vocab.end())
      r.fail("model.unk_token", quoted_excerpt(unk) + " is not in model.vocab");
    m.unk = it->second;
  }
  m.byte_token.assign(256, -1);
  for (int b = 0; b < 256; ++b) {
    std::string s;
    if (m.byte_level) {
      s = std::string(1, static_cast<char>(b));
    } else {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      s = name;
    }
    const auto it = m.vocab.find(s);
    if (it != m.vocab.end())
      m.byte_token[static_cast<size_t>(b)] = it->second;
    else if (m.byte_level)
      r.fail("model.vocab", "no token for the byte " + std::to_string(b));
  }
}

void read_added_tokens(const Reader& r, const LargeJson& list, HfTokenizer::Model& m) {
  if (list.is_null()) return;
  if (!list.is_array() || list.size() > kMaxVocab) r.fail("added_tokens", "expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string key = "added_tokens[" + std::to_string(i) + "]";
    const LargeJson& t = list[i];
    if (!t.is_object()) r.fail(key, "expected an object");
    AddedToken a;
    a.content = r.value<std::string>(t, "content", key, "");
    const int64_t id = r.value<int64_t>(t, "id", key, -1);
    if (a.content.empty() || a.content.size() > kMaxTokenBytes ||
        first_invalid_utf8(a.content) != std::string::npos)
      r.fail(key + ".content", "expected a non-empty UTF-8 string");
    if (id < 0 || static_cast<size_t>(id) >= kMaxVocab)
      r.fail(key + ".id", "missing or out of range");
    a.id = static_cast<int32_t>(id);
    a.special = r.value<bool>(t, "special", key, false);
    a.single_word = r.value<bool>(t, "single_word", key, false);
    a.lstrip = r.value<bool>(t, "lstrip", key, false);
    a.rstrip = r.value<bool>(t, "rstrip", key, false);
    // An added token may repeat a vocabulary token under its id (Llama 2's <s>); any other reuse
    // of an id is two tokens for one id.
    const auto i_id = static_cast<size_t>(a.id);
    const bool in_vocab = i_id < m.used.size() && m.used[i_id] && !m.is_added[i_id];
    if (!(in_vocab && m.token_text[i_id] == a.content))
      set_token(r, m, a.id, a.content, key + ".id");
    m.token_text[i_id] = a.content;  // added tokens decode as their text
    m.is_added[i_id] = true;
    m.added.push_back(std::move(a));
  }
  std::sort(m.added.begin(), m.added.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.content.size() > b.content.size();
  });
  for (uint32_t i = 0; i < m.added.size(); ++i)
    m.added_by_first_byte[static_cast<unsigned char>(m.added[i].content[0])].push_back(i);
}

// The BOS/EOS tokens of tokenizer_config.json: a string, or {"content": ...} in older files.
std::string config_token(const Reader& r, const LargeJson& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) return r.value<std::string>(*it, "content", key, "");
  r.fail(key, "expected a string or an object with content");
}

bool newline_in(const std::string& s) {
  return s.find('\n') != std::string::npos;
}

// Whether a Replace may touch a letter or digit: any ASCII letter or digit, or any non-ASCII
// character (not classified here, so assumed to be one).
bool letter_or_digit_in(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || static_cast<unsigned char>(c) >= 0x80;
  });
}

// See HfTokenizer::cuts_after_newline. Normalizers: Unicode forms leave "\n" and the letter or
// digit after it alone (neither composes with a "\n"); Prepend acts at the start only (skipped on a
// continuation); a Replace that touches neither; Strip or Lowercase anything else: not proven.
// Pre-tokenizers: one of the proven patterns, GPT-2's, or none or Metaspace when no merge can join
// a "\n" to a neighbour (then BPE never merges across it).
bool newline_cut_is_safe(const HfTokenizer::Model& m) {
  for (const AddedToken& a : m.added)
    if (newline_in(a.content)) return false;
  for (const NormalizerStep& s : m.normalizer) {
    if (s.kind == NormalizerStep::kReplace &&
        (newline_in(s.pattern.literal) || letter_or_digit_in(s.pattern.literal) ||
         s.pattern.regex || newline_in(s.text)))
      return false;
    if (s.kind == NormalizerStep::kLowercase || s.kind == NormalizerStep::kStrip) return false;
  }
  bool regex_proven = false;
  for (const PreTokenizerStep& s : m.pre_tokenizer) {
    if (s.kind == PreTokenizerStep::kSplit) {
      const bool known =
          std::any_of(std::begin(kNewlineSafePatterns), std::end(kNewlineSafePatterns),
                      [&](const char* p) { return s.pattern.literal == p; });
      if (!known || !s.pattern.regex || s.invert || s.behavior != SplitBehavior::kIsolated)
        return false;
      regex_proven = true;
    } else if (s.kind == PreTokenizerStep::kByteLevel) {
      if (s.add_prefix_space) return false;
      regex_proven = regex_proven || s.use_regex;
    } else if (s.kind == PreTokenizerStep::kDigits) {
      return false;
    }
  }
  if (regex_proven) return true;
  for (size_t id = 0; id < m.token_text.size(); ++id)
    if (m.used[id] && !m.is_added[id] && m.token_text[id].size() > 1 &&
        newline_in(m.token_text[id]))
      return false;
  return true;
}

}  // namespace

std::string read_tokenizer_file(const std::string& path, const char* what) {
  std::error_code ec;
  GPT_INPUT_CHECK(fs::is_regular_file(path, ec), what << " " << path << ": no such file");
  const uintmax_t size = fs::file_size(path, ec);
  GPT_INPUT_CHECK(!ec && size <= kMaxFileBytes,
                  what << " " << path << ": " << size << " bytes, more than a tokenizer file has");
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  GPT_INPUT_CHECK(in.good() || in.eof(), what << " " << path << ": cannot be read");
  return text;
}

HfTokenizer::HfTokenizer(const std::string& path) : m_(std::make_unique<Model>()) {
  Model& m = *m_;
  std::error_code ec;
  m.json_path = fs::is_directory(path, ec) ? (fs::path(path) / "tokenizer.json").string() : path;
  GPT_INPUT_CHECK(fs::exists(m.json_path, ec),
                  "tokenizer " << path << ": no tokenizer.json "
                               << (m.json_path == path ? "file" : "in the directory"));
  const std::string text = read_tokenizer_file(m.json_path, "tokenizer");
  m.identity = "hf-sha256:" + sha256_hex(text);
  const Reader r{"tokenizer " + m.json_path};
  const LargeJson json = parse_large_json_object(text, "tokenizer " + m.json_path);

  // The pre-tokenizer first: whether it ends in ByteLevel decides how vocabulary strings read.
  read_pre_tokenizer(r, json.contains("pre_tokenizer") ? json["pre_tokenizer"] : LargeJson(),
                     "pre_tokenizer", m.pre_tokenizer);
  m.byte_level =
      !m.pre_tokenizer.empty() && m.pre_tokenizer.back().kind == PreTokenizerStep::kByteLevel;
  read_normalizer(r, json.contains("normalizer") ? json["normalizer"] : LargeJson(), "normalizer",
                  m.normalizer);
  read_decoder(r, json.contains("decoder") ? json["decoder"] : LargeJson(), "decoder", m.decoder);
  read_model(r, r.member(json, "model", "tokenizer"), m);
  read_added_tokens(r, json.contains("added_tokens") ? json["added_tokens"] : LargeJson(), m);

  // Whether the model expects a BOS: a TemplateProcessing post-processor starting with a
  // special token, or add_bos_token in tokenizer_config.json.
  std::string template_first;
  if (json.contains("post_processor") && json["post_processor"].is_object()) {
    const LargeJson& p = json["post_processor"];
    if (p.value("type", "") == "TemplateProcessing" && p.contains("single") &&
        p["single"].is_array() && !p["single"].empty() && p["single"][0].is_object() &&
        p["single"][0].contains("SpecialToken"))
      template_first = r.value<std::string>(p["single"][0]["SpecialToken"], "id",
                                            "post_processor.single[0].SpecialToken", "");
  }
  bool add_bos = false;
  std::string bos_text, eos_text;
  const fs::path config = fs::path(m.json_path).parent_path() / "tokenizer_config.json";
  if (fs::is_regular_file(config, ec)) {
    m.config_path = config.string();
    const Reader c{"tokenizer config " + m.config_path};
    const LargeJson cj =
        parse_large_json_object(read_tokenizer_file(m.config_path, "tokenizer config"),
                                "tokenizer config " + m.config_path);
    bos_text = config_token(c, cj, "bos_token");
    eos_text = config_token(c, cj, "eos_token");
    add_bos = c.value<bool>(cj, "add_bos_token", "tokenizer_config", false);
    for (const auto& [key, value] :
         {std::pair{"bos_token", &bos_text}, std::pair{"eos_token", &eos_text}})
      if (!value->empty() && token_id(*value) < 0)
        c.fail(key, quoted_excerpt(*value) + " is not a token of " + m.json_path);
  }
  m.bos = bos_text.empty() ? -1 : token_id(bos_text);
  m.eos = eos_text.empty() ? -1 : token_id(eos_text);
  if (m.bos >= 0 && (add_bos || (!template_first.empty() && template_first == bos_text))) {
    m.document_token = m.bos;
    m.document_token_first = true;
  } else {
    for (const AddedToken& a : m.added)
      if (a.special && a.content == "<|endoftext|>") m.document_token = a.id;
    if (m.document_token < 0) m.document_token = m.eos;
  }
  m.cuts_after_newline = newline_cut_is_safe(m);
}

HfTokenizer::~HfTokenizer() = default;

std::string hf_tokenizer_identity(const std::string& json_path) {
  return "hf-sha256:" + sha256_hex(read_tokenizer_file(json_path, "tokenizer"));
}

const std::string& HfTokenizer::identity() const {
  return m_->identity;
}
const std::string& HfTokenizer::json_path() const {
  return m_->json_path;
}
const std::string& HfTokenizer::config_path() const {
  return m_->config_path;
}
int64_t HfTokenizer::vocab_size() const {
  return static_cast<int64_t>(m_->token_text.size());
}
bool HfTokenizer::has_token(int64_t id) const {
  return id >= 0 && id < vocab_size() && m_->used[static_cast<size_t>(id)];
}
int64_t HfTokenizer::bos() const {
  return m_->bos;
}
int64_t HfTokenizer::eos() const {
  return m_->eos;
}
int64_t HfTokenizer::document_token() const {
  return m_->document_token;
}
bool HfTokenizer::document_token_first() const {
  return m_->document_token_first;
}
bool HfTokenizer::cuts_after_newline() const {
  return m_->cuts_after_newline;
}

size_t HfTokenizer::cut_at_or_after(std::string_view text, size_t from,
                                    RegexScratch& scratch) const {
  if (!m_->cuts_after_newline) return std::string_view::npos;
  // The character at `at` alone is the subject: the text may hold invalid UTF-8 (reported when it
  // is encoded) or end inside a character, which is then no letter.
  const auto letter_or_digit = [&](size_t at) {
    const size_t length = utf8_length(static_cast<unsigned char>(text[at]));
    if (at + length > text.size()) return false;
    const std::string_view c = text.substr(at, length);
    size_t b = 0, e = 0;
    return first_invalid_utf8(c) == std::string_view::npos &&
           m_->letter_or_digit.find(c, 0, scratch, b, e, true);
  };
  for (size_t p = std::max<size_t>(from, 2); p < text.size(); ++p) {
    if (text[p - 1] != '\n') continue;
    if (letter_or_digit(p) && letter_or_digit(utf8_char_start(text, p - 2))) return p;
  }
  return std::string_view::npos;
}
bool HfTokenizer::decodes_exactly() const {
  if (!m_->byte_level || !m_->normalizer.empty()) return false;
  for (const DecoderStep& d : m_->decoder)
    if (d.kind != DecoderStep::kByteLevel) return false;
  return true;
}

int64_t HfTokenizer::token_id(const std::string& text) const {
  for (const AddedToken& a : m_->added)
    if (a.content == text) return a.id;
  if (m_->byte_level) {
    std::string bytes;
    if (!byte_alphabet_decode(text, byte_alphabet_to_byte(), bytes)) return -1;
    const auto it = m_->vocab.find(bytes);
    return it == m_->vocab.end() ? -1 : it->second;
  }
  const auto it = m_->vocab.find(text);
  return it == m_->vocab.end() ? -1 : it->second;
}

}  // namespace gpt
