// Conversations as chat data sets and OpenAI's API write them: a .jsonl file, one conversation a
// line, {"messages": [{"role": ..., "content": ...}, ...], "tools": [...]} ("tools" optional).
// Each message is a JSON object with a string "role"; its "content" is a string, null, or a
// list of parts ({"type": "text", "text": ...}); everything else in it (tool_calls, tool_call_id,
// name, ...) is passed to the chat template as written. Read by prepare-data --render-only, and
// meant for supervised fine-tuning.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "framework/json.h"

namespace gpt {

struct Conversation {
  Json messages = Json::array();  // the message objects, in order
  Json tools;                     // an array of tool schemas, or null for none
};

// One conversation from its JSON text; `where` names it in messages ("FILE line N"). A bad one
// is a one-line input error saying what is wrong with which message.
Conversation parse_conversation(const std::string& text, const std::string& where);

// The conversations of a .jsonl file in order, blank lines skipped.
class ConversationReader {
 public:
  explicit ConversationReader(const std::string& path);
  // The next conversation; false at the end of the file.
  bool next(Conversation& c);
  // The line of the conversation last read (1-based) and "FILE line N" for messages.
  int64_t line() const { return line_; }
  std::string where() const;

 private:
  std::string path_;
  std::ifstream in_;
  std::string buffer_;  // read from the file; its first taken_ bytes are lines already given
  size_t taken_ = 0;
  bool at_end_ = false;
  int64_t line_ = 0;
};

}  // namespace gpt
