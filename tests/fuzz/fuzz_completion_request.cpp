// Fuzzes serve's reading of a completion request body (launch/serving/completion_api.h) and of a
// chat completion request body (chat_api.h, the same bytes): the body is JSON from any client, so
// parse_completion_request and parse_chat_request must accept it or throw ApiError (what
// the HTTP side turns into a 400 or 404), never another exception; an ApiError's message follows
// fuzz_common.h's rules and its param is one short line, and the error object written back is
// JSON. An accepted request keeps every limit the scheduler relies on (a non-empty prompt of ids
// in the vocabulary, prompt + max_tokens within the context, sampling options in range, at most
// 4 stop strings of 1 to 256 bytes), and the response objects written from it are JSON. The
// input's bytes also go through complete_utf8_prefix, whose cut must hold back at most one
// incomplete character.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "framework/json.h"
#include "launch/serving/chat_api.h"
#include "launch/serving/completion_api.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

const gpt::ApiModel kModel{.name = "tiny", .seq_len = 64, .vocab_size = 300, .has_token = {}};

// One token per byte; a control byte other than whitespace is an input error (as a real
// tokenizer's refusal would be), which the parser must turn into an ApiError.
std::vector<int32_t> tokenize(const std::string& text) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 && c != '\n' && c != '\t')
      throw gpt::Error("text: control byte at offset " + std::to_string(i));
    ids.push_back(c);
  }
  return ids;
}

// A stand-in chat template: the messages and tools as JSON text, tokenized as above.
std::vector<int32_t> render_chat(const gpt::Json& messages, const gpt::Json* tools) {
  return tokenize(messages.dump() + (tools ? tools->dump() : std::string()));
}

void check_json(const std::string& text, const std::string& what) {
  if (!gpt::Json::accept(text)) gpt::fuzz::finding(what + " is not JSON: " + text.substr(0, 300));
}

void check_error(const gpt::ApiError& e) {
  gpt::fuzz::check_message(e.what());
  if (!((e.status == 400 && e.type == "invalid_request_error") ||
        (e.status == 404 && e.type == "not_found_error")))
    gpt::fuzz::finding("an ApiError of status " + std::to_string(e.status) + " and type " + e.type +
                       ": " + e.what());
  if (e.param.size() > 64 || e.param.find_first_of("\r\n") != std::string::npos)
    gpt::fuzz::finding("an ApiError param that is not one short line: " + e.param.substr(0, 200));
  check_json(gpt::error_json(e), "error_json");
}

void check_request(const gpt::CompletionRequest& r, bool chat) {
  const auto prompt = static_cast<int64_t>(r.prompt.size());
  if (prompt < 1) gpt::fuzz::finding("an accepted request without prompt tokens");
  for (int32_t id : r.prompt)
    if (id < 0 || id >= kModel.vocab_size)
      gpt::fuzz::finding("an accepted prompt token " + std::to_string(id));
  if (r.max_tokens < 1 || prompt > kModel.seq_len || r.max_tokens > kModel.seq_len - prompt)
    gpt::fuzz::finding("an accepted max_tokens " + std::to_string(r.max_tokens) + " for " +
                       std::to_string(prompt) + " prompt tokens");
  if (!(r.sampling.temperature >= 0.0 && r.sampling.temperature <= 2.0) ||
      !(r.sampling.top_p > 0.0 && r.sampling.top_p <= 1.0) || r.sampling.top_k < 0)
    gpt::fuzz::finding("accepted sampling options out of range");
  if (r.stop.size() > 4) gpt::fuzz::finding("more than 4 stop strings accepted");
  for (const std::string& s : r.stop)
    if (s.empty() || s.size() > 256)
      gpt::fuzz::finding("a stop string of " + std::to_string(s.size()) + " bytes");
  // What is sent back may carry any of the request's text (a stop string ends a completion).
  const std::string text = r.stop.empty() ? std::string() : r.stop.front();
  if (r.chat != chat) gpt::fuzz::finding("a request answered as the other endpoint's");
  check_json(gpt::completion_json(chat, "cmpl-0", 0, kModel, text, "stop", prompt, 1),
             "completion_json");
  const std::string chunk = gpt::chunk_event(chat, "cmpl-0", 0, kModel, text, "", true);
  check_json(chunk.substr(6, chunk.size() - 8), "chunk_event");
}

void check_utf8_prefix(const std::string& bytes) {
  const size_t cut = gpt::complete_utf8_prefix(bytes);
  if (cut > bytes.size()) gpt::fuzz::finding("complete_utf8_prefix past the end");
  if (cut == bytes.size()) return;
  // Held back: one lead byte and fewer continuation bytes than it announces.
  const auto lead = static_cast<unsigned char>(bytes[cut]);
  const size_t held = bytes.size() - cut;
  const size_t length = (lead & 0xE0) == 0xC0   ? 2
                        : (lead & 0xF0) == 0xE0 ? 3
                        : (lead & 0xF8) == 0xF0 ? 4
                                                : 0;
  if (length == 0 || held >= length)
    gpt::fuzz::finding("complete_utf8_prefix held back " + std::to_string(held) +
                       " bytes after a lead byte of a " + std::to_string(length) +
                       "-byte character");
  for (size_t i = cut + 1; i < bytes.size(); ++i)
    if ((static_cast<unsigned char>(bytes[i]) & 0xC0) != 0x80)
      gpt::fuzz::finding("complete_utf8_prefix held back a byte that is not a continuation");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  check_utf8_prefix(body);
  for (bool chat : {false, true}) {
    try {
      check_request(chat ? gpt::parse_chat_request(body, kModel, render_chat, 7)
                         : gpt::parse_completion_request(body, kModel, tokenize, 7),
                    chat);
      if (std::getenv("GPT_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "accepted\n");
    } catch (const gpt::ApiError& e) {
      check_error(e);
      if (std::getenv("GPT_FUZZ_VERBOSE") != nullptr)
        std::fprintf(stderr, "%d: %s\n", e.status, e.what());
    } catch (const std::exception& e) {
      gpt::fuzz::finding(std::string("an exception other than ApiError: ") + e.what());
    } catch (...) {
      gpt::fuzz::finding("an exception of unknown type");
    }
  }
  return 0;
}
