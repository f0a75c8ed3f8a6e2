// Reading conversations from .jsonl (see conversations.h).
#include "framework/text/conversations.h"

#include "framework/check.h"
#include "framework/user_files.h"

namespace gpt {
namespace {

// A line longer than this is not a conversation a model trains on (and would be read whole).
constexpr size_t kMaxLineBytes = 64u << 20;

}  // namespace

Conversation parse_conversation(const std::string& text, const std::string& where) {
  const Json j = parse_json_object(text, where);
  Conversation c;
  const auto messages = j.find("messages");
  GPT_INPUT_CHECK(messages != j.end() && messages->is_array() && !messages->empty(),
                  where << ": \"messages\" must be a non-empty array of messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string what = where + ": messages[" + std::to_string(i) + "]";
    GPT_INPUT_CHECK(m.is_object(), what << " must be an object (found " << json_found(m) << ")");
    const auto role = m.find("role");
    GPT_INPUT_CHECK(role != m.end() && role->is_string(), what << " has no string \"role\"");
    const auto content = m.find("content");
    if (content != m.end() && content->is_array()) {
      for (const Json& part : *content)
        GPT_INPUT_CHECK(part.is_object(),
                        what << ": \"content\" as a list holds objects (parts such "
                                "as {\"type\": \"text\", \"text\": ...}), found "
                             << json_found(part));
    } else {
      GPT_INPUT_CHECK(content == m.end() || content->is_string() || content->is_null(),
                      what << ": \"content\" must be a string, null or a list of parts (found "
                           << json_found(*content) << ")");
    }
  }
  c.messages = *messages;
  const auto tools = j.find("tools");
  if (tools != j.end() && !tools->is_null()) {
    GPT_INPUT_CHECK(tools->is_array(), where
                                           << ": \"tools\" must be an array of tool schemas (found "
                                           << json_found(*tools) << ")");
    for (const Json& t : *tools)
      GPT_INPUT_CHECK(t.is_object(),
                      where << ": \"tools\" holds objects (found " << json_found(t) << ")");
    c.tools = *tools;
  }
  return c;
}

ConversationReader::ConversationReader(const std::string& path) : path_(path) {
  require_regular_file(path, "--input");
  in_.open(path, std::ios::binary);
  GPT_INPUT_CHECK(in_.good(), "--input " << path << ": cannot be read");
}

std::string ConversationReader::where() const {
  return path_ + " line " + std::to_string(line_);
}

bool ConversationReader::next(Conversation& c) {
  constexpr size_t kChunk = 1u << 20;
  while (true) {
    size_t newline;
    while ((newline = buffer_.find('\n', taken_)) == std::string::npos && !at_end_) {
      buffer_.erase(0, taken_);
      taken_ = 0;
      GPT_INPUT_CHECK(buffer_.size() <= kMaxLineBytes, path_ << " line " << line_ + 1
                                                             << ": longer than "
                                                             << (kMaxLineBytes >> 20) << " MiB");
      const size_t old = buffer_.size();
      buffer_.resize(old + kChunk);
      in_.read(buffer_.data() + old, static_cast<std::streamsize>(kChunk));
      buffer_.resize(old + static_cast<size_t>(in_.gcount()));
      GPT_INPUT_CHECK(!in_.bad(), path_ << ": read failed");
      at_end_ = in_.eof();
    }
    if (taken_ == buffer_.size() && at_end_) return false;
    const size_t end = newline == std::string::npos ? buffer_.size() : newline;
    GPT_INPUT_CHECK(end - taken_ <= kMaxLineBytes, path_ << " line " << line_ + 1
                                                         << ": longer than "
                                                         << (kMaxLineBytes >> 20) << " MiB");
    const std::string text = buffer_.substr(taken_, end - taken_);
    taken_ = newline == std::string::npos ? end : end + 1;
    ++line_;
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank lines
    c = parse_conversation(text, where());
    return true;
  }
}

}  // namespace gpt
