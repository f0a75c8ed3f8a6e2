// The bounds of the chat-template interpreter (framework/text/jinja/). A chat template comes from a
// model's files and is untrusted input: every way it could spend time, memory or stack without
// bound is limited here, and going past a limit is a one-line input error naming it. Real
// templates stay far below each: the largest known (gpt-oss) has 16 kB, nests about 10 deep and
// loops a few hundred times.
// Hand-written, like the rest of framework/text/jinja/ (see interpreter.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpt::jinja {

// Template text, in bytes.
constexpr size_t kMaxTemplateBytes = 1u << 20;
// Nesting of the parse: blocks within blocks and expressions within expressions together (the
// parser is recursive, so this bounds its stack).
constexpr int kMaxParseDepth = 64;
// Height of one expression's tree (a.b.c.d or a + b + c is as high as it is long).
constexpr int kMaxExprHeight = 256;
// Macro calls active at once (a macro calling itself).
constexpr int kMaxCallDepth = 32;
// Evaluation recursion overall (statements, expressions, macro calls and lazy filters entered
// and not yet left): bounds the interpreter's stack whatever combination reaches it.
constexpr int kMaxEvalDepth = 512;
// Nesting of values (lists in lists, dicts in dicts, filters over filters): values are printed,
// compared and freed recursively.
constexpr int kMaxValueDepth = 128;
#ifdef GPT_FUZZING
// The fuzz build (tests/fuzz) runs each input with sanitizers under a 10-second limit: smaller
// budgets, so that a template that merely runs long is not reported as a hang.
constexpr int64_t kMaxLoopIterations = 100'000;
constexpr int64_t kMaxSteps = 2'000'000;
#else
// Loop iterations of one rendering, all loops together.
constexpr int64_t kMaxLoopIterations = 1'000'000;
// Steps of one rendering: statements and expressions evaluated, items produced, elements
// compared or printed (value_work), and every kBytesPerStep bytes of text scanned.
constexpr int64_t kMaxSteps = 20'000'000;
#endif
constexpr size_t kBytesPerStep = 64;
// One string or the rendered text, in bytes; one list, in items.
constexpr size_t kMaxStringBytes = 16u << 20;
constexpr size_t kMaxListItems = 1u << 20;
// Bytes of strings and list items made during one rendering (bounds the time spent copying).
constexpr int64_t kMaxProducedBytes = int64_t{512} << 20;
// Items of range(): Jinja's own sandbox limit (MAX_RANGE), so that both refuse the same calls.
constexpr int64_t kMaxRangeItems = 100'000;

}  // namespace gpt::jinja
