// A model's chat template: the Jinja template in its tokenizer files that turns a conversation
// (OpenAI-style messages, optional tool schemas) into the text the model was trained on. Rendered
// by the interpreter in framework/text/jinja/ exactly as transformers' apply_chat_template renders
// it with Python's Jinja2 (tokenize=False): the same environment (sandboxed, trim_blocks and
// lstrip_blocks, loop controls, tojson, raise_exception, strftime_now) and the same variables
// (messages, tools, documents, add_generation_prompt and the tokenizer's special tokens). What of
// Jinja2 is supported is listed in docs/DATA.md; a template that uses anything else, or that
// raises, is a one-line input error naming the template line.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "framework/json.h"

namespace gpt {

// Whether a tokenizer directory has a chat template: chat_template.jinja, or a non-null
// "chat_template" in tokenizer_config.json (not whether it parses: ChatTemplate says that).
bool has_chat_template(const std::string& directory);

class ChatTemplate {
 public:
  // The chat template of a Hugging Face tokenizer directory: chat_template.jinja when the
  // directory has one (it takes priority, as in transformers), else tokenizer_config.json's
  // "chat_template", a string or a list of {"name", "template"}. From a list, `name` picks one;
  // empty: "tool_use" for a conversation with tools when there is one, else "default".
  // The special tokens come from tokenizer_config.json (and special_tokens_map.json over it).
  explicit ChatTemplate(const std::string& directory, const std::string& name = "");
  // A template's text with the given special-token variables ({"bos_token": "<s>"}, ...), for
  // tests and tools; `origin` names it in messages.
  ChatTemplate(const std::string& source, Json special_tokens, const std::string& origin);
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  // The text of `messages` (a JSON array) with `tools` (an array of tool schemas, or null for
  // none) and the assistant's header after it when add_generation_prompt. Thread-safe.
  std::string render(const Json& messages, const Json* tools, bool add_generation_prompt) const;

  // What the template was read from ("tokenizer_config.json DIR/...", ...), for messages.
  const std::string& origin() const { return origin_; }

 private:
  struct Parsed;
  void add(const std::string& name, const std::string& source);
  const Parsed& pick(bool with_tools) const;

  std::vector<std::unique_ptr<Parsed>> templates_;
  std::string name_;  // the one asked for, or empty
  Json special_tokens_ = Json::object();
  std::string origin_;
};

}  // namespace gpt
