#!/usr/bin/env python3
"""generate's cost per token with and without the KV cache (a program, not a test), side by side
in one run: a model of about 12.9M parameters (--model small: 4 layers, 8 heads, d_model 512,
vocabulary 256) with --seq-len 640, written with random weights by `train --steps 0` (the cost
of a token does not depend on what the weights say), prompts of 16 and 512 token ids, greedy.

ms per token = (t(N2 new tokens) - t(N1 new tokens)) / (N2 - N1), each t the median of --reps
runs: start-up, checkpoint load and the prompt's prefill are in both runs and cancel, so what is
left is the steady cost of one more token (decode step, logits gathered, sampled). t is the
run's CPU time (user + system of the one-rank, one-thread process) and, beside it, its wall time:
on a shared machine the wall time also counts the time other jobs held the core. Both modes must
print the same text, and the script checks it.

Usage: tests/benchmarks/bench_generate.py [--build build] [--threads 1] [--reps 3]
"""

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

MODEL = ["--model", "small", "--seq-len", "640"]
PROMPTS = (16, 512)
# New tokens of the two runs per mode: the window re-run costs a 640-token forward per token, so
# fewer tokens tell its cost as precisely as more tell the cache's.
NEW_TOKENS = {"kv cache": (8, 72), "no cache": (4, 20)}


def timed(cmd):
    """(wall seconds, CPU seconds, stdout) of a run that must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True)  # bytes: random ids need not be UTF-8
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stdout!r}\n{result.stderr!r}")
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return seconds, cpu, result.stdout


def main():
    parser = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--build", default=os.path.join(here, "..", "..", "build"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    with tempfile.TemporaryDirectory(prefix="gpt-bench-generate-") as work:
        timed([os.path.join(bin_dir, "train"), "--device", "cpu", *MODEL, "--steps", "0",
               "--threads", str(args.threads), "--checkpoint-dir", work])
        checkpoint = os.path.join(work, "step-00000000.h5")
        rng = random.Random(1)
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        print("| prompt tokens | kv cache ms/token (CPU) | no cache ms/token (CPU) | speed-up "
              "| kv cache ms/token (wall) | no cache ms/token (wall) |")
        print("|---|---|---|---|---|---|")
        for length in PROMPTS:
            ids = ",".join(str(rng.randrange(256)) for _ in range(length))
            cpu, wall, texts = {}, {}, {}
            for mode, (n1, n2) in NEW_TOKENS.items():
                base = [os.path.join(bin_dir, "generate"), "--device", "cpu", "--checkpoint",
                        checkpoint, "--threads", str(args.threads), "--prompt-tokens", ids,
                        "--temperature", "0"] + (["--no-kv-cache"] if mode == "no cache" else [])
                t = {}
                for n in (n1, n2):
                    runs = [timed(base + ["--max-new-tokens", str(n)]) for _ in range(args.reps)]
                    t[n] = [statistics.median(r[i] for r in runs) for i in (0, 1)]
                    texts[(mode, n)] = runs[0][2]
                wall[mode], cpu[mode] = ((t[n2][i] - t[n1][i]) / (n2 - n1) * 1000.0
                                         for i in (0, 1))
            no_cache_text = texts[("no cache", NEW_TOKENS["no cache"][1])].rstrip(b"\n")
            if not texts[("kv cache", NEW_TOKENS["kv cache"][1])].startswith(no_cache_text):
                sys.exit(f"prompt {length}: the two modes wrote different tokens")
            print(f"| {length} | {cpu['kv cache']:.2f} | {cpu['no cache']:.1f} "
                  f"| {cpu['no cache'] / cpu['kv cache']:.0f}x | {wall['kv cache']:.2f} "
                  f"| {wall['no cache']:.1f} |")
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
