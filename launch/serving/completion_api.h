// OpenAI's completions API as serve speaks it: a request body read into a CompletionRequest
// (every field checked, with a 4xx and a one-line message naming the field when it is wrong),
// and the response, stream chunk and error objects written back. Fields of OpenAI's API that
// serve does not implement are accepted at their neutral values (n 1, echo false, logprobs
// null, penalties 0, ...) and refused otherwise; fields that are not in the API are refused, so a
// misspelt option never silently does nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "framework/json.h"
#include "launch/serving/served_request.h"

namespace gpt {

// An answer with an error: the HTTP status, OpenAI's error type and the message.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string param = "")
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)) {}
  int status;
  std::string type;  // "invalid_request_error", "not_found_error", "server_error", ...
  std::string param;
};

struct ApiModel {
  std::string name;  // what /v1/models lists and requests may name
  int64_t seq_len = 0;
  int64_t vocab_size = 0;
  // Whether the tokenizer has an id below vocab_size (an embedding may have rows past the
  // tokenizer's vocabulary, as Qwen's files pad it); null: every id below vocab_size.
  std::function<bool(int64_t)> has_token;
};

// The request in `body`; text prompts go through `tokenize`. `default_seed` is the seed of a
// request that gives none. Throws ApiError.
CompletionRequest parse_completion_request(
    const std::string& body, const ApiModel& model,
    const std::function<std::vector<int32_t>(const std::string&)>& tokenize, uint64_t default_seed);

// The pieces of a request both endpoints read (chat_api.cpp reads the rest of a chat request).
// The body as a JSON object (400 when it is not one).
Json request_body(const std::string& text);
// Every field of `body` is in `implemented`, or in `neutral` at its neutral value, and `model`,
// when given, names this server's model (404 otherwise); else a 400 naming the field.
void check_request_fields(const Json& body, const ApiModel& model,
                          const std::set<std::string>& implemented,
                          const std::set<std::string>& neutral);
// max_tokens (or chat's max_completion_tokens), checked against the context with r.prompt,
// temperature, top_p, top_k, seed (default_seed when none), stop, stream and stream_options.
void read_generation_fields(const Json& body, const ApiModel& model, uint64_t default_seed,
                            CompletionRequest& r);

std::string error_json(const ApiError& error);
// The final response of a request that does not stream: a text_completion, or for chat a
// chat.completion whose message is the assistant's.
std::string completion_json(bool chat, const std::string& id, int64_t created,
                            const ApiModel& model, const std::string& text,
                            const std::string& finish_reason, int64_t prompt_tokens,
                            int64_t completion_tokens);
// One server-sent event of a stream: a text delta, and at the end its finish reason (for chat,
// the first names the assistant's role); a usage chunk (no choices) when the client asked for
// one.
std::string chunk_event(bool chat, const std::string& id, int64_t created, const ApiModel& model,
                        const std::string& text, const std::string& finish_reason,
                        bool first = false);
std::string usage_event(bool chat, const std::string& id, int64_t created, const ApiModel& model,
                        int64_t prompt_tokens, int64_t completion_tokens);
std::string models_json(const ApiModel& model, int64_t created);

// The longest prefix of `text` that ends on a whole UTF-8 character (a token can end inside one).
size_t complete_utf8_prefix(const std::string& text);

}  // namespace gpt
