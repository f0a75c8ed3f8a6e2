"""The table of bench_pipeline_split.sh: --pipeline-layers even against auto at pp 2.

Arguments: "NAME ROUND PREFIX" per run (PREFIX.jsonl metrics, PREFIX.log, PREFIX.trace.json).
Prints per split: the layers per stage, tokens/s (median of each run's step lines after the
first 2, then the median over rounds), each stage's compute per step (the busy time of its
traced passes, steps 2..4); then the measured speed-up of auto (the median over rounds of each
round's auto / even: the two run side by side, so a round the machine ran slow or a run another
job disturbed moves one ratio, not all) against the one train predicted when it chose (the
planner's step times in its "pipeline layers:" line), and the difference.
"""

import re
import statistics
import sys

from bench_metrics import median, timed_steps
from bench_pipeline import load_trace

PP = 2
CHOSEN = re.compile(r"pipeline layers: ([0-9,]+) \(auto: step ([0-9.eE+-]+) s predicted against "
                    r"([0-9.eE+-]+) s at the even ([0-9,]+)")


def stage_compute(path):
    """Per stage, the median over traced steps of its passes' busy seconds."""
    steps = load_trace(path, PP)
    per_stage = {s: [] for s in range(PP)}
    for st in steps.values():
        for s in range(PP):
            per_stage[s].append(sum(a[4] - a[3] for a in st["actions"].get(s, [])))
    return [statistics.median(per_stage[s]) for s in range(PP)]


def main():
    runs = {}
    predicted = None
    for spec in sys.argv[1:]:
        name, _, prefix = spec.split()
        r = runs.setdefault(name, {"tok": [], "compute": []})
        r["tok"].append(median(timed_steps(prefix + ".jsonl", 2), "tokens_per_s"))
        r["compute"].append(stage_compute(prefix + ".trace.json"))
        with open(prefix + ".log") as f:
            found = CHOSEN.search(f.read())
        if name == "auto":
            if not found:
                sys.exit(f"{prefix}.log: no 'pipeline layers:' line of auto")
            predicted = found.groups()
    auto_split, auto_step, even_step, even_split = predicted
    splits = {"even": even_split, "auto": auto_split}
    print(f"{'split':6} {'layers':>8} {'tokens/s':>10} " +
          " ".join(f"{'stage %d compute' % s:>16}" for s in range(PP)))
    tok = {}
    for name in ("even", "auto"):
        r = runs[name]
        tok[name] = statistics.median(r["tok"])
        compute = [statistics.median(c[s] for c in r["compute"]) for s in range(PP)]
        print(f"{name:6} {splits[name]:>8} {tok[name]:10.1f} " +
              " ".join(f"{c:14.3f} s" for c in compute))
    ratios = [a / e for a, e in zip(runs["auto"]["tok"], runs["even"]["tok"])]
    measured = statistics.median(ratios)
    model = float(even_step) / float(auto_step)
    print(f"auto / even tokens/s: measured {measured:.3f}x (rounds: " +
          ", ".join(f"{r:.3f}" for r in ratios) +
          f"), predicted {model:.3f}x (step {float(even_step):.4g} s even, "
          f"{float(auto_step):.4g} s auto); difference {100 * (model - measured):+.1f} points")


if __name__ == "__main__":
    main()
