// UnicodeRegex over PCRE2 (see unicode_regex.h).
#include "framework/text/unicode_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "framework/check.h"

namespace gpt {
namespace {

// PCRE2's own text for an error code (compile errors, UTF-8 errors, match failures).
std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> text{};
  pcre2_get_error_message(code, text.data(), text.size());
  return reinterpret_cast<const char*>(text.data());
}

// The JIT stack grows to this: a match of one repeated class needs little stack per character,
// and inputs are read in pieces of a few MB.
constexpr size_t kJitStackMax = 64u << 20;

// The first match limit a find tries: above what one piece of real text takes (under 60 steps
// measured on GPT-2's, Llama 3's and Qwen's patterns), so most finds match at once; a find that
// needs more doubles it.
constexpr uint32_t kFirstStepLimit = 64;

}  // namespace

struct UnicodeRegex::Code {
  pcre2_code* code = nullptr;
  std::string what;
  ~Code() { pcre2_code_free(code); }
};

struct RegexScratch::State {
  pcre2_match_data* match = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  // The text the finds run over, where its first find started, the last start, and the steps
  // charged to it so far (each attempt's limit: at least the work it did).
  const char* text = nullptr;
  size_t size = 0, first = 0, last_start = 0;
  uint64_t charged = 0;
  ~State() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match);
  }
};

RegexScratch::RegexScratch() : state_(std::make_unique<State>()) {
  // One pair: only the whole match is read (a pattern's groups are not).
  state_->match = pcre2_match_data_create(1, nullptr);
  state_->context = pcre2_match_context_create(nullptr);
  state_->stack = pcre2_jit_stack_create(32u << 10, kJitStackMax, nullptr);
  GPT_CHECK(state_->match && state_->context && state_->stack, "out of memory for PCRE2 state");
  pcre2_jit_stack_assign(state_->context, nullptr, state_->stack);
}

RegexScratch::~RegexScratch() = default;

UnicodeRegex::UnicodeRegex(const std::string& pattern, const std::string& what) {
  auto code = std::make_shared<Code>();
  code->what = what;
  int error = 0;
  PCRE2_SIZE offset = 0;
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                             PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
  GPT_INPUT_CHECK(code->code != nullptr, what << ": the regular expression does not compile at "
                                              << "offset " << offset << " (" << pcre2_message(error)
                                              << ")");
  // JIT is many times faster; where the platform has none, the interpreter gives the same result.
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);
  code_ = std::move(code);
}

bool UnicodeRegex::find(std::string_view text, size_t start, RegexScratch& scratch, size_t& begin,
                        size_t& end, bool checked, uint64_t offset) const {
  RegexScratch::State& s = *scratch.state_;
  if (text.data() != s.text || text.size() != s.size || start < s.last_start) {
    s.text = text.data();
    s.size = text.size();
    s.first = start;
    s.charged = 0;
  }
  s.last_start = start;
  // The most this text may ever be charged, were this find to cover all of it.
  const uint64_t allowance = kRegexStepBurst + kRegexStepsPerByte * (text.size() - s.first);
  const auto over_budget = [&] {
    fail_input(GPT_MSG(code_->what << ": the pattern takes more than " << kRegexStepsPerByte
                                   << " matching steps a byte of the text (it backtracks without "
                                      "bound on it); simplify the pattern"));
  };
  uint64_t limit = kFirstStepLimit;
  int rc = 0;
  while (true) {
    if (s.charged >= allowance) over_budget();
    limit = std::min({limit, allowance - s.charged, uint64_t{UINT32_MAX}});
    pcre2_set_match_limit(s.context, static_cast<uint32_t>(limit));
    rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                     checked ? PCRE2_NO_UTF_CHECK : 0, s.match, s.context);
    s.charged += limit;
    if (rc != PCRE2_ERROR_MATCHLIMIT) break;
    limit *= 2;
  }
  if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21)
    fail_input(GPT_MSG("invalid UTF-8 at byte " << offset + pcre2_get_startchar(s.match) << " ("
                                                << pcre2_message(rc) << ")"));
  // A JIT stack or heap exhausted: the text needs more than a pattern of a tokenizer should.
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
    fail_input(GPT_MSG(code_->what << ": the pattern cannot be matched on the text ("
                                   << pcre2_message(rc) << ")"));
  // rc == 0: the ovector has fewer pairs than the pattern's groups; the whole match is set.
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(s.match);
  const size_t covered = rc == PCRE2_ERROR_NOMATCH ? text.size() : ov[1];
  if (s.charged > kRegexStepBurst + kRegexStepsPerByte * (covered - s.first)) over_budget();
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  begin = ov[0];
  end = ov[1];
  return true;
}

}  // namespace gpt
