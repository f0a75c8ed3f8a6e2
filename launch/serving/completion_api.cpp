// Reading completion requests and writing OpenAI's response objects (see completion_api.h).
#include "launch/serving/completion_api.h"

#include <cmath>
#include <set>

#include "framework/json.h"

namespace gpt {

namespace {

constexpr size_t kMaxStops = 4;  // OpenAI's limit
constexpr size_t kMaxStopBytes = 256;

ApiError bad(const std::string& message, const std::string& param = "") {
  return ApiError(400, "invalid_request_error", message, param);
}

template <typename T>
T field(const Json& body, const std::string& key) {
  std::optional<T> value = json_value<T>(body.at(key));
  if (!value)
    throw bad(
        "'" + key + "' must be " + json_expected<T>() + " (found " + json_found(body.at(key)) + ")",
        key);
  return *value;
}

double number_field(const Json& body, const std::string& key) {
  const Json& v = body.at(key);
  if (!v.is_number())
    throw bad("'" + key + "' must be a number (found " + json_found(v) + ")", key);
  return v.get<double>();
}

// A field of OpenAI's API that serve does not implement: only its neutral value passes.
void neutral_only(const Json& body, const std::string& key) {
  const Json& v = body.at(key);
  const bool neutral =
      v.is_null() || (key == "n" && v == 1) || (key == "best_of" && v == 1) ||
      (key == "echo" && v == false) || (key == "logprobs" && v == false) ||
      (key == "top_logprobs" && v == 0) || (key == "tool_choice" && (v == "none" || v == "auto")) ||
      (key == "parallel_tool_calls" && v.is_boolean()) ||
      ((key == "presence_penalty" || key == "frequency_penalty") && v.is_number() &&
       v.get<double>() == 0.0) ||
      (key == "logit_bias" && v.is_object() && v.empty()) ||
      (key == "suffix" && v.is_string() && v.get<std::string>().empty()) || key == "user";
  if (!neutral) throw bad("'" + key + "' is not supported by this server (leave it out)", key);
}

}  // namespace

Json request_body(const std::string& text) {
  try {
    return parse_json_object(text, "the request body");
  } catch (const Error& e) {
    throw bad(e.what());
  }
}

void check_request_fields(const Json& body, const ApiModel& model,
                          const std::set<std::string>& implemented,
                          const std::set<std::string>& neutral) {
  for (const auto& item : body.items()) {
    const std::string& key = item.key();
    if (neutral.contains(key)) {
      neutral_only(body, key);
    } else if (!implemented.contains(key)) {
      throw bad("unknown field " + quoted_excerpt(key) + " (see docs/SERVING.md for the fields)",
                shown_excerpt(key, 40));
    }
  }
  if (json_has_value(body, "model")) {
    const std::string name = field<std::string>(body, "model");
    if (name != model.name)
      throw ApiError(404, "not_found_error",
                     "the model " + quoted_excerpt(name) + " does not exist (this server has '" +
                         model.name + "')",
                     "model");
  }
}

void read_generation_fields(const Json& body, const ApiModel& model, uint64_t default_seed,
                            CompletionRequest& r) {
  // Chat's max_completion_tokens replaces max_tokens, which OpenAI keeps for older clients.
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!json_has_value(body, key)) continue;
    r.max_tokens = field<int64_t>(body, key);
    if (r.max_tokens < 1) throw bad("'" + std::string(key) + "' must be at least 1", key);
  }
  const int64_t prompt_tokens = static_cast<int64_t>(r.prompt.size());
  // Compared without a sum: max_tokens may be as large as 2^63 - 1.
  if (prompt_tokens > model.seq_len || r.max_tokens > model.seq_len - prompt_tokens)
    throw bad("the prompt's " + std::to_string(prompt_tokens) + " tokens and max_tokens " +
                  std::to_string(r.max_tokens) + " exceed the model's context of " +
                  std::to_string(model.seq_len) + " tokens",
              prompt_tokens > model.seq_len ? "prompt" : "max_tokens");
  if (json_has_value(body, "temperature")) {
    r.sampling.temperature = number_field(body, "temperature");
    if (!(r.sampling.temperature >= 0.0 && r.sampling.temperature <= 2.0))
      throw bad("'temperature' must be in [0, 2]", "temperature");
  }
  if (json_has_value(body, "top_p")) {
    r.sampling.top_p = number_field(body, "top_p");
    if (!(r.sampling.top_p > 0.0 && r.sampling.top_p <= 1.0))
      throw bad("'top_p' must be in (0, 1]", "top_p");
  }
  if (json_has_value(body, "top_k")) {
    r.sampling.top_k = field<int64_t>(body, "top_k");
    if (r.sampling.top_k == -1) r.sampling.top_k = 0;  // vLLM's "all"
    if (r.sampling.top_k < 0) throw bad("'top_k' must be at least 0 (0 or -1: all)", "top_k");
  }
  r.seed = default_seed;
  if (json_has_value(body, "seed")) r.seed = field<uint64_t>(body, "seed");
  if (json_has_value(body, "stop")) {
    const Json& stop = body.at("stop");
    if (stop.is_string()) {
      r.stop = {stop.get<std::string>()};
    } else {
      const std::optional<std::vector<std::string>> list =
          json_value<std::vector<std::string>>(stop);
      if (!list) throw bad("'stop' must be a string or an array of strings", "stop");
      r.stop = *list;
    }
    if (r.stop.size() > kMaxStops) throw bad("'stop' takes at most 4 strings", "stop");
    for (const std::string& s : r.stop)
      if (s.empty() || s.size() > kMaxStopBytes)
        throw bad("each 'stop' string must have 1 to 256 bytes", "stop");
  }
  if (json_has_value(body, "stream")) r.stream = field<bool>(body, "stream");
  if (json_has_value(body, "stream_options")) {
    const Json& options = body.at("stream_options");
    if (!options.is_object()) throw bad("'stream_options' must be an object", "stream_options");
    for (const auto& item : options.items()) {
      if (item.key() != "include_usage")
        throw bad("unknown field stream_options." + quoted_excerpt(item.key()), "stream_options");
      if (!item.value().is_boolean())
        throw bad("'stream_options.include_usage' must be a boolean", "stream_options");
      r.include_usage = item.value().get<bool>();
    }
  }
}

CompletionRequest parse_completion_request(
    const std::string& body_text, const ApiModel& model,
    const std::function<std::vector<int32_t>(const std::string&)>& tokenize,
    uint64_t default_seed) {
  const Json body = request_body(body_text);
  static const std::set<std::string> implemented = {
      "model", "prompt", "max_tokens", "temperature", "top_p",
      "top_k", "seed",   "stop",       "stream",      "stream_options"};
  static const std::set<std::string> neutral = {
      "n",          "best_of", "echo", "logprobs", "presence_penalty", "frequency_penalty",
      "logit_bias", "suffix",  "user"};
  check_request_fields(body, model, implemented, neutral);
  CompletionRequest r;
  if (!body.contains("prompt")) throw bad("'prompt' is required", "prompt");
  const Json& prompt = body.at("prompt");
  if (prompt.is_string()) {
    try {
      r.prompt = tokenize(prompt.get<std::string>());
    } catch (const Error& e) {
      throw bad(std::string("prompt: ") + e.what(), "prompt");
    }
  } else if (prompt.is_array() && !prompt.empty() && prompt.front().is_number()) {
    const std::optional<std::vector<int32_t>> ids = json_value<std::vector<int32_t>>(prompt);
    if (!ids) throw bad("'prompt' as token ids must be an array of integers", "prompt");
    for (int32_t id : *ids) {
      if (id < 0 || id >= model.vocab_size)
        throw bad("prompt token " + std::to_string(id) + " is not in [0, " +
                      std::to_string(model.vocab_size) + ")",
                  "prompt");
      if (model.has_token && !model.has_token(id))
        throw bad("prompt token " + std::to_string(id) +
                      " is not in the tokenizer's vocabulary (the model's embedding has a row "
                      "for it, the tokenizer no text)",
                  "prompt");
    }
    r.prompt = *ids;
  } else if (prompt.is_array()) {
    throw bad("'prompt' must be a string or an array of token ids (one prompt per request)",
              "prompt");
  } else {
    throw bad(
        "'prompt' must be a string or an array of token ids (found " + json_found(prompt) + ")",
        "prompt");
  }
  if (r.prompt.empty()) throw bad("'prompt' has no tokens", "prompt");
  read_generation_fields(body, model, default_seed, r);
  return r;
}

namespace {

// Generated text may hold bytes that are not UTF-8 (a model of bytes can emit any): JSON output
// replaces them rather than failing.
std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Json usage(int64_t prompt_tokens, int64_t completion_tokens) {
  return Json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}};
}

}  // namespace

std::string error_json(const ApiError& error) {
  Json e{{"message", error.what()},
         {"type", error.type},
         {"param", error.param.empty() ? Json(nullptr) : Json(error.param)},
         {"code", error.status}};
  return dump(Json{{"error", e}});
}

namespace {

// OpenAI's object names: text_completion for both the response and the chunks of completions,
// chat.completion and chat.completion.chunk for chat.
const char* object_name(bool chat, bool chunk) {
  if (!chat) return "text_completion";
  return chunk ? "chat.completion.chunk" : "chat.completion";
}

Json header(bool chat, bool chunk, const std::string& id, int64_t created, const ApiModel& model) {
  return Json{{"id", id},
              {"object", object_name(chat, chunk)},
              {"created", created},
              {"model", model.name}};
}

Json finish(const std::string& finish_reason) {
  return finish_reason.empty() ? Json(nullptr) : Json(finish_reason);
}

}  // namespace

std::string completion_json(bool chat, const std::string& id, int64_t created,
                            const ApiModel& model, const std::string& text,
                            const std::string& finish_reason, int64_t prompt_tokens,
                            int64_t completion_tokens) {
  Json choice{{"index", 0}};
  if (chat)
    choice["message"] = Json{{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  Json j = header(chat, false, id, created, model);
  j["choices"] = Json::array({choice});
  j["usage"] = usage(prompt_tokens, completion_tokens);
  return dump(j);
}

std::string chunk_event(bool chat, const std::string& id, int64_t created, const ApiModel& model,
                        const std::string& text, const std::string& finish_reason, bool first) {
  Json choice{{"index", 0}};
  if (!chat) {
    choice["text"] = text;
  } else {
    // A chat stream's first delta names the role; the last, with the finish reason, is empty.
    Json delta = Json::object();
    if (first) delta["role"] = "assistant";
    if (first || !text.empty() || finish_reason.empty()) delta["content"] = text;
    choice["delta"] = delta;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish(finish_reason);
  Json j = header(chat, true, id, created, model);
  j["choices"] = Json::array({choice});
  return "data: " + dump(j) + "\n\n";
}

std::string usage_event(bool chat, const std::string& id, int64_t created, const ApiModel& model,
                        int64_t prompt_tokens, int64_t completion_tokens) {
  Json j = header(chat, true, id, created, model);
  j["choices"] = Json::array();
  j["usage"] = usage(prompt_tokens, completion_tokens);
  return "data: " + dump(j) + "\n\n";
}

std::string models_json(const ApiModel& model, int64_t created) {
  Json m{{"id", model.name},
         {"object", "model"},
         {"created", created},
         {"owned_by", "gpt-framework"},
         {"max_model_len", model.seq_len}};
  return dump(Json{{"object", "list"}, {"data", Json::array({m})}});
}

size_t complete_utf8_prefix(const std::string& text) {
  // Walk back over at most 3 continuation bytes to the last lead byte; keep it only when all of
  // its character's bytes are there.
  size_t n = text.size(), i = n, back = 0;
  while (i > 0 && back < 4 && (static_cast<unsigned char>(text[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++back;
  }
  if (i == 0) return n;
  const unsigned char lead = static_cast<unsigned char>(text[i - 1]);
  size_t length = 1;
  if ((lead & 0xE0) == 0xC0)
    length = 2;
  else if ((lead & 0xF0) == 0xE0)
    length = 3;
  else if ((lead & 0xF8) == 0xF0)
    length = 4;
  else
    return n;  // ASCII or not a lead byte: nothing to hold back
  return back + 1 >= length ? n : i - 1;
}

}  // namespace gpt
