#!/usr/bin/env python3
"""generate's cost per token when it samples, against greedy, on a 128k-vocabulary model (a
program, not a test), side by side in one run: a Llama-shaped model of 2 layers, d_model 512,
tied embeddings and Llama 3's tokenizer (vocabulary 128,256: the head's product and the sampler
both run over 128,256 logits a token), written with random weights by `train --steps 0`.
Random weights give nearly flat logits, the sampler's worst case: every token has a weight and
few are told apart by their exponent, so selection runs over most of the vocabulary; a trained
model's peaked logits make it cheaper.

ms per token = (t(N2 new tokens) - t(N1 new tokens)) / (N2 - N1), each t the least CPU time
(user + system) of --reps runs (the least: loading the 0.9 GB checkpoint varies by a second from
run to run on a shared machine), so start-up, loading and the prompt cancel. The sampling modes
are OpenAI's defaults at temperature 0.8 (top_p 1, top_k 0: every token a candidate), top_p 0.9
and top_k 50. With --baseline BUILD the same runs of another build's generate are printed beside
(the sampler before this one, say).

Usage: tests/benchmarks/bench_sampling.py [--build build] [--baseline OTHER_BUILD] [--reps 3]
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile

from bench_generate import timed

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "..", "third_party", "hf", "llama3")
MODEL = ["--arch", "llama", "--n-layer", "2", "--n-head", "8", "--n-kv-head", "4",
         "--d-model", "512", "--ffn-hidden-size", "1536", "--seq-len", "256", "--tie-embeddings"]
MODES = {"greedy": ["--temperature", "0"],
         "temperature 0.8": ["--temperature", "0.8"],
         "temperature 0.8, top_p 0.9": ["--temperature", "0.8", "--top-p", "0.9"],
         "temperature 0.8, top_k 50": ["--temperature", "0.8", "--top-k", "50"]}
N1, N2 = 8, 200


def ms_per_token(generate, checkpoint, mode_args, reps):
    cpu = {}
    for n in (N1, N2):
        runs = [timed([generate, "--device", "cpu", "--threads", "1", "--checkpoint", checkpoint,
                       "--prompt-tokens", "1,2,3", "--seed", "5", "--max-new-tokens", str(n),
                       "--ignore-eos",
                       *mode_args]) for _ in range(reps)]
        cpu[n] = min(r[1] for r in runs)
    return (cpu[N2] - cpu[N1]) / (N2 - N1) * 1000.0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    parser.add_argument("--baseline", help="another build to time beside --build")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    builds = {"this build": args.build}
    if args.baseline:
        builds["baseline"] = args.baseline
    bin_dir = os.path.join(args.build, "bin")
    with tempfile.TemporaryDirectory(prefix="gpt-bench-sampling-") as work:
        rng = random.Random(1)
        words = ["the", "model", "token", "sample", "fast", "vocabulary", "chat", "answer"]
        with open(os.path.join(work, "text.txt"), "w") as f:
            for _ in range(1000):
                f.write(" ".join(rng.choice(words) for _ in range(20)) + "\n")
        subprocess.run([os.path.join(bin_dir, "prepare-data"), "--input",
                        os.path.join(work, "text.txt"), "--output", os.path.join(work, "data"),
                        "--tokenizer", TOKENIZER], check=True, capture_output=True)
        subprocess.run([os.path.join(bin_dir, "train"), "--device", "cpu", *MODEL, "--data",
                        os.path.join(work, "data.train.h5"), "--steps", "0", "--threads", "1",
                        "--checkpoint-dir", os.path.join(work, "ck")], check=True,
                       capture_output=True)
        checkpoint = os.path.join(work, "ck", "step-00000000.h5")
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        print("| mode | " + " | ".join(f"{name} ms/token | x greedy" for name in builds) + " |")
        print("|---|" + "---|---|" * len(builds))
        table = {name: {} for name in builds}
        for mode, mode_args in MODES.items():
            for name, build in builds.items():
                generate = os.path.join(build, "bin", "generate")
                table[name][mode] = ms_per_token(generate, checkpoint, mode_args, args.reps)
            cells = [f"{table[name][mode]:.1f} | {table[name][mode] / table[name]['greedy']:.2f}"
                     for name in builds]
            print(f"| {mode} | " + " | ".join(cells) + " |")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
