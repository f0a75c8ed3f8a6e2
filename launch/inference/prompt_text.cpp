// Prompts and continuations through a checkpoint's tokenizer (see prompt_text.h).
#include "launch/inference/prompt_text.h"

#include "framework/check.h"

namespace gpt {

std::unique_ptr<TextTokenizer> open_checkpoint_tokenizer(const std::string& spec,
                                                         const std::string& checkpoint,
                                                         const std::string& tokenizer_option,
                                                         const Gpt2Files& gpt2,
                                                         int64_t vocab_size) {
  std::string path = spec;
  if (spec.rfind("hf-sha256:", 0) == 0) {
    path = find_tokenizer_copy(spec, tokenizer_option, tokenizer_folder_of(checkpoint),
                               "the checkpoint " + checkpoint);
  } else {
    GPT_INPUT_CHECK(spec == "bytes" || spec == "gpt2",
                    "the known tokenizers are bytes, gpt2 and Hugging Face tokenizer.json files "
                    "(the checkpoint "
                        << checkpoint << " uses " << spec << ")");
  }
  auto tokenizer = std::make_unique<TextTokenizer>(path, gpt2);
  GPT_INPUT_CHECK(tokenizer->name() == "bytes" || tokenizer->vocab_size() <= vocab_size,
                  "the tokenizer " << path << " has " << tokenizer->vocab_size()
                                   << " tokens, more than the " << vocab_size
                                   << " of the checkpoint " << checkpoint);
  return tokenizer;
}

std::vector<int32_t> prompt_token_ids(TextTokenizer& tokenizer, const std::string& text,
                                      bool allow_special_tokens) {
  std::vector<int32_t> prompt;
  tokenizer.encode(0, text, prompt, 0, false, allow_special_tokens);
  // A BOS-first tokenizer's prompt starts with its BOS, as its documents did in training.
  if (tokenizer.document_token_first() && tokenizer.document_token() >= 0)
    prompt.insert(prompt.begin(), static_cast<int32_t>(tokenizer.document_token()));
  // No prompt: start after a document boundary, as GPT-2's own unconditional samples do;
  // bytes: the corpus' separator starts a fresh line.
  if (prompt.empty() && tokenizer.name() == "bytes") prompt.push_back('\n');
  if (prompt.empty() && tokenizer.document_token() >= 0)
    prompt.push_back(static_cast<int32_t>(tokenizer.document_token()));
  GPT_INPUT_CHECK(!prompt.empty(), "an empty prompt needs a document token, and the tokenizer "
                                       << tokenizer.name() << " names none: give a prompt");
  return prompt;
}

std::vector<int32_t> chat_prompt_ids(TextTokenizer& tokenizer, const std::string& rendered) {
  std::vector<int32_t> ids;
  tokenizer.encode(0, rendered, ids, 0, false, true);
  return ids;
}

std::string continuation_text(const TextTokenizer& tokenizer, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& generated) {
  std::vector<int32_t> known;
  for (const int32_t id : generated)
    if (tokenizer.has_token(id)) known.push_back(id);
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), known.begin(), known.end());
  const std::string before = tokenizer.decode(prompt), whole = tokenizer.decode(all);
  return whole.compare(0, before.size(), before) == 0 ? whole.substr(before.size())
                                                      : tokenizer.decode(known);
}

}  // namespace gpt
