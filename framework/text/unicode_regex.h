// A compiled Unicode regular expression (PCRE2 with UTF and Unicode properties, JIT where the
// platform has it), shared by the tokenizers for their pre-tokenization patterns. The compiled
// pattern is immutable and may be shared across threads; each thread matches with its own
// RegexScratch (PCRE2's match data and a JIT stack large enough for long runs of one class, as
// a megabyte of spaces is one match of `\s+`).
//
// The matching work is bounded per byte of text: the patterns of real tokenizers take under 30 of
// PCRE2's matching steps per byte (its match limit, which the JIT counts too), and one that
// backtracks catastrophically (`(a+)+$`) takes exponentially many, or, just under PCRE2's own
// limit of ten million a match, crawls at a few KB/s while every match still succeeds. So the
// finds over one text may take kRegexStepsPerByte steps per byte they cover, plus a burst of
// kRegexStepBurst; a text that needs more is an input error naming the pattern (its file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace gpt {

inline constexpr uint64_t kRegexStepsPerByte = 256;
inline constexpr uint64_t kRegexStepBurst = uint64_t{1} << 20;

class RegexScratch;

class UnicodeRegex {
 public:
  // Compiles `pattern`; a pattern PCRE2 refuses is an input error naming `what`, the offset and
  // PCRE2's reason. `what` (the file and key the pattern came from) also names it in the errors
  // of find.
  UnicodeRegex(const std::string& pattern, const std::string& what);

  // The first match in text[start, size) (lookahead sees the whole text). False when there is
  // none. `checked` says the caller has already validated text as UTF-8 (skips PCRE2's check);
  // otherwise invalid UTF-8 is an input error giving the byte offset plus `offset`. Successive
  // calls on one text (the same bytes, from a start that does not go back) share the work bound
  // above; a text past it, or a match PCRE2 cannot complete (its stack), is an input error naming
  // `what` and the byte.
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
