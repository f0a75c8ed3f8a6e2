// Reading chat completion requests (see chat_api.h).
#include "launch/serving/chat_api.h"

#include <set>

#include "framework/check.h"

namespace gpt {

namespace {

ApiError bad(const std::string& message, const std::string& param) {
  return ApiError(400, "invalid_request_error", message, param);
}

// Bounds on a conversation before the template sees it: OpenAI's own limit of messages, and
// parts of a message's content.
constexpr size_t kMaxMessages = 2048;
constexpr size_t kMaxContentParts = 256;

// Each message an object with a string role; its content a string, null, or a list of parts
// ({"type": "text", "text": ...}); everything else (tool_calls, tool_call_id, name) goes to the
// template as written.
void check_messages(const Json& messages) {
  if (!messages.is_array() || messages.empty())
    throw bad("'messages' must be a non-empty array of message objects", "messages");
  if (messages.size() > kMaxMessages)
    throw bad("'messages' has more than " + std::to_string(kMaxMessages) + " messages", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad(where + " must be an object", "messages");
    if (!m.contains("role") || !m.at("role").is_string())
      throw bad(where + ".role must be a string", "messages");
    if (!m.contains("content")) continue;
    const Json& content = m.at("content");
    if (content.is_string() || content.is_null()) continue;
    if (!content.is_array() || content.size() > kMaxContentParts)
      throw bad(where + ".content must be a string, null or an array of at most " +
                    std::to_string(kMaxContentParts) + " parts",
                "messages");
    for (const Json& part : content)
      if (!part.is_object() || !part.contains("type") || part.at("type") != "text" ||
          !part.contains("text") || !part.at("text").is_string())
        throw bad(where +
                      ".content: only text parts ({\"type\": \"text\", \"text\": ...}) are "
                      "supported",
                  "messages");
  }
}

}  // namespace

CompletionRequest parse_chat_request(const std::string& body_text, const ApiModel& model,
                                     const ChatPrompt& chat_prompt, uint64_t default_seed) {
  const Json body = request_body(body_text);
  static const std::set<std::string> implemented = {
      "model",       "messages", "max_tokens", "max_completion_tokens",
      "temperature", "top_p",    "top_k",      "seed",
      "stop",        "stream",   "tools",      "stream_options"};
  static const std::set<std::string> neutral = {
      "n",          "logprobs", "top_logprobs", "presence_penalty",   "frequency_penalty",
      "logit_bias", "user",     "tool_choice",  "parallel_tool_calls"};
  check_request_fields(body, model, implemented, neutral);
  if (!chat_prompt)
    throw bad(
        "this model's tokenizer has no chat template (tokenizer_config.json "
        "\"chat_template\" or chat_template.jinja): use /v1/completions",
        "messages");
  if (!body.contains("messages")) throw bad("'messages' is required", "messages");
  const Json& messages = body.at("messages");
  check_messages(messages);
  const Json* tools = nullptr;
  if (json_has_value(body, "tools")) {
    tools = &body.at("tools");
    if (!tools->is_array()) throw bad("'tools' must be an array of tool schemas", "tools");
  }
  CompletionRequest r;
  r.chat = true;
  try {
    r.prompt = chat_prompt(messages, tools);
  } catch (const Error& e) {
    throw bad(std::string("messages: ") + e.what(), "messages");
  }
  if (r.prompt.empty()) throw bad("the chat template rendered no tokens", "messages");
  const int64_t prompt_tokens = static_cast<int64_t>(r.prompt.size());
  if (prompt_tokens < model.seq_len) r.max_tokens = model.seq_len - prompt_tokens;
  read_generation_fields(body, model, default_seed, r);
  return r;
}

}  // namespace gpt
