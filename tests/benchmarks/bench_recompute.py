"""The tables of bench_recompute.sh: per --recompute mode the median tokens/s (over rounds of
the median of each run's step lines after the first 2) and its ratio to none, rank 0's measured
memory per category; then one layer's activation bytes per microbatch from the ledger of the
1-rank GPipe runs, against Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
Transformer Models", section 4): s*b*h*(34 + 5*a*s/h) bytes without recomputation, 34*s*b*h
with selective recomputation and 2*s*b*h with full (16-bit activations, 1-byte dropout masks),
and this project's fp32 caches, which the same derivation gives as
  none: 4*(16*s*b*h + 4*s*b + a*s*s*b)   (the block's input, 15 (N,C) caches, 4 row statistics,
                                          the softmax probabilities)
  selective: 4*(16*s*b*h + 4*s*b)        full: 4*s*b*h (the input only)
(docs/MEMORY.md lists the buffers). 'MB' is 1e6 bytes.

Usage: bench_recompute.py --work DIR --rounds R --seq-len S --micro-batch B --d-model H --n-head A
"""

import argparse
import json
import os
import statistics

from bench_metrics import median, timed_steps

CATEGORIES = ["weights", "grads", "optimizer", "activations", "comm", "workspace"]
MODES = ["none", "selective", "full"]


def measured(path, rank=0):
    with open(path) as f:
        for event in map(json.loads, filter(str.strip, f)):
            if event.get("event") == "memory" and event["kind"] == "measured" \
                    and event["rank"] == rank:
                return event["bytes"]
    raise SystemExit(f"{path}: no measured memory event for rank {rank}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--work", required=True)
    p.add_argument("--rounds", type=int, required=True)
    for name in ("seq-len", "micro-batch", "d-model", "n-head"):
        p.add_argument("--" + name, type=int, required=True)
    a = p.parse_args()
    path = lambda name: os.path.join(a.work, name + ".jsonl")  # noqa: E731

    speed = {m: statistics.median(median(timed_steps(path(f"speed_{m}_r{r}"), 2), "tokens_per_s")
                                  for r in range(1, a.rounds + 1)) for m in MODES}
    print("recompute | tokens/s | vs none | " + " | ".join(f"{c} MB" for c in CATEGORIES)
          + " | total MB")
    print("---|---|---|" + "---|" * len(CATEGORIES) + "---")
    for m in MODES:
        mem = measured(path(f"speed_{m}_r1"))
        print(f"{m} | {speed[m]:.0f} | {speed[m] / speed['none']:.3f} | "
              + " | ".join(f"{mem[c] / 1e6:.2f}" for c in CATEGORIES)
              + f" | {mem['total'] / 1e6:.2f}")

    s, b, h, heads = a.seq_len, a.micro_batch, a.d_model, a.n_head
    sbh = s * b * h
    korthikanti = {"none": sbh * (34 + 5 * heads * s / h), "selective": 34 * sbh,
                   "full": 2 * sbh}
    ours = {"none": 4 * (16 * sbh + 4 * s * b + heads * s * s * b),
            "selective": 4 * (16 * sbh + 4 * s * b), "full": 4 * sbh}
    print()
    print(f"one layer, one microbatch (s={s} b={b} h={h} a={heads}) | measured bytes | "
          "fp32 formula | Korthikanti 16-bit | measured / Korthikanti")
    print("---|---|---|---|---")
    for m in MODES:
        act = {(L, k): measured(path(f"layer_{m}_L{L}_m{k}"))["activations"]
               for L in (1, 2) for k in (1, 2)}
        layer = (act[2, 2] - act[1, 2]) - (act[2, 1] - act[1, 1])
        print(f"{m} | {layer} | {ours[m]} | {korthikanti[m]:.0f} | "
              f"{layer / korthikanti[m]:.2f}")


if __name__ == "__main__":
    main()
