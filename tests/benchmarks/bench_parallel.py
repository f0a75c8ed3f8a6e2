"""The table of bench_parallel.sh: reads the metrics files of runs of one model and global batch in
different layouts and prints, per run, the median tokens/s of the step lines after the first
--skip, the median share of the step spent in tp and in dp communication, the bytes moved per
step in the tp and dp groups (measured, from the metrics) beside the formula, and the throughput
relative to the first run.

Formula (docs/ARCHITECTURE.md, "Tensor parallelism"): per microbatch, 4 all-reduces of b*s*h
floats per layer, plus the embedding's forward and the head's backward all-reduce of b*s*h and
three of b*s for the loss; per step, one all-reduce of a double for the gradient norm. The dp
group moves the gradient buffer once per step (all parameters, float32). Bytes are the payload
handed to each call on one rank (parallel/mpi_communicator.h), not the wire traffic.

Usage: bench_parallel.py [--skip 2] --n-layer L --d-model H --seq-len S --global-batch-size G
                         --micro-batch-size B NAME=METRICS.jsonl ...   (NAME: tp1, tp2, dp2, ...)
"""

import argparse
import re
import sys

from bench_metrics import median, median_share, print_head, timed_steps

VOCAB = 256  # the built-in corpus and every byte-level data set


def parse_layout(name):
    tp = re.search(r"tp(\d+)", name)
    dp = re.search(r"dp(\d+)", name)
    return (int(tp.group(1)) if tp else 1), (int(dp.group(1)) if dp else 1)


def tp_bytes_formula(tp, dp, a):
    if tp == 1:
        return 0
    micro = a.global_batch_size // (dp * a.micro_batch_size)
    bsh = a.micro_batch_size * a.seq_len * a.d_model
    per_micro = (4 * a.n_layer + 2) * bsh + 3 * a.micro_batch_size * a.seq_len
    return 4 * micro * per_micro + 8  # + the gradient norm's double


def parameter_count(a):
    """Every parameter (wpe included), as the tp 1 flat gradient buffer holds them."""
    h = a.d_model
    per_layer = 12 * h * h + 13 * h  # c_attn, c_proj, c_fc, c_proj with biases, two LayerNorms
    return VOCAB * h + a.seq_len * h + a.n_layer * per_layer + 2 * h


def dp_bytes_formula(tp, dp, a):
    if dp == 1:
        return 0
    if tp != 1:
        return None  # the per-rank share depends on the split; not needed here
    return 4 * parameter_count(a)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", type=int, default=2)
    for name in ("--n-layer", "--d-model", "--seq-len", "--global-batch-size",
                 "--micro-batch-size"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("runs", nargs="+", help="NAME=METRICS.jsonl")
    a = parser.parse_args()

    rows = []
    for spec in a.runs:
        name, path = spec.split("=", 1)
        used = timed_steps(path, a.skip)
        med = lambda key: median(used, key)  # noqa: E731
        share = lambda key: median_share(used, key)  # noqa: E731
        tp, dp = parse_layout(name)
        rows.append(dict(name=name, tp=tp, dp=dp, steps=len(used), tok=med("tokens_per_s"),
                         step=med("step_time_s"), tp_share=share("tp_comm_s"),
                         dp_share=share("dp_comm_s"), tp_bytes=int(med("tp_bytes")),
                         dp_bytes=int(med("dp_bytes")), tp_formula=tp_bytes_formula(tp, dp, a),
                         dp_formula=dp_bytes_formula(tp, dp, a), loss=used[-1]["loss"]))

    base = rows[0]["tok"]
    mb = lambda v: "-" if v is None else f"{v / 1e6:.3f}"  # noqa: E731
    print(f"\nmodel: {a.n_layer} layers, d {a.d_model}, seq {a.seq_len}; global batch "
          f"{a.global_batch_size}, micro-batch {a.micro_batch_size}; medians over steps > "
          f"{a.skip}; bytes per step per rank, MB (1e6)")
    head = (f"{'run':<5} {'steps':>5} {'step s':>7} {'tok/s':>8} {'vs ' + rows[0]['name']:>7} "
            f"{'tp comm':>8} {'dp comm':>8} {'tp MB':>9} {'formula':>9} {'dp MB':>8} "
            f"{'formula':>8} {'last loss':>9}")
    print_head(head)
    for r in rows:
        print(f"{r['name']:<5} {r['steps']:>5} {r['step']:>7.3f} {r['tok']:>8.0f} "
              f"{r['tok'] / base:>7.3f} {100 * r['tp_share']:>7.1f}% {100 * r['dp_share']:>7.1f}% "
              f"{mb(r['tp_bytes']):>9} {mb(r['tp_formula']):>9} {mb(r['dp_bytes']):>8} "
              f"{mb(r['dp_formula']):>8} {r['loss']:>9.4f}")
    print()
    ok = True
    for r in rows[1:]:
        ratio = r["tok"] / base
        verdict = "ok" if ratio >= 0.9 else "BELOW TARGET"
        ok = ok and ratio >= 0.9
        print(f"{r['name']} / {rows[0]['name']} throughput: {ratio:.3f} (target >= 0.9: {verdict})")
        if r["tp_formula"]:
            match = "matches" if r["tp_bytes"] == r["tp_formula"] else "DIFFERS"
            print(f"{r['name']} tp bytes per step: measured {r['tp_bytes']}, formula "
                  f"{r['tp_formula']} ({match})")
        if r["dp_formula"]:
            match = "matches" if r["dp_bytes"] == r["dp_formula"] else "DIFFERS"
            print(f"{r['name']} dp bytes per step: measured {r['dp_bytes']}, formula "
                  f"{r['dp_formula']} ({match})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
