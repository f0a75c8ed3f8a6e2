#!/usr/bin/env python3
"""serve's latency and throughput by layout, side by side in one run (a program, not a test): the
article's serving claims (tp lowers a single request's latency; pp suits high-throughput batched
serving) measured on this machine's CPU.

Model: --model small (4 layers, 8 heads, d_model 512, vocabulary 256: 12.7M parameters without
wpe) at --seq-len 256, random weights from `train --steps 0` (a token's cost does not depend on
what the weights say), fp32. Requests: prompts of 128 random token ids, 64 new tokens, greedy,
streamed (server-sent events), through Python's http.client on loopback.

Per layout (1 rank; 1 rank with 2 threads, the same cores as the 2-rank layouts; tp 2; pp 2;
tp 2 x pp 2 only with 4 or more cores, else skipped: oversubscribed timings are noise):
- TTFT: arrival to the first streamed token, one request alone (median of --reps);
- TPOT: (last token - first token) / 63 of that request (median);
- throughput: generated tokens per second of wall time with C clients each sending one request
  at once, C = 1, 4, 16, 64 (--max-num-seqs 64).
Each rank runs one thread (--threads 1) unless said; ranks are bound to cores by mpiexec.

Usage: tests/benchmarks/bench_serve.py [--build build] [--reps 3] [--concurrency 1,4,16,64]
"""

import argparse
import concurrent.futures
import http.client
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MODEL = ["--model", "small", "--seq-len", "256"]
PROMPT_TOKENS, NEW_TOKENS = 128, 64
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def start_server(build, checkpoint, np, options, threads):
    cmd = [os.path.join(build, "bin", "serve"), "--checkpoint", checkpoint, "--port", "0",
           "--device", "cpu", "--threads", str(threads), "--max-num-seqs", "64"] + options
    if np > 1:
        cmd = ["mpiexec", "-n", str(np), "--bind-to", "core"] + cmd
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if found:
            return proc, int(found.group(1))
    os.killpg(proc.pid, signal.SIGKILL)
    raise SystemExit("serve did not start:\n" + proc.stderr.read())


def stop_server(proc, np):
    ranks = [proc.pid]
    if np > 1:
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
        ranks = [int(p) for p in children.stdout.split()]
    for pid in ranks:
        os.kill(pid, signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def streamed_request(port, prompt):
    """(seconds to the first token, seconds from the first token to the last, tokens)."""
    body = json.dumps({"prompt": prompt, "max_tokens": NEW_TOKENS, "temperature": 0,
                       "stream": True})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.status == 200, response.read()
    first = last = None
    tokens = 0
    for raw in response:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        text = json.loads(line[len("data: "):])["choices"][0]["text"]
        if text:
            now = time.perf_counter()
            first = first or now
            last = now
            tokens += 1  # the bytes tokenizer: a token is a byte, a delta holds one or more
    conn.close()
    return first - start, last - first, tokens


def measure(port, prompts, reps, concurrency):
    ttft, tpot = [], []
    for i in range(reps):
        to_first, decode, _ = streamed_request(port, prompts[i])
        ttft.append(to_first)
        tpot.append(decode / (NEW_TOKENS - 1))
    throughput = {}
    for c in concurrency:
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(c) as pool:
            list(pool.map(lambda p: streamed_request(port, p), prompts[:c]))
        throughput[c] = c * NEW_TOKENS / (time.perf_counter() - start)
    return statistics.median(ttft), statistics.median(tpot), throughput


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--concurrency", default="1,4,16,64")
    args = parser.parse_args()
    concurrency = [int(c) for c in args.concurrency.split(",")]
    cores = os.cpu_count()
    layouts = [("1 rank", 1, [], 1), ("1 rank, 2 threads", 1, [], 2),
               ("tp 2", 2, ["--tp", "2"], 1), ("pp 2", 2, ["--pp", "2"], 1),
               ("tp 2 x pp 2", 4, ["--tp", "2", "--pp", "2"], 1)]
    rng = random.Random(1)
    # Token ids as prompts (a prompt of 128 ids whatever the tokenizer); no 0 bytes.
    prompts = [[rng.randrange(1, 256) for _ in range(PROMPT_TOKENS)]
               for _ in range(max(concurrency + [args.reps]))]
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run([os.path.join(args.build, "bin", "train"), "--device", "cpu", "--steps",
                        "0", "--checkpoint-dir", folder] + MODEL, check=True, env=ENV,
                       capture_output=True)
        checkpoint = os.path.join(folder, "step-00000000.h5")
        rows = []
        for name, np, options, threads in layouts:
            if np * threads > cores:
                print(f"{name}: skipped ({np * threads} cores needed, {cores} here)",
                      file=sys.stderr)
                continue
            proc, port = start_server(args.build, checkpoint, np, options, threads)
            try:
                streamed_request(port, prompts[0])  # warm-up
                rows.append((name, *measure(port, prompts, args.reps, concurrency)))
            finally:
                stop_server(proc, np)
            print(f"{name}: done", file=sys.stderr)
    base = rows[0]
    header = "| layout | TTFT ms | TPOT ms | " + " | ".join(
        f"tokens/s at {c}" for c in concurrency) + " |"
    print(header)
    print("|" + "---|" * (3 + len(concurrency)))
    for name, ttft, tpot, throughput in rows:
        cells = [f"{ttft * 1e3:.1f} ({base[1] / ttft:.2f}x)", f"{tpot * 1e3:.2f} "
                 f"({base[2] / tpot:.2f}x)"]
        cells += [f"{throughput[c]:.0f} ({throughput[c] / base[3][c]:.2f}x)" for c in concurrency]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
