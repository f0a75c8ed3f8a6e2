"""The table of bench_zero.sh: runs at dp 2 and dp 4 with and without --distributed-optimizer
(names dpN and dpN_zero; dpN_zero_waited adds --no-overlap-param-gather). Per run: median
tokens/s of the step lines after --skip and its ratio to the run without the option at the same
dp, the median exposed dp time (dp_comm_s) and dp share of the step, the dp bytes of
a step from the counters (dp_bytes: the payload handed to each call on rank 0,
parallel/mpi_communicator.h) beside the counters' formula, and the ring formula of the bytes each
rank sends; then rank 0's measured weights, optimizer and comm bytes from the metrics' memory
events.

With P the floats of rank 0's flat buffers (the weights bytes / 4; padded under ZeRO-1) and n = dp:
  counters:  all-reduce 4P;  reduce-scatter (whole input) 4P + all-gather (own shard) 4P/n
             + 8 (the gradient norm's double, summed over dp)
  ring:      all-reduce 2(n-1)/n * 4P;  reduce-scatter (n-1)/n * 4P + all-gather (n-1)/n * 4P
so on the wire the two cost the same; ZeRO-1 saves optimizer memory, not traffic.

A NAME given several times pools the steps of its files (rounds of the same run).

Usage: bench_zero.py [--skip 2] NAME=METRICS.jsonl ...
"""

import argparse
import json
import re

from bench_metrics import median, median_share, timed_steps


def measured_memory(path):
    """Rank 0's measured bytes per category (the metrics' memory event)."""
    with open(path) as f:
        for m in map(json.loads, filter(str.strip, f)):
            if m.get("event") == "memory" and m["kind"] == "measured" and m["rank"] == 0:
                return m["bytes"]
    raise SystemExit(f"{path}: no measured memory event for rank 0")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("runs", nargs="+", help="NAME=METRICS.jsonl")
    a = parser.parse_args()
    files = {}
    for spec in a.runs:
        name, path = spec.split("=", 1)
        files.setdefault(name, []).append(path)
    rows = {}
    for name, paths in files.items():
        used = [step for path in paths for step in timed_steps(path, a.skip)]
        mem = measured_memory(paths[0])
        n = int(re.search(r"dp(\d+)", name).group(1))
        zero = "_zero" in name
        P = mem["weights"] // 4
        # + the gradient norm's double, summed over dp under ZeRO-1
        counters = 4 * P + (4 * P // n + 8 if zero else 0)
        ring = 2 * (n - 1) * 4 * P // n
        rows[name] = dict(n=n, zero=zero, steps=len(used), tok=median(used, "tokens_per_s"),
                          dp_ms=1e3 * median(used, "dp_comm_s"),
                          dp_share=median_share(used, "dp_comm_s"),
                          dp_bytes=int(median(used, "dp_bytes")), counters=counters, ring=ring,
                          mem=mem)
    print(f"\n{'run':<16} {'steps':>5} {'tokens/s':>9} {'vs no opt':>9} {'dp ms':>6} "
          f"{'dp share':>8} "
          f"{'dp MB':>8} {'formula':>8} {'ring MB':>8} {'weights MB':>10} {'optimizer MB':>12} "
          f"{'comm MB':>8}")
    for name, r in rows.items():
        base = rows.get(re.sub(r"_zero.*", "", name))
        ratio = f"{r['tok'] / base['tok']:.3f}" if base else "-"
        mb = lambda v: f"{v / 1e6:.3f}"  # noqa: E731
        print(f"{name:<16} {r['steps']:>5} {r['tok']:>9.0f} {ratio:>9} {r['dp_ms']:>6.1f} "
              f"{r['dp_share']:>8.1%} "
              f"{mb(r['dp_bytes']):>8} {mb(r['counters']):>8} {mb(r['ring']):>8} "
              f"{mb(r['mem']['weights']):>10} {mb(r['mem']['optimizer']):>12} "
              f"{mb(r['mem']['comm']):>8}")
    for name, r in rows.items():
        base = rows.get(re.sub(r"_zero.*", "", name))
        if r["zero"] and base:
            full = base["mem"]["optimizer"]
            print(f"{name}: optimizer bytes {r['mem']['optimizer']} = full {full} / {r['n']} "
                  f"({full // r['n']}) + padding {r['mem']['optimizer'] - full // r['n']}; "
                  f"dp bytes counted {r['dp_bytes']} vs formula {r['counters']}")


if __name__ == "__main__":
    main()
