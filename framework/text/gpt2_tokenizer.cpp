// GPT-2 byte-level BPE (see gpt2_tokenizer.h). Token strings in the files are written in GPT-2's
// byte-to-unicode alphabet; they are turned back into raw bytes once, at load, so encoding works
// on bytes throughout and never builds the unicode strings.
#include "framework/text/gpt2_tokenizer.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "framework/check.h"
#include "framework/json.h"
#include "framework/text/unicode_text.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

// GPT-2's pre-tokenization pattern (OpenAI's encoder.py, the same in tiktoken's r50k/gpt2):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s spelled \p{White_Space}: that is what \s means in tiktoken's (Rust) regex, whereas
// PCRE2's \s under UCP also takes U+180E, which left White_Space in Unicode 6.3.
constexpr const char* kPattern =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\p{White_Space}\\p{L}\\p{N}]+"
    "|\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+";

constexpr const char* kEndOfText = "<|endoftext|>";

std::string read_text_file(const std::string& path, const char* what) {
  std::error_code ec;
  GPT_INPUT_CHECK(
      fs::exists(path, ec),
      what << " " << path << ": no such file (scripts/fetch_gpt2_tokenizer.sh fetches GPT-2's)");
  GPT_INPUT_CHECK(fs::is_regular_file(path, ec), what << " " << path << ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  GPT_INPUT_CHECK(in.good(), what << " " << path << ": cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  GPT_INPUT_CHECK(!in.bad(), what << " " << path << ": read failed");
  return text;
}

}  // namespace

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_path, const std::string& merges_path)
    : regex_(kPattern, "GPT-2 pattern") {
  const std::array<int, 512> to_byte = byte_alphabet_to_byte();

  // Vocabulary: a JSON object of token string -> id, ids 0..n-1 each used once.
  const LargeJson vocab =
      parse_large_json_object(read_text_file(vocab_path, "vocabulary"), "vocabulary " + vocab_path);
  GPT_INPUT_CHECK(!vocab.empty() && vocab.size() <= (1u << 31) - 1,
                  "vocabulary " << vocab_path << " has " << vocab.size() << " entries");
  token_bytes_.assign(vocab.size(), std::string());
  std::vector<bool> seen(vocab.size(), false);
  std::string bytes;
  for (const auto& item : vocab.items()) {
    const std::string& key = item.key();
    const auto& value = item.value();
    const std::optional<int32_t> number = json_value<int32_t>(value);
    GPT_INPUT_CHECK(number && *number >= 0 && *number < static_cast<int64_t>(vocab.size()),
                    "vocabulary " << vocab_path << ": the id of " << quoted_excerpt(key) << " ("
                                  << json_found(value) << ") is not an integer in [0, "
                                  << vocab.size() << ")");
    const int32_t id = *number;
    GPT_INPUT_CHECK(!seen[static_cast<size_t>(id)],
                    "vocabulary " << vocab_path << ": id " << id << " is used twice");
    seen[static_cast<size_t>(id)] = true;
    if (key == kEndOfText) {
      eot_ = id;
      bytes = key;  // decodes as its text, as tiktoken's decode does
    } else {
      GPT_INPUT_CHECK(byte_alphabet_decode(key, to_byte, bytes) && !bytes.empty(),
                      "vocabulary " << vocab_path << ": " << quoted_excerpt(key)
                                    << " is not a string of GPT-2's byte alphabet");
    }
    GPT_INPUT_CHECK(byte_token_.emplace(bytes, id).second || id == eot_,
                    "vocabulary " << vocab_path << ": " << quoted_excerpt(key)
                                  << " repeats the bytes of id " << byte_token_.at(bytes));
    token_bytes_[static_cast<size_t>(id)] = bytes;
  }
  for (int b = 0; b < 256; ++b)
    GPT_INPUT_CHECK(byte_token_.count(std::string(1, static_cast<char>(b))),
                    "vocabulary " << vocab_path << " has no token for the byte " << b);

  // Merges: an optional "#version" line, then "left right" per line, rank = order.
  std::istringstream merges(read_text_file(merges_path, "merges file"));
  std::string line, left, right;
  for (int64_t number = 1; std::getline(merges, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (number == 1 && line.rfind("#version", 0) == 0)) continue;
    const size_t space = line.find(' ');
    GPT_INPUT_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                        line.find(' ', space + 1) == std::string::npos,
                    "merges file " << merges_path << " line " << number
                                   << ": expected two tokens separated by one space, got "
                                   << quoted_excerpt(line));
    std::string lb, rb;
    const bool ok = byte_alphabet_decode(line.substr(0, space), to_byte, lb) &&
                    byte_alphabet_decode(line.substr(space + 1), to_byte, rb);
    GPT_INPUT_CHECK(ok, "merges file " << merges_path << " line " << number << ": "
                                       << quoted_excerpt(line)
                                       << " is not in GPT-2's byte alphabet");
    const auto l = byte_token_.find(lb), r = byte_token_.find(rb), m = byte_token_.find(lb + rb);
    GPT_INPUT_CHECK(l != byte_token_.end() && r != byte_token_.end() && m != byte_token_.end(),
                    "merges file " << merges_path << " line " << number << ": "
                                   << quoted_excerpt(line)
                                   << " names a token missing from the vocabulary " << vocab_path);
    merges_.add(l->second, r->second, m->second);
  }
  GPT_INPUT_CHECK(merges_.size() > 0, "merges file " << merges_path << " has no merges");
}

Gpt2Tokenizer::~Gpt2Tokenizer() = default;

void Gpt2Tokenizer::encode(std::string_view text, std::vector<int32_t>& ids, uint64_t offset) {
  // The first match checks the whole subject's UTF-8 once; later matches skip the check, which
  // would otherwise rescan the rest of the subject at every piece.
  bool checked = false;
  for (size_t start = 0, begin = 0, end = 0; start < text.size(); start = end) {
    const bool found = regex_.find(text, start, scratch_, begin, end, checked, offset);
    checked = true;
    // Every character is matched by some branch, so pieces tile the text.
    GPT_CHECK(found && begin == start && end > start,
              "GPT-2 pattern skipped text at byte " << start);
    encode_piece(text.substr(start, end - start), ids);
  }
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) {
  std::vector<int32_t> ids;
  encode(text, ids);
  return ids;
}

// The piece's bytes, merged by rank as tiktoken does (BpeMerges).
void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& ids) {
  const std::string key(piece);
  if (const auto hit = cache_.find(key); hit != cache_.end()) {
    ids.insert(ids.end(), hit->second.begin(), hit->second.end());
    return;
  }
  std::vector<int32_t> out;
  out.reserve(piece.size());
  for (char c : piece) out.push_back(byte_token_.at(std::string(1, c)));
  merges_.apply(out);
  ids.insert(ids.end(), out.begin(), out.end());
  // Bounded: a stream of distinct pieces (hashes, numbers) must not grow memory without end.
  if (cache_.size() >= (1u << 20)) cache_.clear();
  cache_.emplace(key, std::move(out));
}

std::string Gpt2Tokenizer::decode(const int32_t* ids, size_t n) const {
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    GPT_INPUT_CHECK(ids[i] >= 0 && ids[i] < vocab_size(),
                    "token " << ids[i] << " is not in the GPT-2 vocabulary of " << vocab_size());
    text += token_bytes_[static_cast<size_t>(ids[i])];
  }
  return text;
}

}  // namespace gpt
