// Encoding and decoding with a tokenizer.json (see hf_tokenizer.h), in Hugging Face's order:
// split the text at added tokens (leftmost, longest), then each stretch of ordinary text through
// the normalizer, the pre-tokenizer (into words) and the BPE model; decoding runs the decoder's
// steps over the tokens' strings. The step semantics follow the tokenizers library's definitions
// (SplitDelimiterBehavior, Metaspace's prepend_scheme, ByteFallback's replacement characters).
#include <algorithm>
#include <cstdio>

#include "framework/check.h"
#include "framework/text/hf_tokenizer_model.h"
#include "framework/text/unicode_text.h"

namespace gpt {
namespace {

// Words longer than this are merged but not cached: they rarely repeat, and a SentencePiece-style
// file without a pre-tokenizer makes a whole line one word.
constexpr size_t kMaxCachedWord = 128;
constexpr size_t kMaxCacheEntries = 1u << 18;

struct Section {
  size_t begin, end;
  int32_t added;  // the added token's id, or -1 for ordinary text
};

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty() || s.find(from) == std::string::npos) return;
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size())
    out.append(s, pos, hit - pos).append(to);
  out.append(s, pos);
  s.swap(out);
}

bool white_space_at(std::string_view s, size_t i, size_t& length) {
  return is_white_space(utf8_decode(s, i, length));
}

size_t skip_white_space(std::string_view s, size_t i, size_t end) {
  size_t length = 0;
  while (i < end && white_space_at(s, i, length)) i += length;
  return i;
}

// The start of the last run of White_Space ending at `end`.
size_t trim_white_space_back(std::string_view s, size_t begin, size_t end) {
  while (end > begin) {
    const size_t start = utf8_char_start(s, end - 1, begin);
    size_t length = 0;
    if (!white_space_at(s, start, length)) break;
    end = start;
  }
  return end;
}

bool is_word_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || u >= 0x80;
}

}  // namespace

struct HfEncoder::State {
  RegexScratch regex;
  std::unordered_map<std::string, std::vector<int32_t>, StringViewHash, std::equal_to<>> cache;
  std::vector<Section> sections;
  std::vector<int32_t> symbols;
};

HfEncoder::HfEncoder(const HfTokenizer& tokenizer)
    : tokenizer_(tokenizer), state_(std::make_unique<State>()) {}
HfEncoder::~HfEncoder() = default;

namespace {

// The sections of `text`: ordinary text between the added tokens found (lstrip/rstrip trim the
// White_Space beside a token; single_word tokens only match between non-word characters).
void split_added(const HfTokenizer::Model& m, std::string_view text, bool allow_special,
                 std::vector<Section>& out) {
  out.clear();
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* hit = nullptr;
    for (uint32_t k : m.added_by_first_byte[static_cast<unsigned char>(text[i])]) {
      const AddedToken& a = m.added[k];
      if ((a.special && !allow_special) || text.compare(i, a.content.size(), a.content) != 0)
        continue;
      const size_t after = i + a.content.size();
      if (a.single_word && ((i > 0 && is_word_byte(text[i - 1])) ||
                            (after < text.size() && is_word_byte(text[after]))))
        continue;
      hit = &a;
      break;  // longest first
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t text_end = i;
    if (hit->lstrip) text_end = trim_white_space_back(text, start, i);
    if (text_end > start) out.push_back({start, text_end, -1});
    out.push_back({i, i + hit->content.size(), hit->id});
    i += hit->content.size();
    if (hit->rstrip) i = skip_white_space(text, i, text.size());
    start = i;
  }
  if (start < text.size()) out.push_back({start, text.size(), -1});
}

// `continues`: the text continues a document, so Prepend does not apply.
void normalize(const HfTokenizer::Model& m, std::string& s, bool continues, RegexScratch& scratch) {
  for (const NormalizerStep& n : m.normalizer) {
    switch (n.kind) {
      case NormalizerStep::kUnicodeForm:
        unicode_normalize(n.text, s);
        break;
      case NormalizerStep::kPrepend:
        if (!s.empty() && !continues) s = n.text + s;
        break;
      case NormalizerStep::kReplace:
        if (!n.pattern.regex) {
          replace_all(s, n.pattern.literal, n.text);
        } else {
          std::string out;
          size_t pos = 0, b = 0, e = 0;
          while (pos <= s.size() && n.pattern.regex->find(s, pos, scratch, b, e)) {
            out.append(s, pos, b - pos).append(n.text);
            pos = e;
            if (e == b) {  // an empty match: keep the next character and go on after it
              if (b == s.size()) break;
              pos = b + utf8_length(static_cast<unsigned char>(s[b]));
              out.append(s, b, pos - b);
            }
          }
          out.append(s, pos);
          s.swap(out);
        }
        break;
      case NormalizerStep::kLowercase:
        unicode_lowercase(s);
        break;
      case NormalizerStep::kStrip: {
        const size_t b = n.strip_left ? skip_white_space(s, 0, s.size()) : 0;
        const size_t e = n.strip_right ? trim_white_space_back(s, b, s.size()) : s.size();
        s = s.substr(b, e - b);
        break;
      }
    }
  }
}

// The pieces of one word under a pattern with a SplitDelimiterBehavior, as the tokenizers
// library cuts them: the word is cut into matches and the gaps between them, then those are kept,
// dropped or joined. Each piece goes to `emit(begin, end)` in order. Isolated (every Split of the
// Llama 3 and Qwen files) streams; the other behaviours join neighbours, so they collect first.
template <typename Emit>
void split_word(std::string_view s, const TextPattern& pattern, SplitBehavior behavior, bool invert,
                RegexScratch& scratch, Emit&& emit) {
  struct Segment {
    size_t b, e;
    bool match;
  };
  std::vector<Segment> segments;
  const bool stream = behavior == SplitBehavior::kIsolated;
  auto segment = [&](size_t b, size_t e, bool match) {
    if (stream)
      emit(b, e);
    else
      segments.push_back({b, e, match});
  };
  size_t pos = 0, prev = 0, b = 0, e = 0;
  while (pos < s.size()) {
    if (pattern.regex) {
      if (!pattern.regex->find(s, pos, scratch, b, e)) break;
    } else {
      b = s.find(pattern.literal, pos);
      if (b == std::string_view::npos) break;
      e = b + pattern.literal.size();
    }
    if (e == b) {  // empty matches cut nothing
      pos = b + utf8_length(static_cast<unsigned char>(s[b]));
      continue;
    }
    if (b > prev) segment(prev, b, invert);
    segment(b, e, !invert);
    pos = prev = e;
  }
  if (prev < s.size()) segment(prev, s.size(), invert);
  if (stream) return;

  std::vector<std::pair<size_t, size_t>> pieces;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Segment& g : segments)
        if (!g.match) pieces.emplace_back(g.b, g.e);
      break;
    case SplitBehavior::kIsolated:
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Segment& g : segments) {
        if (g.match && !previous_match && !pieces.empty())
          pieces.back().second = g.e;
        else
          pieces.emplace_back(g.b, g.e);
        previous_match = g.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = segments.rbegin(); it != segments.rend(); ++it) {
        if (it->match && !previous_match && !pieces.empty())
          pieces.back().first = it->b;
        else
          pieces.emplace_back(it->b, it->e);
        previous_match = it->match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Segment& g : segments) {
        if (g.match == previous_match && !pieces.empty())
          pieces.back().second = g.e;
        else
          pieces.emplace_back(g.b, g.e);
        previous_match = g.match;
      }
      break;
  }
  for (auto [pb, pe] : pieces)
    if (pe > pb) emit(pb, pe);
}

// Runs pre-tokenizer steps [k, end) on one word and hands each resulting word to `sink`, word by
// word, so a section of megabytes never becomes a list of words. `first`: the word begins its
// section; `starts_text`: the section begins the whole text (Metaspace's prepend_scheme
// "first"); `continues`: it begins a continuation (no prefix space or ▁ is added to its first
// word).
template <typename Sink>
void pre_tokenize(const HfTokenizer::Model& m, size_t k, std::string_view word, bool first,
                  bool starts_text, bool continues, RegexScratch& scratch, Sink& sink) {
  if (word.empty()) return;
  if (k == m.pre_tokenizer.size()) return sink(word);
  const PreTokenizerStep& p = m.pre_tokenizer[k];
  auto next = [&](std::string_view s) {
    return [&, s](size_t b, size_t e) {
      pre_tokenize(m, k + 1, s.substr(b, e - b), first && b == 0, starts_text, continues, scratch,
                   sink);
    };
  };
  switch (p.kind) {
    case PreTokenizerStep::kSplit:
    case PreTokenizerStep::kDigits:
      split_word(word, p.pattern, p.behavior, p.invert, scratch, next(word));
      return;
    case PreTokenizerStep::kByteLevel: {
      std::string spaced;
      std::string_view w = word;
      if (p.add_prefix_space && !(first && continues) && word[0] != ' ') {
        spaced.push_back(' ');
        spaced.append(word);
        w = spaced;
      }
      if (p.use_regex)
        split_word(w, p.pattern, p.behavior, p.invert, scratch, next(w));
      else
        pre_tokenize(m, k + 1, w, first, starts_text, continues, scratch, sink);
      return;
    }
    case PreTokenizerStep::kMetaspace: {
      std::string w(word);
      replace_all(w, " ", p.replacement);
      const bool prepend = !(first && continues) &&
                           (p.prepend == PreTokenizerStep::kAlways ||
                            (p.prepend == PreTokenizerStep::kFirst && first && starts_text));
      if (prepend && w.compare(0, p.replacement.size(), p.replacement) != 0) {
        std::string prefixed = p.replacement;
        prefixed.append(w);
        w.swap(prefixed);
      }
      if (p.split) {
        split_word(w, p.pattern, p.behavior, p.invert, scratch, next(w));
      } else {
        pre_tokenize(m, k + 1, w, first, starts_text, continues, scratch, sink);
      }
      return;
    }
  }
}

// The BPE model on one word: its symbols (bytes, or characters with byte fallback or unk), merged
// by rank.
void encode_word(const HfTokenizer::Model& m, std::string_view word,
                 std::vector<int32_t>& symbols) {
  symbols.clear();
  if (m.ignore_merges) {
    const auto it = m.vocab.find(word);
    if (it != m.vocab.end()) {
      symbols.push_back(it->second);
      return;
    }
  }
  if (m.byte_level) {
    for (char c : word) symbols.push_back(m.byte_token[static_cast<unsigned char>(c)]);
  } else {
    bool previous_unk = false;
    for (size_t i = 0, len = 0; i < word.size(); i += len) {
      len = utf8_length(static_cast<unsigned char>(word[i]));
      const auto it = m.vocab.find(word.substr(i, len));
      if (it != m.vocab.end()) {
        symbols.push_back(it->second);
        previous_unk = false;
        continue;
      }
      bool bytes_known = m.byte_fallback;
      for (size_t k = 0; k < len && bytes_known; ++k)
        bytes_known = m.byte_token[static_cast<unsigned char>(word[i + k])] >= 0;
      if (bytes_known) {
        for (size_t k = 0; k < len; ++k)
          symbols.push_back(m.byte_token[static_cast<unsigned char>(word[i + k])]);
        previous_unk = false;
      } else if (m.unk >= 0) {
        if (!(m.fuse_unk && previous_unk)) symbols.push_back(m.unk);
        previous_unk = true;
      } else {
        size_t l = 0;
        char code[16];
        std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(utf8_decode(word, i, l)));
        fail_input(GPT_MSG("the character " << code << " has no token and the tokenizer "
                                            << m.json_path
                                            << " has no unk_token or byte fallback"));
      }
    }
  }
  m.merges.apply(symbols);
}

}  // namespace

void HfEncoder::encode(std::string_view text, std::vector<int32_t>& ids, bool allow_special,
                       bool continuation, uint64_t offset) {
  const HfTokenizer::Model& m = *tokenizer_.m_;
  State& st = *state_;
  if (const size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
    fail_input(GPT_MSG("invalid UTF-8 at byte " << offset + bad));
  split_added(m, text, allow_special, st.sections);
  for (const Section& sec : st.sections) {
    if (sec.added >= 0) {
      ids.push_back(sec.added);
      continue;
    }
    const bool continues = continuation && sec.begin == 0;  // start-of-text steps are skipped
    std::string s(text.substr(sec.begin, sec.end - sec.begin));
    normalize(m, s, continues, st.regex);
    if (s.empty()) continue;
    auto sink = [&](std::string_view word) {
      const bool cacheable = word.size() <= kMaxCachedWord;
      if (cacheable) {
        const auto hit = st.cache.find(word);
        if (hit != st.cache.end()) {
          ids.insert(ids.end(), hit->second.begin(), hit->second.end());
          return;
        }
      }
      encode_word(m, word, st.symbols);
      ids.insert(ids.end(), st.symbols.begin(), st.symbols.end());
      if (cacheable) {
        // Bounded: a stream of distinct words (hashes, numbers) must not grow memory without end.
        if (st.cache.size() >= kMaxCacheEntries) st.cache.clear();
        st.cache.emplace(std::string(word), st.symbols);
      }
    };
    pre_tokenize(m, 0, s, true, sec.begin == 0 && !continuation, continues, st.regex, sink);
  }
}

std::vector<int32_t> HfEncoder::encode(std::string_view text, bool allow_special) {
  std::vector<int32_t> ids;
  encode(text, ids, allow_special);
  return ids;
}

std::string HfTokenizer::decode(const int32_t* ids, size_t n) const {
  const Model& m = *m_;
  std::vector<std::string> tokens;
  tokens.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const auto id = static_cast<size_t>(ids[i]);
    GPT_INPUT_CHECK(ids[i] >= 0 && id < m.token_text.size() && m.used[id],
                    "token " << ids[i] << " is not in the vocabulary of " << m.json_path << " ("
                             << m.token_text.size() << " ids)");
    tokens.push_back(m.token_text[id]);
  }
  static const std::array<int, 512> alphabet = byte_alphabet_to_byte();
  for (const DecoderStep& d : m.decoder) {
    switch (d.kind) {
      case DecoderStep::kByteLevel:
        // Byte-level files hold their tokens as bytes already; elsewhere map the alphabet back.
        if (!m.byte_level)
          for (std::string& t : tokens) {
            std::string bytes;
            if (byte_alphabet_decode(t, alphabet, bytes)) t.swap(bytes);
          }
        break;
      case DecoderStep::kReplace:
        for (std::string& t : tokens) replace_all(t, d.pattern, d.content);
        break;
      case DecoderStep::kByteFallback: {
        std::vector<std::string> out;
        std::string pending;
        size_t pending_count = 0;
        auto flush = [&] {
          if (pending_count == 0) return;
          if (first_invalid_utf8(pending) == std::string::npos)
            out.push_back(pending);
          else
            for (size_t k = 0; k < pending_count; ++k) out.emplace_back("\xEF\xBF\xBD");
          pending.clear();
          pending_count = 0;
        };
        for (std::string& t : tokens) {
          unsigned value = 0;
          if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
              std::isxdigit(static_cast<unsigned char>(t[3])) &&
              std::isxdigit(static_cast<unsigned char>(t[4])) &&
              std::sscanf(t.c_str() + 3, "%2x", &value) == 1) {
            pending.push_back(static_cast<char>(value));
            ++pending_count;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens.swap(out);
        break;
      }
      case DecoderStep::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecoderStep::kStrip:
        for (std::string& t : tokens) {
          size_t b = 0, e = t.size();
          for (int64_t k = 0; k < d.start && b < e && t[b] == d.content[0]; ++k) ++b;
          for (int64_t k = 0; k < d.stop && e > b && t[e - 1] == d.content[0]; ++k) --e;
          t = t.substr(b, e - b);
        }
        break;
      case DecoderStep::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          replace_all(tokens[i], d.content, " ");
          if (i == 0 && d.prepend && !tokens[i].empty() && tokens[i][0] == ' ')
            tokens[i].erase(0, 1);
        }
        break;
    }
  }
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

}  // namespace gpt
