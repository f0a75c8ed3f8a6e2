// Between text and a checkpoint's tokens, as generate and serve both do it: the checkpoint's
// tokenizer (bytes, gpt2, or the Hugging Face tokenizer.json it records), a prompt's ids (BOS
// first for BOS-first tokenizers, as the training documents had it; an empty prompt starts after
// a document boundary), and the text that new tokens add to a prompt.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "framework/text/text_tokenizer.h"

namespace gpt {

// The tokenizer of a checkpoint whose metadata names `spec` ("bytes", "gpt2", "hf-sha256:..."):
// a Hugging Face one is found as `tokenizer_option` (a file or folder) or the copy beside the
// checkpoint; its SHA-256 must be the recorded one. vocab_size: the model's. Throws InputError.
std::unique_ptr<TextTokenizer> open_checkpoint_tokenizer(const std::string& spec,
                                                         const std::string& checkpoint,
                                                         const std::string& tokenizer_option,
                                                         const Gpt2Files& gpt2, int64_t vocab_size);

// The ids of `text` as a prompt. Throws InputError when it is empty and the tokenizer has no
// document token to start from.
std::vector<int32_t> prompt_token_ids(TextTokenizer& tokenizer, const std::string& text,
                                      bool allow_special_tokens);

// The ids of a chat template's rendered text: special tokens matched and nothing added (the
// template writes its own BOS), as transformers' apply_chat_template tokenizes it.
std::vector<int32_t> chat_prompt_ids(TextTokenizer& tokenizer, const std::string& rendered);

// What decoding prompt + generated adds to decoding the prompt (SentencePiece decoders drop a
// leading space of the text they are given, so the new tokens alone could decode differently).
// A generated id the tokenizer lacks (an embedding row past its vocabulary) adds no text, as
// Hugging Face's decode skips ids it does not know; the prompt's ids must all be known.
std::string continuation_text(const TextTokenizer& tokenizer, const std::vector<int32_t>& prompt,
                              const std::vector<int32_t>& generated);

}  // namespace gpt
