// Chat templates read from a tokenizer directory and rendered as transformers renders them (see
// chat_template.h): which template (chat_template.jinja over tokenizer_config.json, "tool_use"
// for a conversation with tools), and the variables apply_chat_template passes (messages, tools,
// documents, add_generation_prompt, and the tokenizer's special_tokens_map, each token as its
// text).
#include "framework/text/chat_template.h"

#include <ctime>
#include <filesystem>

#include "framework/check.h"
#include "framework/text/hf_tokenizer_model.h"
#include "framework/text/jinja/ast.h"
#include "framework/text/jinja/interpreter.h"
#include "framework/text/unicode_text.h"
#include "framework/user_files.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

// The special tokens transformers' special_tokens_map holds, in its order.
constexpr const char* kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

// A token as tokenizer_config.json writes it: its text, or an AddedToken {"content": ...}; none
// for null.
std::optional<std::string> token_text(const Json& v, const std::string& what) {
  if (v.is_null()) return std::nullopt;
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  fail_input(what + ": expected a string or an object with a string \"content\" (found " +
             json_found(v) + ")");
}

// special_tokens_map's entries of a tokenizer config (or of special_tokens_map.json) into
// `tokens`: each token that is set and not empty, additional_special_tokens as a list of texts,
// and the model's extra_special_tokens by their own names.
void read_special_tokens(const Json& config, const std::string& file, Json& tokens) {
  for (const char* key : kSpecialTokens) {
    if (!config.contains(key)) continue;
    const std::optional<std::string> t = token_text(config[key], file + ": " + key);
    if (t && !t->empty()) tokens[key] = *t;
  }
  if (config.contains("additional_special_tokens") &&
      !config["additional_special_tokens"].is_null()) {
    const Json& list = config["additional_special_tokens"];
    GPT_INPUT_CHECK(list.is_array(), file << ": additional_special_tokens must be an array (found "
                                          << json_found(list) << ")");
    Json texts = Json::array();
    for (const Json& t : list)
      if (std::optional<std::string> s = token_text(t, file + ": additional_special_tokens"))
        texts.push_back(*s);
    if (!texts.empty()) tokens["additional_special_tokens"] = texts;
  }
  if (config.contains("extra_special_tokens") && config["extra_special_tokens"].is_object())
    for (const auto& [key, value] : config["extra_special_tokens"].items()) {
      const std::optional<std::string> t =
          token_text(value, file + ": extra_special_tokens." + key);
      if (t && !t->empty()) tokens[key] = *t;
    }
}

Json read_json_file(const fs::path& path, const char* what) {
  return parse_json_object(read_tokenizer_file(path.string(), what),
                           std::string(what) + " " + path.string());
}

}  // namespace

struct ChatTemplate::Parsed {
  std::string name;  // empty for the only template
  jinja::Body body;
};

bool has_chat_template(const std::string& directory) {
  const fs::path dir(directory);
  if (is_regular_file((dir / "chat_template.jinja").string())) return true;
  const fs::path config_path = dir / "tokenizer_config.json";
  if (!is_regular_file(config_path.string())) return false;
  const Json config = read_json_file(config_path, "tokenizer config");
  return config.contains("chat_template") && !config["chat_template"].is_null();
}

ChatTemplate::ChatTemplate(const std::string& directory, const std::string& name) : name_(name) {
  const fs::path dir(directory);
  std::error_code ec;
  GPT_INPUT_CHECK(fs::is_directory(dir, ec),
                  "tokenizer directory " << directory << ": not a directory");
  const fs::path config_path = dir / "tokenizer_config.json";
  const fs::path jinja_path = dir / "chat_template.jinja";
  const Json config = is_regular_file(config_path.string())
                          ? read_json_file(config_path, "tokenizer config")
                          : Json::object();
  if (is_regular_file(jinja_path.string())) {
    origin_ = jinja_path.string();
    const std::string source = read_tokenizer_file(origin_, "chat template");
    GPT_INPUT_CHECK(first_invalid_utf8(source) == std::string::npos,
                    origin_ << ": not UTF-8 at byte " << first_invalid_utf8(source));
    add("", source);
  } else {
    origin_ = config_path.string();
    GPT_INPUT_CHECK(config.contains("chat_template") && !config["chat_template"].is_null(),
                    directory << " has no chat template (no chat_template.jinja, and no "
                                 "\"chat_template\" in tokenizer_config.json)");
    const Json& t = config["chat_template"];
    if (t.is_string()) {
      add("", t.get<std::string>());
    } else {
      GPT_INPUT_CHECK(t.is_array() && !t.empty(),
                      origin_ << ": chat_template must be a string or a list of {\"name\", "
                                 "\"template\"} (found "
                              << json_found(t) << ")");
      for (const Json& named : t) {
        GPT_INPUT_CHECK(named.is_object() && named.contains("name") && named["name"].is_string() &&
                            named.contains("template") && named["template"].is_string(),
                        origin_ << ": each chat_template entry must be {\"name\": string, "
                                   "\"template\": string}");
        add(named["name"].get<std::string>(), named["template"].get<std::string>());
      }
    }
  }
  if (!name_.empty()) {
    bool found = false;
    for (const auto& p : templates_) found = found || p->name == name_;
    GPT_INPUT_CHECK(found, origin_ << " has no chat template named " << quoted_excerpt(name_));
  }
  read_special_tokens(config, config_path.string(), special_tokens_);
  const fs::path map_path = dir / "special_tokens_map.json";
  if (is_regular_file(map_path.string()))
    read_special_tokens(read_json_file(map_path, "special tokens map"), map_path.string(),
                        special_tokens_);
}

ChatTemplate::ChatTemplate(const std::string& source, Json special_tokens,
                           const std::string& origin)
    : special_tokens_(std::move(special_tokens)), origin_(origin) {
  GPT_INPUT_CHECK(special_tokens_.is_object(), origin_ << ": the special tokens must be an object");
  GPT_INPUT_CHECK(first_invalid_utf8(source) == std::string::npos,
                  origin_ << ": not UTF-8 at byte " << first_invalid_utf8(source));
  add("", source);
}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

void ChatTemplate::add(const std::string& name, const std::string& source) {
  auto p = std::make_unique<Parsed>();
  p->name = name;
  try {
    p->body = jinja::parse_template(source);
  } catch (const Error& e) {
    fail_input(origin_ + (name.empty() ? "" : " (template " + quoted_excerpt(name) + ")") + ": " +
               e.what());
  }
  templates_.push_back(std::move(p));
}

// transformers' get_chat_template: the one template; or from named ones the one asked for, else
// "tool_use" when tools are given and there is one, else "default".
const ChatTemplate::Parsed& ChatTemplate::pick(bool with_tools) const {
  if (templates_.size() == 1 && templates_[0]->name.empty()) return *templates_[0];
  auto find = [&](const std::string& n) -> const Parsed* {
    for (const auto& p : templates_)
      if (p->name == n) return p.get();
    return nullptr;
  };
  if (!name_.empty()) return *find(name_);
  if (with_tools)
    if (const Parsed* p = find("tool_use")) return *p;
  const Parsed* p = find("default");
  GPT_INPUT_CHECK(p, origin_ << " has several chat templates and none named \"default\"");
  return *p;
}

std::string ChatTemplate::render(const Json& messages, const Json* tools,
                                 bool add_generation_prompt) const {
  const bool with_tools = tools && !tools->is_null();
  const Parsed& t = pick(with_tools);
  std::vector<std::pair<std::string, jinja::Value>> vars;
  try {
    vars.emplace_back("messages", jinja::from_json(messages));
    vars.emplace_back("tools", with_tools ? jinja::from_json(*tools) : jinja::Value::none());
    vars.emplace_back("documents", jinja::Value::none());
    vars.emplace_back("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
    for (const auto& [key, value] : special_tokens_.items())
      vars.emplace_back(key, jinja::from_json(value));
  } catch (const jinja::Failure& f) {
    fail_input(std::string("conversation: ") + f.what());
  }
  std::timespec now{};
  std::timespec_get(&now, TIME_UTC);
  jinja::Renderer renderer(now);
  try {
    return renderer.render(t.body, std::move(vars));
  } catch (const Error& e) {
    fail_input(origin_ + (t.name.empty() ? "" : " (template " + quoted_excerpt(t.name) + ")") +
               ": " + e.what());
  }
}

}  // namespace gpt
