// OpenAI's chat completions API as serve speaks it (POST /v1/chat/completions): a request's
// messages (and tool schemas) rendered by the model's chat template into a prompt, the generation
// fields read as completions read them (completion_api.h), and the answer written as a
// chat.completion or a stream of chat.completion.chunk events (completion_api.h's writers with
// chat set). Fields of OpenAI's API that serve does not implement are accepted at their neutral
// values (n 1, logprobs false, tool_choice "auto" or "none", ...) and refused otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/json.h"
#include "launch/serving/completion_api.h"

namespace gpt {

// The prompt of a conversation: `messages` (a JSON array of message objects) and `tools` (an
// array of tool schemas, or null) rendered with the generation prompt and tokenized, special
// tokens matched. Throws gpt::Error with a one-line message when the template refuses them.
using ChatPrompt = std::function<std::vector<int32_t>(const Json& messages, const Json* tools)>;

// The request in `body`. `chat_prompt` is empty when the model has no chat template (a 400 that
// says so). Without max_tokens or max_completion_tokens, the answer may run to the end of the
// context, as OpenAI's and vLLM's do. Throws ApiError.
CompletionRequest parse_chat_request(const std::string& body, const ApiModel& model,
                                     const ChatPrompt& chat_prompt, uint64_t default_seed);

}  // namespace gpt
