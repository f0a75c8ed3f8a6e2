"""The table of bench_pipeline.sh: reads the metrics files of runs of one model at one --pp with
different schedules, microbatch counts and MPI wait policies, and prints per run the median
tokens/s and step time of the step lines after the first --skip, the measured bubble of stage 0
(median of pp_wait_s / step_time_s: only global rank 0 writes metrics, and rank 0 is stage 0),
the theoretical bubble beside it, the peak forward caches, the load average before and after the
run, and the throughput relative to 1f1b at the same m and wait policy.

Theoretical bubble (the published formulas, tested against the replay in
tests/parallel/test_pipeline_schedule.cpp,
a full backward handing over its gradient at its end): (p-1)/(m+p-1) for gpipe and 1f1b,
(p-1)/(v*m+p-1) for interleaved, (p-1)/(3m+p-1) for zb-h1. It is the idle share of the pipeline
part of the step with a full B of 2F (zb-h1: F = B-input = W); the measured share also has the
rest of the step (dp, embedding all-reduce, gradient norm, optimizer) in its denominator, and
pp_wait_s also counts the transfer time (the embedding group's wte all-reduce is in dp_comm_s).

With a trace (METRICS.trace.json beside the metrics file, from train --trace: steps 2..4 of every
rank on aligned clocks), also per run: each stage's receive wait as a share of the traced pipeline
window (first to last action of the step over all stages), the idle share of that window over all
stages ((pp * window - busy) / (pp * window), what simulate() calls the bubble), and the bubble
of a replay of the traced action order with the traced per-action costs (median per stage and
kind; no transfer latency, no send waits), as simulate() in parallel/pipeline_schedule.cpp does
it: each stage runs its list in order, each action as soon as the stage is free and its inputs
have arrived; sim with a full backward's input gradient arriving at its end, sim* after its input
half (as simulate() and the executor).

Usage: bench_pipeline.py [--skip 2] --pp P [--virtual-stages V] NAME=METRICS.jsonl ...
  NAME is SCHEDULE_mM_POLICY (e.g. zb-h1_m2_none); a file METRICS.load beside the metrics file,
  if present, holds "LOAD_BEFORE LOAD_AFTER" (1-minute load averages).
"""

import argparse
import json
import os
import statistics
import sys

from bench_metrics import median, median_share, print_head, timed_steps


def theoretical_bubble(name, p, m, v):
    if name in ("gpipe", "1f1b"):
        return (p - 1) / (m + p - 1)
    if name == "interleaved":
        return (p - 1) / (v * m + p - 1)
    if name == "zb-h1":
        return (p - 1) / (3 * m + p - 1)
    raise ValueError(name)


KIND = {"forward": "F", "backward": "B", "weight": "W"}


def load_trace(path, pp):
    """Per traced step: {stage: [(kind, mb, chunk, start, end), ...] in time order} plus waits."""
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = {}
    for e in events:
        a = e["args"]
        st = steps.setdefault(a["step"], {"actions": {}, "wait": {}})
        start, end = e["ts"] * 1e-6, (e["ts"] + e["dur"]) * 1e-6
        stage = e["tid"] % pp  # pp is the fastest-varying rank coordinate only at tp = dp = 1
        if e["cat"] == "wait":
            st["wait"][stage] = st["wait"].get(stage, 0.0) + end - start
            continue
        kind = KIND[e["cat"]]
        if kind == "B" and a.get("part") == "input":
            kind = "Bi"
        st["actions"].setdefault(stage, []).append((kind, a["microbatch"], a["chunk"], start,
                                                    end))
    for st in steps.values():
        for acts in st["actions"].values():
            acts.sort(key=lambda x: x[3])
    return steps


def replay(lists, cost, pp, early=None):
    """Bubble of the ordered per-stage lists with cost[(stage, kind)] seconds per action.

    early=None: a full backward B hands the previous stage its input gradient at its end (the
    published formulas' model). early=f: at f of its duration, as the executor does it (it sends
    the input gradient after backward_input, then runs backward_weight inside the same B) and
    simulate() models it."""
    done = {}  # (kind family, mb, virtual stage) -> end time
    free = [0.0] * pp
    pos = [0] * pp
    busy = 0.0
    total = sum(len(v) for v in lists.values())
    placed = 0
    last_vs = None
    while placed < total:
        progress = False
        for s in range(pp):
            acts = lists.get(s, [])
            while pos[s] < len(acts):
                kind, mb, chunk = acts[pos[s]][:3]
                vs = chunk * pp + s
                if last_vs is None:
                    last_vs = max(c for v in lists.values() for _, _, c, _, _ in v) * pp + pp - 1
                if kind == "F":
                    deps = [("F", mb, vs - 1)] if vs > 0 else []
                elif kind in ("B", "Bi"):
                    deps = [("F", mb, vs)] + ([("B", mb, vs + 1)] if vs < last_vs else [])
                else:
                    deps = [("B", mb, vs)]
                if any(d not in done for d in deps):
                    break
                start = max([free[s]] + [done[d] for d in deps])
                end = start + cost[(s, kind)]
                free[s] = end
                busy += end - start
                done[("B" if kind == "Bi" else kind, mb, vs)] = end
                if kind == "B" and early is not None:
                    done[("B", mb, vs)] = start + early * (end - start)
                pos[s] += 1
                placed += 1
                progress = True
        if not progress:
            raise RuntimeError("replay stalled")
    makespan = max(free)
    return (pp * makespan - busy) / (pp * makespan)


def trace_stats(path, pp):
    steps = load_trace(path, pp)
    costs = {}
    waits = {s: [] for s in range(pp)}
    idle = []
    for st in steps.values():
        acts = st["actions"]
        t0 = min(a[3] for v in acts.values() for a in v)
        t1 = max(a[4] for v in acts.values() for a in v)
        window = t1 - t0
        busy = sum(a[4] - a[3] for v in acts.values() for a in v)
        idle.append((pp * window - busy) / (pp * window))
        for s in range(pp):
            waits[s].append(st["wait"].get(s, 0.0) / window)
        for s, v in acts.items():
            for a in v:
                costs.setdefault((s, a[0]), []).append(a[4] - a[3])
    cost = {k: statistics.median(v) for k, v in costs.items()}
    mid = sorted(steps)[len(steps) // 2]
    sim = replay(steps[mid]["actions"], cost, pp)
    return dict(wait=[statistics.median(waits[s]) for s in range(pp)],
                idle=statistics.median(idle), sim=sim, cost=cost,
                actions=steps[mid]["actions"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("--pp", type=int, required=True)
    parser.add_argument("--virtual-stages", type=int, default=2)
    parser.add_argument("runs", nargs="+", help="NAME=METRICS.jsonl")
    a = parser.parse_args()

    rows = []
    for spec in a.runs:
        name, path = spec.split("=", 1)
        schedule, m, policy = name.rsplit("_", 2)
        m = int(m.lstrip("m"))
        used = timed_steps(path, a.skip)
        med = lambda key: median(used, key)  # noqa: E731
        wait = median_share(used, "pp_wait_s")
        load, cpu = "-", "-"
        load_path = os.path.splitext(path)[0] + ".load"
        if os.path.exists(load_path):
            with open(load_path) as f:
                fields = f.read().split()
            load = "/".join(fields[:2])
            if len(fields) > 2:
                cpu = fields[2] + "%"
        v = a.virtual_stages if schedule == "interleaved" else 1
        trace_path = os.path.splitext(path)[0] + ".trace.json"
        tr = trace_stats(trace_path, a.pp) if os.path.exists(trace_path) else None
        rows.append(dict(name=name, schedule=schedule, m=m, policy=policy, steps=len(used),
                         tok=med("tokens_per_s"), step=med("step_time_s"),
                         best=max(x["tokens_per_s"] for x in used),
                         wait_s=med("pp_wait_s"), wait=wait,
                         theory=theoretical_bubble(schedule, a.pp, m, v),
                         caches=int(med("peak_caches")), load=load, cpu=cpu, loss=used[-1]["loss"], tr=tr))

    # The input half's share of a full backward, from the split backwards of the zb-h1 traces.
    split = [r["tr"]["cost"][(s, "Bi")] / (r["tr"]["cost"][(s, "Bi")] + r["tr"]["cost"][(s, "W")])
             for r in rows if r["tr"] and r["schedule"] == "zb-h1" for s in range(a.pp)]
    early = statistics.median(split) if split else 0.5
    for r in rows:
        if r["tr"]:
            r["tr"]["sim_early"] = replay(r["tr"]["actions"], r["tr"]["cost"], a.pp, early)
    base = {(r["m"], r["policy"]): r["tok"] for r in rows if r["schedule"] == "1f1b"}
    best = {(r["m"], r["policy"]): r["best"] for r in rows if r["schedule"] == "1f1b"}
    print(f"\npp {a.pp}, interleaved with v {a.virtual_stages}; medians over steps > {a.skip}; "
          "bubble = stage 0's pp_wait_s / step_time_s (rank 0 writes the metrics)")
    head = (f"{'schedule':<11} {'m':>2} {'policy':<6} {'steps':>5} {'step s':>7} {'tok/s':>7} "
            f"{'vs 1f1b':>7} {'best':>7} {'vs 1f1b':>7} {'wait s':>7} {'bubble':>7} {'theory':>7} {'meas-th':>7} "
            f"{'caches':>6} {'load 1m':>10} {'cpu':>4}")
    if any(r["tr"] for r in rows):
        head += " " + " ".join(f"{'tr w' + str(s):>6}" for s in range(a.pp))
        head += f" {'tr idle':>7} {'sim':>6} {'sim*':>6}"
    print_head(head)
    for r in rows:
        ref = base.get((r["m"], r["policy"]))
        rel = f"{r['tok'] / ref:.3f}" if ref else "-"
        bref = best.get((r["m"], r["policy"]))
        brel = f"{r['best'] / bref:.3f}" if bref else "-"
        print(f"{r['schedule']:<11} {r['m']:>2} {r['policy']:<6} {r['steps']:>5} "
              f"{r['step']:>7.3f} {r['tok']:>7.0f} {rel:>7} {r['best']:>7.0f} {brel:>7} "
              f"{r['wait_s']:>7.3f} "
              f"{100 * r['wait']:>6.1f}% {100 * r['theory']:>6.1f}% "
              f"{100 * (r['wait'] - r['theory']):>+6.1f}% {r['caches']:>6} {r['load']:>10} {r['cpu']:>4}",
              end="")
        if r["tr"]:
            print(" " + " ".join(f"{100 * w:>5.1f}%" for w in r["tr"]["wait"]), end="")
            print(f" {100 * r['tr']['idle']:>6.1f}% {100 * r['tr']['sim']:>5.1f}% "
                  f"{100 * r['tr']['sim_early']:>5.1f}%", end="")
        print()
    print("\ntok/s: median; best: the fastest step (robust to slow episodes of the machine); "
          "vs 1f1b: against 1f1b at the same m and policy")
    print("bubble: stage 0 (metrics); theory: the formula; meas-th: bubble - theory; tr wS: "
          "stage S's receive wait / traced pipeline window; tr idle: all stages' idle share of "
          "the window; sim: replay of the traced order with the traced per-action costs, a full B "
          "handing over its input gradient at its end; sim*: the same, after its input half (as "
          "the executor does and simulate() models it), the half's share of B taken from the "
          "zb-h1 traces; load 1m: "
          "1-minute load average before/after the run (the benchmark's own 2 ranks raise it "
          "towards 2 over back-to-back runs; well above 2 means other work shared the cores); cpu: the CPU time of the run's processes "
          "/ (2 cores x wall time) -- its ranks poll while waiting, so well below ~95% means "
          "something else had a core")
    traced = [r for r in rows if r["tr"]]
    if traced:
        print(f"sim*: input half = {100 * early:.0f}% of a full backward "
              f"({'from the zb-h1 traces' if split else 'assumed'})")
        print("traced per-action costs (ms, median; stage:kind):")
        for r in traced:
            print(f"  {r['name']:<22} " + " ".join(
                f"{s}:{k}={1e3 * c:.1f}" for (s, k), c in sorted(r["tr"]["cost"].items())))
    print()
    for r in rows:
        ref = base.get((r["m"], r["policy"]))
        if r["schedule"] in ("zb-h1", "interleaved") and ref:
            ratio = r["tok"] / ref
            verdict = "beats" if ratio > 1 else "does not beat"
            bratio = r["best"] / best[(r["m"], r["policy"])]
            print(f"{r['schedule']} m {r['m']} ({r['policy']}): {ratio:.3f} x 1f1b tokens/s, "
                  f"median ({verdict} 1f1b by {100 * (ratio - 1):+.1f}%); best steps "
                  f"{bratio:.3f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
