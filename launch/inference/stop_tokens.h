// The ids that end a generation, in generate and serve alike, as transformers' generate and vLLM
// take them: the tokenizer's end of sequence (tokenizer_config.json's eos_token: <|end_of_text|>,
// or an instruct model's end of turn, <|eot_id|> or <|im_end|>), GPT-2's <|endoftext|> (the
// document token of a tokenizer that ends documents with it), and the eos_token_id of the
// imported config.json and generation_config.json the checkpoint keeps (one id or a list: Llama
// 3.1 Instruct ends on any of three). The stop token itself adds no text.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "framework/json.h"
#include "framework/text/text_tokenizer.h"

namespace gpt {

// Sorted and unique, each below vocab_size. hf_extras: the checkpoint's kept Hugging Face fields
// (framework/io/hf_extras.h); a generation_config eos_token_id that is neither an id nor a list
// of up to 64 ids is an input error naming `what`.
std::vector<int32_t> stop_token_ids(const TextTokenizer& tokenizer, const Json& hf_extras,
                                    int64_t vocab_size, const std::string& what);

inline bool is_stop_token(const std::vector<int32_t>& stops, int32_t token) {
  return std::binary_search(stops.begin(), stops.end(), token);
}

}  // namespace gpt
