"""The table of bench_calibration.sh: per layout and round, plan's predicted step time and heaviest
rank's memory (NAME.ROUND.plan.jsonl, plan --json with the layout fixed, priced by that round's
calibration) against the run's measured ones (NAME.ROUND.jsonl, train --metrics: its median step
time after --skip, and the largest total of the "measured" memory events). Per layout: the
medians over the rounds of the predicted and measured step times, the median of the rounds'
errors and its verdict (within 15% with no more ranks than cores, 25% oversubscribed), memory
equal to the byte in every round; then the ranking check on the medians: the layout plan
predicts fastest must be the measured fastest or within 5% of it.

Usage: bench_calibration.py --skip 2 --cores C --rounds R --work DIR NAME:RANKS ...
"""

import argparse
import json
import statistics
import sys

from bench_metrics import median, print_head, timed_steps


def measured_memory(path):
    """The largest total over the run's measured memory events (the heaviest rank)."""
    with open(path) as f:
        events = [m for m in map(json.loads, filter(str.strip, f))
                  if m.get("event") == "memory" and m.get("kind") == "measured"]
    if not events:
        sys.exit(f"{path}: no measured memory events")
    return max(m["bytes"]["total"] for m in events)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("--cores", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--work", required=True)
    parser.add_argument("runs", nargs="+", help="NAME:RANKS")
    a = parser.parse_args()

    rows = []
    for spec in a.runs:
        name, ranks = spec.split(":")
        plans = []
        for r in range(1, a.rounds + 1):
            with open(f"{a.work}/{name}.{r}.plan.jsonl") as f:
                plans.append(json.loads(f.readline()))
        runs = [f"{a.work}/{name}.{r}.jsonl" for r in range(1, a.rounds + 1)]
        per_round = [median(timed_steps(run, a.skip), "step_time_s") for run in runs]
        predicted = [p["step_time_s"] for p in plans]
        round_errs = [p / m - 1 for p, m in zip(predicted, per_round)]
        used = timed_steps(runs[0], a.skip)
        memories = {p["memory_bytes"]["total"] for p in plans}
        if len(memories) != 1:
            sys.exit(f"{name}: the rounds' calibrations predict different memory: {memories}")
        rows.append(dict(name=name, ranks=int(ranks), pred_s=statistics.median(predicted),
                         meas_s=statistics.median(per_round), rounds=per_round,
                         err=statistics.median(round_errs), round_errs=round_errs,
                         pred_mem=memories.pop(),
                         meas_mem=max(measured_memory(run) for run in runs),
                         bytes=[int(median(used, k)) for k in ("tp_bytes", "pp_bytes", "dp_bytes")]))

    head = (f"{'layout':<12} {'ranks':>5} {'pred s':>8} {'meas s':>8} {'error':>7} {'limit':>5} "
            f"{'time':>4} {'pred bytes':>11} {'meas bytes':>11} {'mem':>5} "
            f"{'tp MB':>7} {'pp MB':>7} {'dp MB':>7}  rounds: measured s (error)")
    print(f"\nstep time: median over {a.rounds} round(s) of the median over steps > {a.skip}, "
          "each round priced by its own calibration, the error the median of the rounds'; "
          f"{a.cores} cores; memory: the heaviest rank; "
          "bytes per step handed to MPI by rank 0 (metrics' tp_bytes, pp_bytes, dp_bytes)")
    print_head(head)
    failures = 0
    for r in rows:
        err = r["err"]
        limit = 0.15 if r["ranks"] <= a.cores else 0.25
        time_ok = abs(err) <= limit
        mem_ok = r["pred_mem"] == r["meas_mem"]
        failures += (not time_ok) + (not mem_ok)
        print(f"{r['name']:<12} {r['ranks']:>5} {r['pred_s']:>8.4f} {r['meas_s']:>8.4f} "
              f"{100 * err:>+6.1f}% {100 * limit:>4.0f}% {'ok' if time_ok else 'FAIL':>4} "
              f"{r['pred_mem']:>11} {r['meas_mem']:>11} {'equal' if mem_ok else 'DIFF':>5} "
              + " ".join(f"{b / 1e6:>7.3f}" for b in r["bytes"])
              + "  " + " ".join(f"{t:.4f}({100 * e:+.0f}%)"
                                for t, e in zip(r["rounds"], r["round_errs"])))

    best_pred = min(rows, key=lambda r: r["pred_s"])
    best_meas = min(rows, key=lambda r: r["meas_s"])
    gap = best_pred["meas_s"] / best_meas["meas_s"] - 1
    rank_ok = gap <= 0.05
    print(f"\nplan ranks first: {best_pred['name']} (measured {best_pred['meas_s']:.4f} s); "
          f"measured best: {best_meas['name']} ({best_meas['meas_s']:.4f} s); gap "
          f"{100 * gap:.1f}% (target <= 5%: {'ok' if rank_ok else 'FAIL'})")
    by_pred = [r["name"] for r in sorted(rows, key=lambda r: r["pred_s"])]
    by_meas = [r["name"] for r in sorted(rows, key=lambda r: r["meas_s"])]
    print(f"predicted order: {' '.join(by_pred)}\nmeasured order:  {' '.join(by_meas)}")
    failures += not rank_ok
    print(f"{failures} check(s) failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
