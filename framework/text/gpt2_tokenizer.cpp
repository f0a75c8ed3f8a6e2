// GPT-2 byte-level BPE (see gpt2_tokenizer.h). Token strings in the files are written in GPT-2's
// byte-to-unicode alphabet; they are turned back into raw bytes once, at load, so encoding works
// on bytes throughout and never builds the unicode strings.
#include "framework/text/gpt2_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <queue>
#include <sstream>

#include "framework/check.h"
#include "framework/json.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

// PCRE2's own text for an error code (compile errors, UTF-8 errors, match failures).
std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> text{};
  pcre2_get_error_message(code, text.data(), text.size());
  return reinterpret_cast<const char*>(text.data());
}

// GPT-2's pre-tokenization pattern (OpenAI's encoder.py, the same in tiktoken's r50k/gpt2):
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// with \s spelled \p{White_Space}: that is what \s means in tiktoken's (Rust) regex, whereas
// PCRE2's \s under UCP also takes U+180E, which left White_Space in Unicode 6.3.
constexpr const char* kPattern =
    "'(?:[sdmt]|ll|ve|re)| ?\\p{L}+| ?\\p{N}+| ?[^\\p{White_Space}\\p{L}\\p{N}]+"
    "|\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+";

constexpr const char* kEndOfText = "<|endoftext|>";

// GPT-2's byte-to-unicode map (OpenAI encoder.py bytes_to_unicode): the printable bytes '!'..'~',
// 0xA1..0xAC and 0xAE..0xFF stand for themselves; the other 68 bytes, in increasing order, for
// code points 256, 257, ... Returned inverted: code point -> byte, -1 where none.
std::array<int, 512> unicode_to_byte() {
  std::array<int, 512> map;
  map.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map[static_cast<size_t>(printable ? b : next++)] = b;
  }
  return map;
}

// A token string of the files -> its raw bytes; false if it is not valid UTF-8 over the 256
// code points of the byte alphabet.
bool token_string_to_bytes(const std::string& s, const std::array<int, 512>& map,
                           std::string& bytes) {
  bytes.clear();
  for (size_t i = 0; i < s.size();) {
    const auto c0 = static_cast<unsigned char>(s[i]);
    uint32_t cp = 0;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < s.size() &&
               (static_cast<unsigned char>(s[i + 1]) & 0xC0) == 0x80) {
      cp = (c0 & 0x1Fu) << 6 | (static_cast<unsigned char>(s[i + 1]) & 0x3Fu);
      i += 2;
    } else {
      return false;  // the alphabet ends at U+0143: two UTF-8 bytes at most
    }
    if (cp >= map.size() || map[cp] < 0) return false;
    bytes.push_back(static_cast<char>(map[cp]));
  }
  return true;
}

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

uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

}  // namespace

struct Gpt2Tokenizer::Regex {
  pcre2_code* code = nullptr;
  pcre2_match_data* match = nullptr;
  ~Regex() {
    pcre2_match_data_free(match);
    pcre2_code_free(code);
  }
};

Gpt2Tokenizer::Gpt2Tokenizer(const std::string& vocab_path, const std::string& merges_path) {
  const std::array<int, 512> to_byte = unicode_to_byte();

  // Vocabulary: a JSON object of token string -> id, ids 0..n-1 each used once.
  const Json vocab =
      parse_json_object(read_text_file(vocab_path, "vocabulary"), "vocabulary " + vocab_path);
  GPT_INPUT_CHECK(!vocab.empty() && vocab.size() <= (1u << 31) - 1,
                  "vocabulary " << vocab_path << " has " << vocab.size() << " entries");
  token_bytes_.assign(vocab.size(), std::string());
  std::vector<bool> seen(vocab.size(), false);
  std::string bytes;
  for (const auto& [key, value] : vocab.items()) {
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
      GPT_INPUT_CHECK(token_string_to_bytes(key, to_byte, bytes) && !bytes.empty(),
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
    const bool ok = token_string_to_bytes(line.substr(0, space), to_byte, lb) &&
                    token_string_to_bytes(line.substr(space + 1), to_byte, rb);
    GPT_INPUT_CHECK(ok, "merges file " << merges_path << " line " << number << ": "
                                       << quoted_excerpt(line)
                                       << " is not in GPT-2's byte alphabet");
    const auto l = byte_token_.find(lb), r = byte_token_.find(rb), m = byte_token_.find(lb + rb);
    GPT_INPUT_CHECK(l != byte_token_.end() && r != byte_token_.end() && m != byte_token_.end(),
                    "merges file " << merges_path << " line " << number << ": "
                                   << quoted_excerpt(line)
                                   << " names a token missing from the vocabulary " << vocab_path);
    const auto rank = static_cast<int32_t>(merge_result_.size());
    // A repeated pair keeps its first (lowest) rank, as a dictionary built in file order would.
    if (merge_rank_.emplace(pair_key(l->second, r->second), rank).second)
      merge_result_.push_back(m->second);
  }
  GPT_INPUT_CHECK(!merge_result_.empty(), "merges file " << merges_path << " has no merges");

  regex_ = std::make_unique<Regex>();
  int error = 0;
  PCRE2_SIZE offset = 0;
  regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                               PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  GPT_CHECK(regex_->code != nullptr, "GPT-2 pattern: " << pcre2_message(error) << " at " << offset);
  // JIT is many times faster; where the platform has none, the interpreter gives the same result.
  pcre2_jit_compile(regex_->code, PCRE2_JIT_COMPLETE);
  regex_->match = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
  GPT_CHECK(regex_->match != nullptr, "out of memory for PCRE2 match data");
}

Gpt2Tokenizer::~Gpt2Tokenizer() = default;

void Gpt2Tokenizer::encode(std::string_view text, std::vector<int32_t>& ids, uint64_t offset) {
  if (text.empty()) return;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  // The first match checks the whole subject's UTF-8 once; later matches skip the check, which
  // would otherwise rescan the rest of the subject at every piece.
  uint32_t options = 0;
  for (size_t start = 0; start < n;) {
    const int rc = pcre2_match(regex_->code, subject, n, start, options, regex_->match, nullptr);
    if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21)
      fail_input(GPT_MSG("invalid UTF-8 at byte " << offset + pcre2_get_startchar(regex_->match)
                                                  << " (" << pcre2_message(rc) << ")"));
    GPT_CHECK(rc > 0, "GPT-2 pattern matched nothing at byte "
                          << start << (rc < 0 ? ": " + pcre2_message(rc) : std::string()));
    options = PCRE2_NO_UTF_CHECK;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(regex_->match);
    // Every character is matched by some branch, so pieces tile the text.
    GPT_CHECK(ov[0] == start && ov[1] > start, "GPT-2 pattern skipped text at byte " << start);
    encode_piece(text.substr(start, ov[1] - start), ids);
    start = ov[1];
  }
}

std::vector<int32_t> Gpt2Tokenizer::encode(std::string_view text) {
  std::vector<int32_t> ids;
  encode(text, ids);
  return ids;
}

// Merges the piece's byte tokens: repeatedly the adjacent pair of lowest rank (the leftmost of
// equals), one pair at a time, as tiktoken does. A heap of candidate pairs keeps long pieces
// (runs of spaces, long words) at n log n; entries made stale by a merge are skipped when popped.
void Gpt2Tokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& ids) {
  const std::string key(piece);
  if (const auto hit = cache_.find(key); hit != cache_.end()) {
    ids.insert(ids.end(), hit->second.begin(), hit->second.end());
    return;
  }
  const auto n = static_cast<int32_t>(piece.size());
  std::vector<int32_t> token(static_cast<size_t>(n)), next(static_cast<size_t>(n)),
      prev(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    token[static_cast<size_t>(i)] = byte_token_.at(std::string(1, piece[static_cast<size_t>(i)]));
    next[static_cast<size_t>(i)] = i + 1 < n ? i + 1 : -1;
    prev[static_cast<size_t>(i)] = i - 1;
  }
  struct Candidate {
    int32_t rank, left, left_token, right_token;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto offer = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = next[static_cast<size_t>(left)];
    if (right < 0) return;
    const int32_t lt = token[static_cast<size_t>(left)], rt = token[static_cast<size_t>(right)];
    const auto it = merge_rank_.find(pair_key(lt, rt));
    if (it != merge_rank_.end()) heap.push({it->second, left, lt, rt});
  };
  for (int32_t i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const auto left = static_cast<size_t>(c.left);
    const int32_t right = next[left];
    if (token[left] != c.left_token || right < 0 ||
        token[static_cast<size_t>(right)] != c.right_token)
      continue;  // a merge since it was offered changed one side
    token[left] = merge_result_[static_cast<size_t>(c.rank)];
    token[static_cast<size_t>(right)] = -1;
    next[left] = next[static_cast<size_t>(right)];
    if (next[left] >= 0) prev[static_cast<size_t>(next[left])] = c.left;
    offer(prev[left]);
    offer(c.left);
  }
  std::vector<int32_t> out;
  for (int32_t i = 0; i >= 0; i = next[static_cast<size_t>(i)])
    out.push_back(token[static_cast<size_t>(i)]);
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
