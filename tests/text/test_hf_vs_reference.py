#!/usr/bin/env python3
"""The Hugging Face tokenizer (tokenizer.json) vs transformers.js's (the @lenml/tokenizers copy, run
by node through hf_reference_lines.js), on the three tokenizers of scripts/fetch_hf_tokenizers.sh:
Llama 3 and Qwen3 (byte-level BPE) and Llama 2 (SentencePiece-style BPE, byte fallback):
1. for each, a generated corpus of 12,000 varied lines (make_tokenizer_corpus.py --extended, its
   own seed), encoded line by line by both without special tokens: identical ids on every line;
   hf_tokenize_lines itself checks that the ids decode back to the line where the file decodes
   exactly (byte-level without a normaliser: Llama 3; Qwen3's NFC gives back the NFC form), and
   for Llama 2 the decoded lines must equal the reference's (its decoding is not the identity: a
   written "▁" comes back as a space);
2. lines with special tokens written in them: with --allow-special-tokens the ids equal the
   reference's (which always matches them); without it no special token's id appears;
3. the Llama 3 corpus as one text through `prepare-data --tokenizer third_party/hf/llama3`, with
   one thread and with two: the tokens equal the reference's ids of the whole file (a plain text
   file is one document: no separator token is added).
The corpora hold no added token's text (a generated line that would is dropped), and keep apart
the few characters where transformers.js departs from Hugging Face's own (Rust) tokenizers: those
lines are compared and reported but do not fail the test, so the C++ side may follow either.
Exits 77 (reported skipped) where node or the files of scripts/fetch_hf_tokenizers.sh are absent.
usage: test_hf_vs_reference.py SOURCE_DIR BIN_DIR HF_TOKENIZE_LINES"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
source, bin_dir, hf_tokenize_lines = sys.argv[1:4]
NAMES = ("llama3", "qwen3", "llama2")
SEEDS = {"llama3": 1, "qwen3": 2, "llama2": 3}
reference_js = os.path.join(here, "hf_reference_lines.js")
corpus_py = os.path.join(here, "make_tokenizer_corpus.py")
package = os.path.join(source, "third_party", "lenml-tokenizers", "package")
tokenizer_dirs = {name: os.path.join(source, "third_party", "hf", name) for name in NAMES}
node = shutil.which("node")
needed = [os.path.join(package, "dist", "main.js")] + [
    os.path.join(d, f) for d in tokenizer_dirs.values()
    for f in ("tokenizer.json", "tokenizer_config.json")]
if not node or not all(os.path.exists(p) for p in needed):
    print("skipped: needs node and scripts/fetch_hf_tokenizers.sh's files")
    sys.exit(77)

# Where transformers.js (JavaScript's regular expressions) and Hugging Face's tokenizers
# (Oniguruma) disagree, lines are compared but only reported, so the C++ side may follow either:
# JavaScript's \s takes U+FEFF and not U+0085 (Oniguruma's the reverse, like Unicode's
# White_Space), and transformers.js rewrites the pattern's case-insensitive "(?i:'s|...)" as
# "'[sS]|...", which misses the long s (U+017F) that Unicode case folding matches.
REFERENCE_QUIRKS = ("\u0085", "\ufeff", "'\u017f")
QUIRK_LINES = ["a\u0085b\n", "x \u0085 y\n", "\ufeffhello world\n", "a \ufeff b\n", "it'\u017f\n"]
SPECIAL_LINES = ["hello<|begin_of_text|>world\n", "<s> a </s>\n", "<|im_start|>user\n",
                 "hi<|im_end|>\n", "<|endoftext|><|end_of_text|>\n", "x <unk> y\n",
                 "<think>reason</think> answer\n", " <s>lead\n", "<s><s></s>\n",
                 "<<|eot_id|>>\n", "a<|reserved_special_token_5|>b\n", "no special token here\n"]


def added_tokens(name):
    """(all added tokens' texts, the ids of the special ones) of a tokenizer.json."""
    with open(os.path.join(tokenizer_dirs[name], "tokenizer.json"), encoding="utf-8") as f:
        added = json.load(f)["added_tokens"]
    return {t["content"] for t in added}, {t["id"] for t in added if t["special"]}


def split_lines(text):
    """Lines with their "\n", as hf_reference_lines.js and hf_tokenize_lines split."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def write_lines(path, lines):
    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write("".join(lines))


def read_output(path):
    """The lines of an output file; none when the program did not write it (already a failure)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def json_string(line):
    try:
        return json.loads(line)
    except ValueError:
        return f"(not JSON) {line}"


def run(args):
    """Runs a command; (exit code, stderr). Output files are what the caller reads."""
    result = subprocess.run(args, capture_output=True, text=True, timeout=240)
    return result.returncode, result.stderr


def reference(tokenizer, input_path, output, *options):
    return [node, reference_js, package, tokenizer_dirs[tokenizer], input_path, output, *options]


failures = 0


def fail(message):
    global failures
    failures += 1
    print(f"FAIL {message}")


def check_ran(what, result):
    code, stderr = result
    if code != 0:
        fail(f"{what}: exit {code}: {stderr.strip()[-2000:]}")


def compare_lines(what, lines, ours, want, strict=True, decoded=False):
    """Line by line; prints the first differences with the line's repr. Returns how many differ."""
    if len(ours) != len(want) or len(want) != len(lines):
        fail(f"{what}: {len(ours)} lines from ours, {len(want)} from the reference, "
             f"{len(lines)} in the input")
    differ = 0
    for i, (line, got, expected) in enumerate(zip(lines, ours, want)):
        if decoded:
            got, expected = json_string(got), json_string(expected)
        if got != expected:
            differ += 1
            if differ <= 5:
                print(f"{'FAIL' if strict else 'note'} {what} line {i + 1} {line!r}:\n"
                      f"  ours      {got if decoded else '[' + got + ']'}\n"
                      f"  reference {expected if decoded else '[' + expected + ']'}")
    if differ and strict:
        fail(f"{what}: {differ} of {len(want)} lines differ")
    return differ


with tempfile.TemporaryDirectory() as tmp, \
        concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
    def path(name):
        return os.path.join(tmp, name)

    texts, special_ids = set(), {}
    for name in NAMES:
        contents, special_ids[name] = added_tokens(name)
        texts |= contents

    # The corpora: generated, then split into what is compared strictly and the quirk lines.
    corpora, quirks = {}, list(QUIRK_LINES)
    for name in NAMES:
        check_ran(f"corpus {name}", run([sys.executable, corpus_py, path(f"raw.{name}.txt"),
                                         "--extended", "--seed", str(SEEDS[name])]))
        with open(path(f"raw.{name}.txt"), encoding="utf-8", newline="") as f:
            lines = split_lines(f.read())
        kept = [x for x in lines if not any(t in x for t in texts)]
        dropped = len(lines) - len(kept)
        quirks += [x for x in kept if any(q in x for q in REFERENCE_QUIRKS)]
        corpora[name] = [x for x in kept if not any(q in x for q in REFERENCE_QUIRKS)]
        write_lines(path(f"corpus.{name}.txt"), corpora[name])
        print(f"{name}: {len(corpora[name])} lines, {os.path.getsize(path(f'corpus.{name}.txt'))} "
              f"bytes ({dropped} generated lines with an added token's text dropped)")
    write_lines(path("quirks.txt"), quirks)
    write_lines(path("special.txt"), SPECIAL_LINES)

    # Every run at once, two at a time (the reference's node and the C++ tool in parallel).
    jobs = {}
    for name in NAMES:
        tok = tokenizer_dirs[name]
        decoded = name == "llama2"
        jobs[f"reference {name}"] = reference(
            name, path(f"corpus.{name}.txt"), path(f"ref.{name}"), "--lines",
            *(["--decoded", path(f"ref.{name}.decoded")] if decoded else []))
        jobs[f"hf_tokenize_lines {name}"] = [
            hf_tokenize_lines, tok, path(f"corpus.{name}.txt"), path(f"ours.{name}"),
            *(["--decoded", path(f"ours.{name}.decoded")] if decoded else [])]
        jobs[f"reference {name} special"] = reference(name, path("special.txt"),
                                                      path(f"ref.{name}.special"), "--lines")
        jobs[f"hf_tokenize_lines {name} --allow-special-tokens"] = [
            hf_tokenize_lines, tok, path("special.txt"), path(f"ours.{name}.special"),
            "--allow-special-tokens"]
        jobs[f"hf_tokenize_lines {name} special as text"] = [
            hf_tokenize_lines, tok, path("special.txt"), path(f"ours.{name}.special_as_text")]
        jobs[f"reference {name} quirks"] = reference(name, path("quirks.txt"),
                                                     path(f"ref.{name}.quirks"), "--lines")
        jobs[f"hf_tokenize_lines {name} quirks"] = [hf_tokenize_lines, tok, path("quirks.txt"),
                                                   path(f"ours.{name}.quirks")]
    jobs["reference llama3 whole"] = reference("llama3", path("corpus.llama3.txt"),
                                               path("ref.llama3.whole"))
    for threads in (1, 2):
        jobs[f"prepare-data llama3 --threads {threads}"] = [
            os.path.join(bin_dir, "prepare-data"), "--input", path("corpus.llama3.txt"),
            "--output", path(f"prepared{threads}/llama3"), "--tokenizer", tokenizer_dirs["llama3"],
            "--val-fraction", "0", "--threads", str(threads)]
    futures = {what: pool.submit(run, args) for what, args in jobs.items()}
    results = {what: future.result() for what, future in futures.items()}
    for what, result in results.items():
        check_ran(what, result)

    for name in NAMES:
        n = compare_lines(f"{name} ids", corpora[name], read_output(path(f"ours.{name}")),
                          read_output(path(f"ref.{name}")))
        print(f"{name}: {len(corpora[name])} lines compared, {n} differ")
        if name == "llama2":
            n = compare_lines("llama2 decoded", corpora[name],
                              read_output(path("ours.llama2.decoded")),
                              read_output(path("ref.llama2.decoded")), decoded=True)
            print(f"llama2: {len(corpora[name])} decoded lines compared, {n} differ")

        n = compare_lines(f"{name} --allow-special-tokens", SPECIAL_LINES,
                          read_output(path(f"ours.{name}.special")),
                          read_output(path(f"ref.{name}.special")))
        print(f"{name}: {len(SPECIAL_LINES)} lines with special tokens compared, {n} differ")
        as_text = read_output(path(f"ours.{name}.special_as_text"))
        found = sorted({int(x) for ids in as_text for x in ids.split()} & special_ids[name])
        if found or len(as_text) != len(SPECIAL_LINES):
            fail(f"{name} without --allow-special-tokens: {len(as_text)} lines, "
                 f"special ids {found}")

        # Information only (see REFERENCE_QUIRKS): not a failure either way.
        n = compare_lines(f"{name} quirks", quirks, read_output(path(f"ours.{name}.quirks")),
                          read_output(path(f"ref.{name}.quirks")), strict=False)
        print(f"{name}: {len(quirks)} lines where transformers.js departs from Hugging Face's "
              f"tokenizers, {n} differ from it (not a failure)")

    import h5py  # here, not at the top: a machine without it can still skip above

    with open(path("ref.llama3.whole")) as f:
        want = [int(x) for x in f.read().split()]
    for threads in (1, 2):
        prefix = path(f"prepared{threads}/llama3")
        if not os.path.exists(f"{prefix}.train.h5"):
            fail(f"prepare-data --threads {threads} wrote no {prefix}.train.h5")
            continue
        with h5py.File(f"{prefix}.train.h5", "r") as f:
            got = f["tokens"][()].tolist()
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        print(f"prepare-data --threads {threads}: {len(got)} tokens, reference {len(want)}; "
              f"attributes {attrs}")
        if got != want:
            first = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w),
                         min(len(got), len(want)))
            fail(f"prepare-data --threads {threads}: first difference at token {first}: ours "
                 f"{got[first:first + 8]} reference {want[first:first + 8]}")

print("FAILED" if failures else "PASSED")
sys.exit(1 if failures else 0)
