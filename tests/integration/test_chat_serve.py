"""serve's chat completions (docs/SERVING.md "Chat completions") with a real chat template: a tiny
Llama trained on data of Qwen3's tokenizer (whose tokenizer_config.json carries its template),
served on loopback.
- A chat request's prompt is the template rendered by Python's Jinja2 as transformers renders it
  (tests/text/transformers_chat.py) and tokenized by the reference tokenizer (transformers.js,
  special tokens matched, none added): usage.prompt_tokens counts those ids, and the answer equals,
  token for token, /v1/completions given them (greedy); the same with tools given.
- A streamed chat answer (the role first, then the text, the finish reason, the usage chunk) is
  the non-streamed one; a chat answer is the same alone and beside another request.
- Bad conversations get their 400 and the server goes on serving.
- The official OpenAI JavaScript client (scripts/fetch_openai_client.sh) gets the same answers as
  plain HTTP over completions, chat and both streams.
Exits 77 (skipped) without the fetched files, Python's jinja2 or Node.js.
"""

import json
import os
import shutil
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
sys.path.insert(0, os.path.join(HERE, "..", "text"))
import gpt_harness as h  # noqa: E402

SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
QWEN3 = os.path.join(SOURCE, "third_party", "hf", "qwen3")
REFERENCE = os.path.join(SOURCE, "third_party", "lenml-tokenizers", "package")
OPENAI = os.path.join(SOURCE, "third_party", "openai-node", "package")
try:
    from serve_harness import Server
    from transformers_chat import compile_template, special_tokens_map
except ImportError as missing:  # pragma: no cover
    print(f"skipped: {missing}")
    sys.exit(77)
if not (all(os.path.exists(p) for p in (os.path.join(QWEN3, "tokenizer.json"), REFERENCE, OPENAI))
        and shutil.which("node")):
    print("skipped: needs scripts/fetch_hf_tokenizers.sh's and fetch_openai_client.sh's files "
          "and Node.js")
    sys.exit(77)

DOCUMENTS = [f"Note {i}: the quick brown fox jumps over {i * 3} lazy dogs." for i in range(200)]
MESSAGES = [{"role": "system", "content": "You are brief."},
            {"role": "user", "content": "Say hello."}]
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def sse_events(text):
    events = [line[len("data: "):] for line in text.split("\n") if line.startswith("data: ")]
    assert events and events[-1] == "[DONE]", events[-3:]
    return [json.loads(e) for e in events[:-1]]


class ChatServeTest(h.TempDirTest):

    def reference_ids(self, messages, tools=None):
        """transformers' apply_chat_template(messages, tools, add_generation_prompt=True,
        tokenize=True): Jinja2's text, encoded by transformers.js without added tokens."""
        with open(os.path.join(QWEN3, "tokenizer_config.json")) as f:
            config = json.load(f)
        text = compile_template(config["chat_template"]).render(
            messages=messages, tools=tools, documents=None, add_generation_prompt=True,
            **special_tokens_map(config))
        rendered, ids = self.path("rendered.txt"), self.path("ids.txt")
        with open(rendered, "w") as f:
            f.write(text)
        subprocess.run(["node", os.path.join(SOURCE, "tests", "text", "hf_reference_lines.js"),
                        REFERENCE, QWEN3, rendered, ids], check=True, timeout=120)
        with open(ids) as f:
            return [int(i) for i in f.read().split()]

    def checkpoint(self):
        jsonl = self.path("docs.jsonl")
        with open(jsonl, "w") as f:
            for d in DOCUMENTS:
                f.write(json.dumps({"text": d}) + "\n")
        h.run("prepare-data", ["--input", jsonl, "--output", self.path("data", "d"),
                               "--tokenizer", QWEN3, "--val-fraction", 0.1], check=True)
        h.train(["--arch", "llama", "--n-layer", 1, "--d-model", 32, "--n-head", 2,
                 "--seq-len", 128, "--data", self.path("data", "d.train.h5"), "--steps", 2,
                 "--global-batch-size", 2, "--micro-batch-size", 2, "--threads", 1,
                 "--checkpoint-dir", self.path("run")], tiny=False, timeout=240)
        return self.path("run")

    def post(self, server, path, body):
        status, _, text = server.request(path, body)
        self.assertEqual(status, 200, text)
        return json.loads(text) if not body.get("stream") else sse_events(text)

    def test_chat(self):
        server = Server(self.checkpoint(), options=["--seq-len", 512], startup_timeout=120)
        try:
            model = json.loads(server.request("/v1/models")[2])["data"][0]["id"]
            for tools in (None, TOOLS):
                ids = self.reference_ids(MESSAGES, tools)
                chat = self.post(server, "/v1/chat/completions",
                                 {"messages": MESSAGES, "tools": tools, "max_tokens": 8,
                                  "temperature": 0})
                plain = self.post(server, "/v1/completions",
                                  {"prompt": ids, "max_tokens": 8, "temperature": 0})
                self.assertEqual(chat["object"], "chat.completion")
                self.assertTrue(chat["id"].startswith("chatcmpl-"))
                self.assertEqual(chat["usage"]["prompt_tokens"], len(ids))
                self.assertEqual(chat["choices"][0]["message"],
                                 {"role": "assistant", "content": plain["choices"][0]["text"]})
                self.assertEqual(chat["choices"][0]["finish_reason"],
                                 plain["choices"][0]["finish_reason"])
                self.assertEqual(chat["usage"]["completion_tokens"],
                                 plain["usage"]["completion_tokens"])

            # The stream: the role first, the text, one finish reason, then the usage chunk.
            request = {"messages": MESSAGES, "max_completion_tokens": 8, "temperature": 0.8,
                       "seed": 11}
            whole = self.post(server, "/v1/chat/completions", request)
            chunks = self.post(server, "/v1/chat/completions",
                               dict(request, stream=True, stream_options={"include_usage": True}))
            self.assertTrue(all(c["object"] == "chat.completion.chunk" for c in chunks))
            self.assertEqual(chunks[0]["choices"][0]["delta"].get("role"), "assistant")
            self.assertEqual("".join(c["choices"][0]["delta"].get("content", "")
                                     for c in chunks if c["choices"]),
                             whole["choices"][0]["message"]["content"])
            finishes = [c["choices"][0]["finish_reason"] for c in chunks
                        if c["choices"] and c["choices"][0]["finish_reason"]]
            self.assertEqual(finishes, [whole["choices"][0]["finish_reason"]])
            self.assertEqual(chunks[-1]["choices"], [])
            self.assertEqual(chunks[-1]["usage"], whole["usage"])

            # Batch invariance: the same answer beside another request.
            beside = {}
            other = threading.Thread(target=lambda: beside.update(other=self.post(
                server, "/v1/chat/completions",
                {"messages": [{"role": "user", "content": "Count to ten."}], "max_tokens": 20,
                 "temperature": 1.0, "seed": 3})))
            other.start()
            again = self.post(server, "/v1/chat/completions", request)
            other.join(timeout=120)
            self.assertEqual(again["choices"][0]["message"], whole["choices"][0]["message"])
            self.assertIn("other", beside)

            # Bad conversations: a 400 naming the field each, and the server goes on.
            for body, text in (({"messages": []}, "'messages' must be a non-empty array"),
                               ({"messages": [{"role": "user", "content": 5}]},
                                "messages[0].content must be"),
                               ({"messages": MESSAGES, "n": 2}, "'n' is not supported"),
                               ({"prompt": "x"}, "unknown field")):
                status, _, answer = server.request("/v1/chat/completions", body)
                self.assertEqual(status, 400, answer)
                self.assertIn(text, json.loads(answer)["error"]["message"])
            self.post(server, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 2})

            # The official client gets what plain HTTP gets.
            client = subprocess.run(
                ["node", os.path.join(HERE, "openai_client_check.js"), OPENAI,
                 server.url("/v1"), model], capture_output=True, text=True, timeout=120)
            self.assertEqual(client.returncode, 0, client.stderr)
            got = json.loads(client.stdout)
            completion = self.post(server, "/v1/completions",
                                   {"prompt": "The quick brown", "max_tokens": 6,
                                    "temperature": 0})
            self.assertEqual(got["completion"]["text"], completion["choices"][0]["text"])
            self.assertEqual(got["completion"]["usage"], completion["usage"])
            self.assertEqual(got["completion_stream"], completion["choices"][0]["text"])
            chat = self.post(server, "/v1/chat/completions",
                             {"messages": [{"role": "system", "content": "You are brief."},
                                           {"role": "user", "content": "Say hello."}],
                              "max_completion_tokens": 6, "temperature": 0})
            self.assertEqual(got["chat"], {"object": "chat.completion", "role": "assistant",
                                           "content": chat["choices"][0]["message"]["content"],
                                           "finish_reason": chat["choices"][0]["finish_reason"],
                                           "usage": chat["usage"]})
            self.assertEqual(got["chat_stream"],
                             {"roles": ["assistant"],
                              "content": chat["choices"][0]["message"]["content"],
                              "finish_reasons": [chat["choices"][0]["finish_reason"]],
                              "usage": chat["usage"]})
        finally:
            code, out, err = server.stop()
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    h.main()
