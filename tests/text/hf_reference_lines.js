// Reference side of test_hf_vs_reference.py and hf_tokenizer_benchmark.py: transformers.js's
// tokenizers (the @lenml/tokenizers copy fetched by scripts/fetch_hf_tokenizers.sh) built from a
// Hugging Face tokenizer directory (tokenizer.json + tokenizer_config.json), encoding with
// add_special_tokens: false, so no BOS or template is added (special tokens written in the text
// are still matched: transformers.js always splits on its added tokens).
// With --lines, one line of space-separated ids per input line (its "\n" included, as
// tiktoken_lines.js splits); without, the whole file's ids on one line. --decoded FILE also writes
// JSON.stringify(decode(ids)) per line (skip_special_tokens and clean_up_tokenization_spaces off,
// so the text is decoded exactly as the ids say). --time prints the encoding speed of the whole
// input (encode only: loading and writing are outside the clock); with --lines it encodes line by
// line, which is how the benchmark runs it (one multi-megabyte string is one BPE word to the
// Llama 2 tokenizer, which has no pre-tokenizer).
// usage: node hf_reference_lines.js PACKAGE_DIR TOKENIZER_DIR INPUT OUTPUT [--lines]
//        [--decoded FILE] [--time]
"use strict";
const fs = require("fs");
const path = require("path");

function usage(message) {
  process.stderr.write(`${message}\nusage: node hf_reference_lines.js PACKAGE_DIR TOKENIZER_DIR ` +
                       "INPUT OUTPUT [--lines] [--decoded FILE] [--time]\n");
  process.exit(2);
}

const args = process.argv.slice(2);
const positional = [];
let lines = false, time = false, decodedPath = null;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--lines") lines = true;
  else if (args[i] === "--time") time = true;
  else if (args[i] === "--decoded") {
    if (++i >= args.length) usage("--decoded needs a file");
    decodedPath = args[i];
  } else if (args[i].startsWith("--")) usage(`unknown option ${args[i]}`);
  else positional.push(args[i]);
}
if (positional.length !== 4) usage("expected 4 arguments");
const [pkg, tokenizerDir, input, output] = positional;

const { TokenizerLoader } = require(path.resolve(pkg, "dist", "main.js"));
const readJson = (name) => JSON.parse(fs.readFileSync(path.join(tokenizerDir, name), "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson("tokenizer.json"),
  tokenizerConfig: readJson("tokenizer_config.json"),
});

// Fatal decoding: invalid UTF-8 in the input would otherwise become U+FFFD silently and the two
// sides would compare different texts.
const text = new TextDecoder("utf-8", { fatal: true }).decode(fs.readFileSync(input));
// Each piece keeps its "\n"; a file that does not end in "\n" has a last piece without one.
const pieces = lines ? text.split(/(?<=\n)/) : [text];

const encodeOptions = { add_special_tokens: false };
const start = process.hrtime.bigint();
const ids = pieces.map((piece) => (piece.length ? tokenizer.encode(piece, encodeOptions) : []));
const seconds = Number(process.hrtime.bigint() - start) / 1e9;

fs.writeFileSync(output, ids.map((x) => x.join(" ")).join("\n") + "\n");
if (decodedPath !== null) {
  const decodeOptions = { skip_special_tokens: false, clean_up_tokenization_spaces: false };
  // decode() refuses an empty list; no ids decode to the empty string.
  const decode = (x) => (x.length ? tokenizer.decode(x, decodeOptions) : "");
  const decoded = ids.map((x) => JSON.stringify(decode(x)));
  fs.writeFileSync(decodedPath, decoded.join("\n") + "\n");
}
if (time) {
  const bytes = Buffer.byteLength(text, "utf8");
  const tokens = ids.reduce((n, x) => n + x.length, 0);
  const mbs = (bytes / 1e6 / seconds).toFixed(3);
  console.log(`${bytes} bytes, ${tokens} tokens in ${seconds.toFixed(3)} s: ${mbs} MB/s, ` +
              `${Math.round(tokens / seconds)} tokens/s`);
}
