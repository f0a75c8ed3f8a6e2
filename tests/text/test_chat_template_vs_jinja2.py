#!/usr/bin/env python3
"""Chat templates rendered by `prepare-data --render-only` (the C++ interpreter of
framework/text/jinja/) against Python's Jinja2 set up exactly as transformers' apply_chat_template
sets it up (its _compile_jinja_template, restated in transformers_chat.py: ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, the loopcontrols extension and the {% generation %} tag, its tojson
filter, raise_exception and strftime_now globals; render(messages, tools, documents=None,
add_generation_prompt, **special_tokens_map)):
1. the chat templates of the tokenizers scripts/fetch_hf_tokenizers.sh fetches (Llama 3, Qwen3,
   Llama 3.1, Qwen2.5, Gemma 3, DeepSeek-V3) over every conversation of CONVERSATIONS (system and
   user, user alone, several turns, tool calls with object and string arguments, tool results,
   tools given, unicode, quotes and newlines, content as a list of parts, thinking, roles that do
   not alternate, an empty and a null content), with and without add_generation_prompt;
2. hand-written templates (CONSTRUCTS) that use each construct the interpreter supports
   (whitespace control, literals, operators, filters, tests, loops, macros, call blocks,
   namespaces, string methods, tojson's options, undefined values, Unicode case mapping) and
   ones that must fail (ERRORS), over two conversations each;
3. random templates from fixed seeds (chat_template_cases.py): typed expressions and statements
   over two conversations, and text and tags with every kind of whitespace control over one.
Every text must equal Jinja2's byte for byte; where Jinja2 raises, prepare-data must fail with one
"error: " line and a non-zero exit (each such conversation is run alone, since prepare-data stops
at the first bad line). strftime_now reads each side's own clock (the product has no way to fix
it): a template printing the date is rendered by Jinja2 before and after the C++ run, and compared
when both agree (the day did not change in between).
Exits 77 (skipped) without Python's jinja2 or the fetched files.
usage: test_chat_template_vs_jinja2.py SOURCE_DIR BIN_DIR"""
import json
import os
import subprocess
import sys
import tempfile
import warnings

try:
    import jinja2
    from transformers_chat import compile_template, special_tokens_map
except ImportError:
    print("skipped: needs Python's jinja2 (Debian's python3-jinja2)")
    sys.exit(77)

warnings.filterwarnings("ignore", category=SyntaxWarning)  # Python's, about generated code
source, bin_dir = sys.argv[1:3]
prepare_data = os.path.join(bin_dir, "prepare-data")
REAL = ("llama3", "qwen3", "llama3_1", "qwen2_5", "gemma3", "deepseek_v3")
real_dirs = {name: os.path.join(source, "third_party", "hf", name) for name in REAL}
if not all(os.path.exists(os.path.join(d, "tokenizer_config.json")) for d in real_dirs.values()):
    print("skipped: needs scripts/fetch_hf_tokenizers.sh's files")
    sys.exit(77)


class Raised:
    def __init__(self, error):
        self.error = f"{type(error).__name__}: {error}"


def render_python(template, tokens, conversation, generation_prompt):
    try:
        return template.render(messages=conversation["messages"],
                               tools=conversation.get("tools"), documents=None,
                               add_generation_prompt=generation_prompt, **tokens)
    except Exception as e:  # what transformers would raise to its caller
        return Raised(e)


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "The city, e.g. \"Paris\""},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "noop", "description": "Does nothing.",
                                      "parameters": {"type": "object", "properties": {}}}}]


def call(name, arguments, as_text=False, call_id="call_1"):
    return {"id": call_id, "type": "function", "function": {
        "name": name, "arguments": json.dumps(arguments) if as_text else arguments}}


CONVERSATIONS = {
    "system_user": {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                                 {"role": "user", "content": "Hello!"}]},
    "user_only": {"messages": [{"role": "user", "content": "What is 2+2?"}]},
    "multi_turn": {"messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "Tell me a joke."},
        {"role": "assistant", "content": "Why did the chicken cross the road?"},
        {"role": "user", "content": "Why?"}]},
    "ends_with_assistant": {"messages": [{"role": "user", "content": "Say hi"},
                                         {"role": "assistant", "content": "hi"}]},
    "tool_calls_object": {"tools": TOOLS, "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"})]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21.5}"},
        {"role": "assistant", "content": "It is 21.5 °C in Paris."}]},
    "tool_calls_text": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            call("get_weather", {"city": "Paris"}, True, "call_1"),
            call("get_weather", {"city": "Oslo"}, True, "call_2")]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "snow"},
        {"role": "user", "content": "Thanks"}]},
    "tools_no_call": {"tools": TOOLS, "messages": [{"role": "user", "content": "Hi there"}]},
    "tools_empty": {"tools": [], "messages": [{"role": "user", "content": "Hi there"}]},
    "unicode_quotes": {"messages": [
        {"role": "system", "content": "Réponds en français. 日本語も OK 🙂"},
        {"role": "user", "content": "Line one\nline \"two\" and 'three'\ttab \\ backslash\n\n"},
        {"role": "assistant", "content": "  padded answer  \n"},
        {"role": "user", "content": "ΣΑΣ ß İ \u2028 \u00a0 end"}]},
    "content_parts": {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "System in parts."}]},
        {"role": "user", "content": [{"type": "text", "text": "Look:"},
                                     {"type": "image", "url": "x.png"},
                                     {"type": "text", "text": "what is it?"}]}]},
    "thinking": {"messages": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "<think>\nsimple sum\n</think>\n\n4"},
        {"role": "user", "content": "and 3+3?"},
        {"role": "assistant", "content": "6", "reasoning_content": "again simple"}]},
    "not_alternating": {"messages": [{"role": "user", "content": "one"},
                                     {"role": "user", "content": "two"}]},
    "empty_content": {"messages": [{"role": "user", "content": ""},
                                   {"role": "assistant", "content": ""},
                                   {"role": "user", "content": "x"}]},
    "null_content": {"messages": [{"role": "user", "content": "x"},
                                  {"role": "assistant", "content": None}]},
    "system_only": {"messages": [{"role": "system", "content": "Only a system prompt."}]},
}
CONSTRUCT_CONVERSATIONS = ("multi_turn", "tool_calls_object")

# Each is rendered as a tokenizer's chat template with these special tokens.
CONSTRUCT_CONFIG = {"bos_token": "<s>", "eos_token": {"__type": "AddedToken", "content": "</s>"},
                    "unk_token": None, "pad_token": "", "additional_special_tokens": ["<x>", "<y>"]}

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chat_template_cases import CONSTRUCTS, ERRORS  # noqa: E402
from chat_template_cases import random_templates, whitespace_templates  # noqa: E402

RANDOM = 150  # random templates of each kind, from fixed seeds


def run_cpp(tokenizer_dir, conversations, generation_prompt, work):
    """prepare-data --render-only over the conversations: (exit code, texts, stderr)."""
    path = os.path.join(work, "chats.jsonl")
    with open(path, "w", encoding="utf-8") as f:
        for c in conversations:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    cmd = [prepare_data, "--render-only", "--tokenizer", tokenizer_dir, "--input", path]
    if generation_prompt:
        cmd.append("--add-generation-prompt")
    r = subprocess.run(cmd, capture_output=True, timeout=120)
    texts = [json.loads(line)["text"] for line in r.stdout.decode("utf-8").split("\n") if line]
    return r.returncode, texts, r.stderr.decode("utf-8", "replace")


class Comparison:
    def __init__(self, work):
        self.work = work
        self.compared = self.failed_alike = 0
        self.failures = []

    def check(self, label, tokenizer_dir, template, tokens, cases, must_render=False):
        """cases: [(name, conversation)]; each rendered with and without the generation prompt.
        must_render: a case Jinja2 fails on is itself a failure (a construct that lost its use)."""
        for generation_prompt in (False, True):
            expected = [(n, c, render_python(template, tokens, c, generation_prompt))
                        for n, c in cases]
            if must_render:
                for n, _, e in expected:
                    if isinstance(e, Raised):
                        self.failures.append(f"{label} / {n}: Jinja2 raised {e.error}")
            good = [(n, c, e) for n, c, e in expected if not isinstance(e, Raised)]
            if good:
                code, texts, err = run_cpp(tokenizer_dir, [c for _, c, _ in good],
                                           generation_prompt, self.work)
                if code != 0 or len(texts) != len(good):
                    self.failures.append(f"{label} (add_generation_prompt={generation_prompt}): "
                                         f"prepare-data exit {code}: {err.strip()}")
                for (name, _, want), got in zip(good, texts):
                    self.compared += 1
                    if got != want:
                        self.failures.append(
                            f"{label} / {name} (add_generation_prompt={generation_prompt}):\n"
                            f"  Jinja2: {want!r}\n  C++:    {got!r}")
            for name, c, e in expected:
                if not isinstance(e, Raised):
                    continue
                code, texts, err = run_cpp(tokenizer_dir, [c], generation_prompt, self.work)
                errors = [l for l in err.splitlines() if l.startswith("error: ")]
                if code == 0 or len(errors) != 1:
                    self.failures.append(
                        f"{label} / {name} (add_generation_prompt={generation_prompt}): Jinja2 "
                        f"raised {e.error!r}, prepare-data gave exit {code}, texts {texts}, "
                        f"stderr {err!r}")
                else:
                    self.failed_alike += 1


def template_dir(work, name, text):
    d = os.path.join(work, "templates", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(CONSTRUCT_CONFIG, chat_template=text), f, ensure_ascii=False)
    return d


def main():
    with tempfile.TemporaryDirectory(prefix="chat-template-") as work:
        cmp = Comparison(work)
        cases = list(CONVERSATIONS.items())
        for name, d in real_dirs.items():
            with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
                config = json.load(f)
            cmp.check(name, d, compile_template(config["chat_template"]),
                      special_tokens_map(config), cases)
        real = (cmp.compared, cmp.failed_alike)
        tokens = special_tokens_map(CONSTRUCT_CONFIG)
        few = [(n, CONVERSATIONS[n]) for n in CONSTRUCT_CONVERSATIONS]
        for name, text in CONSTRUCTS.items():
            d = template_dir(work, name, text)
            try:
                template = compile_template(text)
            except jinja2.exceptions.TemplateError as e:
                cmp.failures.append(f"construct {name} is not a template Jinja2 compiles: {e}")
                continue
            if name == "strftime":  # each side reads its own clock: compare within one day
                for _ in range(3):
                    before = render_python(template, tokens, few[0][1], False)
                    failures = len(cmp.failures)
                    cmp.check(name, d, template, tokens, few, must_render=True)
                    if render_python(template, tokens, few[0][1], False) == before:
                        break
                    del cmp.failures[failures:]  # the date changed during the run: again
                continue
            cmp.check(name, d, template, tokens, few, must_render=True)
        for name, text in ERRORS.items():
            d = template_dir(work, "error-" + name, text)
            try:
                template = compile_template(text)
            except Exception as e:  # refused when compiled (a SyntaxError for a misplaced break)
                code, texts, err = run_cpp(d, [few[0][1]], False, work)
                errors = [l for l in err.splitlines() if l.startswith("error: ")]
                if code == 0 or len(errors) != 1:
                    cmp.failures.append(f"error template {name}: Jinja2 refused it ({e}), "
                                        f"prepare-data gave exit {code}, stderr {err!r}")
                else:
                    cmp.failed_alike += 1
                continue
            before = cmp.failed_alike
            cmp.check("error template " + name, d, template, tokens, few[:1])
            if cmp.failed_alike == before:
                cmp.failures.append(f"error template {name}: Jinja2 rendered it")
        before = (cmp.compared, cmp.failed_alike)
        constructs = (cmp.compared - real[0], cmp.failed_alike - real[1])
        for i, text in enumerate(random_templates(1, RANDOM) + whitespace_templates(1, RANDOM)):
            random_cases = few if i < RANDOM else few[:1]
            d = template_dir(work, "random", text)
            try:
                template = compile_template(text)
            except Exception as e:
                code, _, err = run_cpp(d, [random_cases[0][1]], False, work)
                if code == 0 or len([l for l in err.splitlines() if l.startswith("error: ")]) != 1:
                    cmp.failures.append(f"random template {i}: Jinja2 refused it ({e}), prepare-data "
                                        f"gave exit {code}: {text!r}")
                else:
                    cmp.failed_alike += 1
                continue
            cmp.check(f"random template {i} {text!r}", d, template, tokens, random_cases)
        randoms = (cmp.compared - before[0], cmp.failed_alike - before[1])
        print(f"{len(REAL)} real templates x {len(cases)} conversations x 2 (with and without "
              f"the generation prompt): {real[0]} texts identical, {real[1]} failing in both; "
              f"{len(CONSTRUCTS)} construct templates x {len(few)} conversations x 2: "
              f"{constructs[0]} texts identical; {len(ERRORS)} error templates: "
              f"{constructs[1]} failures alike; {2 * RANDOM} random "
              f"templates: {randoms[0]} texts identical, {randoms[1]} failing in both"
              + (f"; {len(cmp.failures)} MISMATCHES" if cmp.failures else ""))
        for f in cmp.failures:
            print("MISMATCH", f)
        return 1 if cmp.failures else 0


if __name__ == "__main__":
    sys.exit(main())
