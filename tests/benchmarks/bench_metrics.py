"""Reading a run's --metrics file for the benchmark reports (bench_parallel.py,
bench_pipeline.py, ...): the step lines past the warm-up, and their medians; and the reports'
table heads."""

import json
import statistics
import sys


def timed_steps(path, skip):
    """The step lines (those with a loss) after step `skip`; exits naming the file if none."""
    with open(path) as f:
        steps = [m for m in map(json.loads, filter(str.strip, f)) if "loss" in m]
    used = [m for m in steps if m["step"] > skip]
    if not used:
        sys.exit(f"{path}: no step lines after step {skip}")
    return used


def median(steps, key):
    return statistics.median(m[key] for m in steps)


def median_share(steps, key):
    """Median over steps of key's share of the step time."""
    return statistics.median(m[key] / m["step_time_s"] for m in steps)


def print_head(head):
    """A report table's column names, underlined."""
    print(head)
    print("-" * len(head))
