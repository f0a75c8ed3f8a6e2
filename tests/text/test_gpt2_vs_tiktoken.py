#!/usr/bin/env python3
"""GPT-2 tokenizer vs OpenAI's tiktoken (gpt2, encode_ordinary; its WASM build run by node):
1. a generated corpus of 12,000 varied lines (make_tokenizer_corpus.py), encoded line by line by
   both: identical ids on every line, and decode(encode(line)) == line (tokenize_lines checks);
2. a 2.6 MB corpus as one text through `prepare-data --tokenizer gpt2 --read-mb 1`, so it is
   streamed in pieces and split into train and validation: train + validation == tiktoken's ids
   of the whole text;
3. prepare-data's bad input: a missing vocabulary, invalid UTF-8: one "error:" line naming the
   file and the problem, exit 1, no output file.
Exits 77 (reported skipped) where node or the files of scripts/fetch_gpt2_tokenizer.sh are absent.
usage: test_gpt2_vs_tiktoken.py SOURCE_DIR BIN_DIR TOKENIZE_LINES"""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py

here = os.path.dirname(os.path.abspath(__file__))
source, bin_dir, tokenize_lines = sys.argv[1:4]
vocab = os.path.join(source, "third_party", "gpt2", "encoder.json")
merges = os.path.join(source, "third_party", "gpt2", "vocab.bpe")
tiktoken = os.path.join(source, "third_party", "tiktoken", "package")
node = shutil.which("node")
if not node or not all(os.path.exists(p) for p in (vocab, merges, tiktoken)):
    print("skipped: needs node and scripts/fetch_gpt2_tokenizer.sh's files")
    sys.exit(77)


def run(args):
    subprocess.run(args, check=True, timeout=240)


failures = 0
with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    run([sys.executable, os.path.join(here, "make_tokenizer_corpus.py"), corpus])
    ours, ref = os.path.join(tmp, "ours.txt"), os.path.join(tmp, "ref.txt")
    run([tokenize_lines, vocab, merges, corpus, ours])
    run([node, os.path.join(here, "tiktoken_lines.js"), tiktoken, corpus, ref, "--lines"])
    with open(corpus, encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    with open(ours) as a, open(ref) as b:
        got, want = a.read().split("\n"), b.read().split("\n")
    print(f"{len(want) - 1} lines compared")
    if len(got) != len(want):
        print(f"FAIL: {len(got)} lines of ids, tiktoken {len(want)}")
        failures += 1
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            failures += 1
            if failures <= 10:
                print(f"FAIL line {i + 1} {lines[i]!r}: ours {g} tiktoken {w}")

    big = os.path.join(tmp, "big.txt")
    run([sys.executable, os.path.join(here, "make_tokenizer_corpus.py"), big, "--lines", "60000"])
    prefix = os.path.join(tmp, "out", "big")
    run([os.path.join(bin_dir, "prepare-data"), "--input", big, "--output", prefix, "--tokenizer",
         "gpt2", "--val-fraction", "0.3", "--read-mb", "1", "--vocab", vocab, "--merges", merges])
    whole = os.path.join(tmp, "whole.txt")
    run([node, os.path.join(here, "tiktoken_lines.js"), tiktoken, big, whole])
    with open(whole) as f:
        want = [int(x) for x in f.read().split()]
    got = []
    for part in ("train", "val"):
        with h5py.File(f"{prefix}.{part}.h5", "r") as f:
            got += f["tokens"][()].tolist()
            attrs = dict(f.attrs)
            if attrs["tokenizer"] != "gpt2" or attrs["vocab_size"] != 50257 or \
                    attrs["eot"] != 50256 or attrs["max_token"] != max(f["tokens"][()]):
                failures += 1
                print(f"FAIL {part} attributes {attrs}")
    print(f"{os.path.getsize(big)} bytes as one text: {len(got)} ids, tiktoken {len(want)}")
    if got != want:
        failures += 1
        first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        print(f"FAIL whole text: first difference at id {first}: ours {got[first:first + 8]} "
              f"tiktoken {want[first:first + 8]}")

    def expect_error(args, parts, what):
        global failures
        out = os.path.join(tmp, "bad", what)
        result = subprocess.run([os.path.join(bin_dir, "prepare-data"), "--output", out,
                                 "--tokenizer", "gpt2", "--merges", merges] + args,
                                capture_output=True, text=True, timeout=60)
        lines = result.stderr.strip().splitlines()
        ok = result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error:") and \
            all(p in lines[0] for p in parts) and not os.path.exists(out + ".train.h5") and \
            not os.path.exists(out + ".train.h5.tmp")
        print(f"{what}: {lines}")
        if not ok:
            failures += 1
            print(f"FAIL {what}: exit {result.returncode}, stderr {result.stderr!r}")

    invalid = os.path.join(tmp, "invalid.txt")
    with open(invalid, "wb") as f:
        f.write(b"good text\nthen a bad byte \xff here\n")
    missing = os.path.join(tmp, "no_encoder.json")
    expect_error(["--input", corpus, "--vocab", missing], [missing, "no such file"], "missing")
    expect_error(["--input", invalid, "--vocab", vocab], [invalid, "invalid UTF-8 at byte 26"],
                 "invalid_utf8")

print("FAILED" if failures else "PASSED")
sys.exit(1 if failures else 0)
