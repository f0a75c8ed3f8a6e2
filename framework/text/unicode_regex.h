// A compiled Unicode regular expression (PCRE2 with UTF and Unicode properties, JIT where the
// platform has it), shared by the tokenizers for their pre-tokenization patterns. The compiled
// pattern is immutable and may be shared across threads; each thread matches with its own
// RegexScratch (PCRE2's match data and a JIT stack large enough for long runs of one class, as
// a megabyte of spaces is one match of `\s+`).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gpt {

class RegexScratch;

class UnicodeRegex {
 public:
  // Compiles `pattern`; a pattern PCRE2 refuses is an input error naming `what`, the offset and
  // PCRE2's reason.
  UnicodeRegex(const std::string& pattern, const std::string& what);

  // The first match in text[start, size) (lookahead sees the whole text). False when there is
  // none. `checked` says the caller has already validated text as UTF-8 (skips PCRE2's check);
  // otherwise invalid UTF-8 is an input error giving the byte offset plus `offset`.
  bool find(std::string_view text, size_t start, RegexScratch& scratch, size_t& begin, size_t& end,
            bool checked = true, uint64_t offset = 0) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

// Per-thread match state for any UnicodeRegex.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

 private:
  friend class UnicodeRegex;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gpt
