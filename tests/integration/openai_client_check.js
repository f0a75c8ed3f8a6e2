// The official OpenAI JavaScript client (the npm package `openai`, fetched by
// scripts/fetch_openai_client.sh) against a running serve, as a user's program calls it:
// a completion, a streamed completion, a chat completion and a streamed chat completion with
// usage. Prints one JSON object with what the client returned; test_chat_serve.py compares it
// with the server's answers to the same requests over plain HTTP.
// usage: node openai_client_check.js PACKAGE_DIR BASE_URL MODEL
"use strict";
const path = require("path");

async function main() {
  const [pkg, baseURL, model] = process.argv.slice(2);
  if (!model) throw new Error("usage: node openai_client_check.js PACKAGE_DIR BASE_URL MODEL");
  const OpenAI = require(path.resolve(pkg));
  const client = new (OpenAI.default || OpenAI)({ apiKey: "unused", baseURL, maxRetries: 0 });
  const messages = [{ role: "system", content: "You are brief." },
                    { role: "user", content: "Say hello." }];
  const out = {};

  const completion = await client.completions.create(
    { model, prompt: "The quick brown", max_tokens: 6, temperature: 0 });
  out.completion = { text: completion.choices[0].text,
                     finish_reason: completion.choices[0].finish_reason,
                     usage: completion.usage };

  let streamed = "";
  const stream = await client.completions.create(
    { model, prompt: "The quick brown", max_tokens: 6, temperature: 0, stream: true });
  for await (const chunk of stream)
    for (const choice of chunk.choices) streamed += choice.text;
  out.completion_stream = streamed;

  const chat = await client.chat.completions.create(
    { model, messages, max_completion_tokens: 6, temperature: 0 });
  out.chat = { object: chat.object, role: chat.choices[0].message.role,
               content: chat.choices[0].message.content,
               finish_reason: chat.choices[0].finish_reason, usage: chat.usage };

  const chunks = await client.chat.completions.create(
    { model, messages, max_completion_tokens: 6, temperature: 0, stream: true,
      stream_options: { include_usage: true } });
  const chatStream = { roles: [], content: "", finish_reasons: [], usage: null };
  for await (const chunk of chunks) {
    if (chunk.usage) chatStream.usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role) chatStream.roles.push(choice.delta.role);
      if (choice.delta.content) chatStream.content += choice.delta.content;
      if (choice.finish_reason) chatStream.finish_reasons.push(choice.finish_reason);
    }
  }
  out.chat_stream = chatStream;
  process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
  process.stderr.write(`error: ${e.message}\n`);
  process.exit(1);
});
