// Reference side of test_gpt2_vs_tiktoken.py: OpenAI's tiktoken (its WASM build from npm, fetched
// by scripts/fetch_gpt2_tokenizer.sh), encoding "gpt2", encode_ordinary. With --lines, one line of
// space-separated ids per input line (its "\n" included); without, the whole file's ids, one line.
// usage: node tiktoken_lines.js TIKTOKEN_PACKAGE_DIR INPUT OUTPUT [--lines]
"use strict";
const fs = require("fs");
const path = require("path");
const [pkg, input, output, mode] = process.argv.slice(2);
const { get_encoding } = require(path.join(pkg, "tiktoken.cjs"));
const enc = get_encoding("gpt2");
const text = fs.readFileSync(input, "utf8");
const out = [];
if (mode === "--lines") {
  const lines = text.split(/(?<=\n)/);
  for (const line of lines) out.push(Array.from(enc.encode_ordinary(line)).join(" "));
} else {
  out.push(Array.from(enc.encode_ordinary(text)).join(" "));
}
enc.free();
fs.writeFileSync(output, out.join("\n") + "\n");
