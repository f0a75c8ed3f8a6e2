"""The table of bench_two_nodes.sh: per layout and link rate, medians over the rounds of each
run's medians over its step lines after --skip (tokens/s, step time, the shares of the step in
tp communication, pipeline waits and dp communication), and the bytes per step that cross the
link, one direction (A -> B; the layouts are symmetric), by the run's metrics and by the veth
counters.

Bytes crossing, from global rank 0's metrics (per-rank payloads; parallel/mpi_communicator.cpp
counts what each call is handed, both halves of a send/receive pair), with m microbatches of
b x s tokens, h the width, 4-byte floats:
  pp_across  (tp 2 x pp 2, tp inside a node): each of the tp ranks of stage 0 sends m
             activations of b s h floats to its peer on B (and receives m gradients back), so
             A -> B = tp * pp_bytes / 2, plus the tied embedding's gradient all-reduce between
             the first and last stage, not in the metrics: tp * (Vp / tp) * h floats.
  tp_across  (tp 2 x pp 2, every tp pair across): a 2-rank all-reduce of n bytes sends n each
             way, and A holds one rank of each stage: A -> B = tp_bytes(stage 0) +
             tp_bytes(stage 1) = 2 tp_bytes + 3 m b s floats (the last stage's three loss
             reductions, which rank 0 does not make).
  tp4_across (tp 4 over both nodes, ranks 0,1 on A): depends on the all-reduce algorithm Open
             MPI picks. Recursive halving then doubling (Rabenseifner: exchange half the buffer
             with rank^1 inside the node, then a quarter with rank^2 across, and back) sends n/2
             across per rank: A -> B = tp_bytes, which the counters show here. A ring would send
             1.5 tp_bytes, recursive doubling 2 tp_bytes.
  dp_across  (tp 2 x dp 2): each of A's ranks all-reduces its gradient buffer with its peer on
             B: A -> B = 2 dp_bytes.
Small world all-reduces (loss, gradient norm) are left out. The veth counters count whole frames:
Ethernet, IP and TCP headers (66 bytes a 1448-byte segment, 4.6%), the ACKs of the other
direction, Open MPI's fragment headers and rendezvous messages, and resends of what a full tbf
queue dropped; the ratio column is counters / metrics.

With --plan BIN --clusters DIR, each row at a rate with a cluster file DIR/netns-RATE.ini gets
the planner's predicted step time beside the measured one (tp_across's A,B,A,B placement is
plan's --map-by node, as mpirun's).

Usage: bench_two_nodes.py [--skip 2] --n-layer L --n-head H --d-model D --seq-len S
                          --global-batch-size G --micro-batch-size B
                          [--plan BIN --clusters DIR] RUNS.jsonl
"""

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys

from bench_metrics import median, median_share, print_head, timed_steps

VOCAB = 256  # the built-in corpus
LAYOUTS = {  # name: (tp, dp, pp)
    "pp_across": (2, 1, 2),
    "tp_across": (2, 1, 2),
    "tp4_across": (4, 1, 1),
    "dp_across": (2, 2, 1),
}


def padded_vocab(tp):
    unit = 64 * tp
    return (VOCAB + unit - 1) // unit * unit


def crossing_from_metrics(name, step, a):
    """Bytes a step sends from A to B, by rank 0's metrics (see the module's text)."""
    tp, dp, _ = LAYOUTS[name]
    micro = a.global_batch_size // (dp * a.micro_batch_size)
    bs = a.micro_batch_size * a.seq_len
    if name == "pp_across":
        wte_local = padded_vocab(tp) // tp * a.d_model * 4
        return tp * step["pp_bytes"] // 2 + tp * wte_local
    if name == "tp_across":
        return 2 * step["tp_bytes"] + 3 * micro * bs * 4
    if name == "tp4_across":
        return step["tp_bytes"]
    if name == "dp_across":
        return 2 * step["dp_bytes"]
    raise ValueError(name)


PLAN_LAYOUTS = {  # layout: plan's layout options (tp_across: mpirun --map-by node)
    "pp_across": ["--tp", "2", "--pp", "2"],
    "tp_across": ["--tp", "2", "--pp", "2", "--map-by", "node", "--allow-tp-across-nodes"],
    "tp4_across": ["--tp", "4", "--pp", "1", "--allow-tp-across-nodes"],
    "dp_across": ["--tp", "2", "--pp", "1", "--dp", "2"],
}


def predicted_step(a, rate, name):
    """plan's step time for the layout on DIR/netns-RATE.ini, or None."""
    cluster = os.path.join(a.clusters or "", f"netns-{rate}.ini")
    if not a.plan or name not in PLAN_LAYOUTS or not os.path.exists(cluster):
        return None
    cmd = [a.plan, "--cluster", cluster, "--nodes", "2", "--n-layer", str(a.n_layer),
           "--n-head", str(a.n_head), "--d-model", str(a.d_model), "--seq-len", str(a.seq_len),
           "--vocab-size", str(VOCAB), "--global-batch-size", str(a.global_batch_size),
           "--micro-batch-size", str(a.micro_batch_size), "--precision", "fp32",
           "--recompute", "none", "--schedule", "1f1b", "--virtual-stages", "1",
           "--sequence-parallel=false", "--distributed-optimizer=false", "--json",
           *PLAN_LAYOUTS[name]]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.splitlines()[0])["step_time_s"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip", type=int, default=2)
    for name in ("--n-layer", "--n-head", "--d-model", "--seq-len", "--global-batch-size",
                 "--micro-batch-size"):
        parser.add_argument(name, type=int, required=True)
    parser.add_argument("--plan", help="the planner program: adds its predicted step times")
    parser.add_argument("--clusters", help="folder of netns-RATE.ini cluster files")
    parser.add_argument("runs")
    a = parser.parse_args()

    with open(a.runs) as f:
        runs = [json.loads(line) for line in f if line.strip()]
    baseline = {r["layout"]: r for r in runs if r["steps"] == 0}
    groups = collections.OrderedDict()
    for r in runs:
        if r["steps"] > 0:
            groups.setdefault((r["rate"], r["layout"]), []).append(r)

    rows = []
    for (rate, name), rs in groups.items():
        per_run = []
        for r in rs:
            used = timed_steps(r["metrics"], a.skip)
            base = baseline.get(name, {"a_to_b": 0, "b_to_a": 0})
            per_run.append(dict(
                tok=median(used, "tokens_per_s"), step=median(used, "step_time_s"),
                tp=median_share(used, "tp_comm_s"), pp=median_share(used, "pp_wait_s"),
                dp=median_share(used, "dp_comm_s"),
                metric_bytes=crossing_from_metrics(name, used[-1], a),
                a_to_b=(r["a_to_b"] - base["a_to_b"]) / r["steps"],
                b_to_a=(r["b_to_a"] - base["b_to_a"]) / r["steps"],
                drops=r["drops"], loss=used[-1]["loss"], load=r["load"].split()[0]))
        med = lambda key: statistics.median(p[key] for p in per_run)  # noqa: E731
        rows.append(dict(rate=rate, name=name, rounds=len(per_run), tok=med("tok"),
                         step=med("step"), tp=med("tp"), pp=med("pp"), dp=med("dp"),
                         metric_bytes=med("metric_bytes"), a_to_b=med("a_to_b"),
                         b_to_a=med("b_to_a"), drops=max(p["drops"] for p in per_run),
                         loss=per_run[-1]["loss"], loads=",".join(p["load"] for p in per_run),
                         tok_runs=[p["tok"] for p in per_run],
                         step_runs=[p["step"] for p in per_run]))

    ref = {r["rate"]: r["tok"] for r in rows if r["name"] == "pp_across"}
    print(f"\nmodel: {a.n_layer} layers, d {a.d_model}, {a.n_head} heads, seq {a.seq_len}; global "
          f"batch {a.global_batch_size}, micro-batch {a.micro_batch_size}; 4 ranks, 2 a node; "
          f"medians over rounds of medians over steps > {a.skip}; link bytes per step A -> B")
    head = (f"{'rate':<8} {'layout':<11} {'tok/s':>7} {'vs pp':>6} {'step s':>7} {'tp':>6} "
            f"{'pp wait':>7} {'dp':>6} {'metrics MB':>10} {'veth MB':>8} {'ratio':>6} "
            f"{'B->A MB':>8} {'drops':>6} {'tok/s per round':>18} {'load 1m':>10}")
    print_head(head)
    for r in rows:
        vs = r["tok"] / ref[r["rate"]] if r["rate"] in ref else float("nan")
        ratio = r["a_to_b"] / r["metric_bytes"] if r["metric_bytes"] else float("nan")
        per_round = "/".join(f"{t:.0f}" for t in r["tok_runs"])
        print(f"{r['rate']:<8} {r['name']:<11} {r['tok']:>7.0f} {vs:>6.2f} {r['step']:>7.3f} "
              f"{100 * r['tp']:>5.1f}% {100 * r['pp']:>6.1f}% {100 * r['dp']:>5.1f}% "
              f"{r['metric_bytes'] / 1e6:>10.3f} {r['a_to_b'] / 1e6:>8.3f} {ratio:>6.3f} "
              f"{r['b_to_a'] / 1e6:>8.3f} {r['drops']:>6} {per_round:>18} {r['loads']:>10}")
    if a.plan:
        print(f"\nplanner ({a.plan}, cluster files {a.clusters}/netns-RATE.ini): predicted step "
              f"time against the measured median; target within 15%")
        for r in rows:
            pred = predicted_step(a, r["rate"], r["name"])
            if pred is None:
                print(f"{r['rate']:<8} {r['name']:<11} not predicted")
                continue
            err = pred / r["step"] - 1
            best = min(r["step_runs"])
            print(f"{r['rate']:<8} {r['name']:<11} predicted {pred:.4f} s, measured {r['step']:.4f}"
                  f" s (fastest round {best:.4f} s): {100 * err:+.1f}% "
                  f"({'within 15%' if abs(err) <= 0.15 else 'OUTSIDE 15%'})")
    losses = [r["loss"] for r in rows]
    spread = (max(losses) - min(losses)) / max(losses)
    print(f"\nlast-step loss of every run: {min(losses):.6f} to {max(losses):.6f} "
          f"(relative spread {spread:.1e}: the layouts compute the same step)")
    print("baseline (--steps 0) link bytes A->B per layout: "
          + ", ".join(f"{n} {b['a_to_b']}" for n, b in baseline.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
