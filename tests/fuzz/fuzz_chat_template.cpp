// Fuzzes chat templates (framework/text/chat_template.h and the interpreter in
// framework/text/jinja/): the input is a template's text, rendered over a small fixed
// conversation (system, user, an assistant's tool call, a tool result, content as parts, unicode)
// without tools and with tools and the generation prompt. A template either renders or fails with
// a well-formed one-line input error, within the bounds of limits.h (the fuzz build's smaller
// step and loop budgets, GPT_FUZZING), never a crash, a hang or an allocation past the limits.
#include "framework/text/chat_template.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

const gpt::Json& conversation() {
  static const gpt::Json messages = gpt::Json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris? \"quoted\" ünï 日本 🙂\n"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2.5]}}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"t\": 21}"},
    {"role": "user", "content": [{"type": "text", "text": "and"}, {"type": "image"}]},
    {"role": "assistant", "content": "<think>x</think>21 degrees", "reasoning_content": null}])");
  return messages;
}

const gpt::Json& tools() {
  static const gpt::Json t = gpt::Json::parse(R"([{"type": "function", "function": {
    "name": "get_weather", "description": "The weather.", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  gpt::fuzz::expect_success_or_input_error([&] {
    const gpt::ChatTemplate t(
        source, gpt::Json{{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"pad_token", "<pad>"}},
        "fuzz template");
    (void)t.render(conversation(), nullptr, false);
    (void)t.render(conversation(), &tools(), true);
  });
  return 0;
}
