"""docs/TP-VS-PP.md's Table B: for five model shapes (three GPT-2 shapes, Llama 3 8B and 70B) on
three clusters, each layout of LAYOUTS
priced by `plan --json` with its grid and schedule fixed (micro-batch, recomputation, sequence
parallelism and the distributed optimizer left to plan, this project's bf16 regime), printed as
Markdown rows: fits, memory, step time, tokens/s per GPU, MFU, the exposed-tp and bubble shares
of the step at the even split of the layers, and for pipeline layouts the same layout priced at
its balanced split (--pipeline-layers auto: the split, step time and bubble share); then per
model and cluster the winner (over both splits) and the term of the step split where it beats
the runner-up by most.

Usage: tp_vs_pp_table.py --bin BUILD/bin [--global-batch-size 512] [--seq-len 2048]
"""

import argparse
import json
import subprocess
import sys

MODELS = {  # name: plan's model options (GPT-2 shapes with --vocab-size, or a Llama preset)
    "1.3B": ["--n-layer", "24", "--d-model", "2048", "--n-head", "16"],
    "13B": ["--n-layer", "40", "--d-model", "5120", "--n-head", "40"],
    "70B-class": ["--n-layer", "80", "--d-model", "8192", "--n-head", "64"],
    "Llama 3 8B": ["--model", "llama3-8b"],
    "Llama 3 70B": ["--model", "llama3-70b"],
}
CLUSTERS = {  # name: (preset, nodes)
    "8 H100 NVLink": ("dgx-h100", 1),
    "8 L40S PCIe": ("l40s-pcie", 1),
    "4x8 H100 IB": ("dgx-h100", 4),
}
# name: (tp, pp, extra options); tp None: every GPU of a node (TP inside nodes).
LAYOUTS = [
    ("TP8", 8, 1, []),
    ("PP8 1f1b", 1, 8, ["--schedule", "1f1b"]),
    ("PP8 gpipe", 1, 8, ["--schedule", "gpipe"]),
    ("PP8 interleaved", 1, 8, ["--schedule", "interleaved"]),
    ("PP8 zb-h1", 1, 8, ["--schedule", "zb-h1"]),
    ("TP4 x PP2", 4, 2, []),
    ("TP2 x PP4", 2, 4, []),
    ("DP + dist. opt.", 1, 1, ["--distributed-optimizer"]),
    ("TP8 in node x PP4 across", 8, 4, []),
    ("TP16 across nodes x PP2", 16, 2, ["--allow-tp-across-nodes"]),
]
TERMS = {"compute_s": "compute", "tp_comm_exposed_s": "exposed tp",
         "pp_comm_exposed_s": "exposed pp", "dp_comm_exposed_s": "exposed dp",
         "bubble_s": "bubble"}


def price(a, model, cluster, tp, pp, extra, split="even"):
    options = MODELS[model]
    if "--model" not in options:  # a Llama preset brings its own vocabulary
        options = options + ["--vocab-size", str(a.vocab_size)]
    preset, nodes = CLUSTERS[cluster]
    if tp * pp > 8 * nodes:
        return None, "needs more GPUs"
    cmd = [f"{a.bin}/plan", "--cluster", preset, "--nodes", str(nodes), *options,
           "--seq-len", str(a.seq_len), "--global-batch-size", str(a.global_batch_size),
           "--tp", str(tp), "--pp", str(pp), "--precision", "bf16", "--pipeline-layers", split,
           "--json", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip().removeprefix("error: ")
    return json.loads(proc.stdout.splitlines()[0]), ""


def describe(row):
    rec = row["recompute"] + (f" {row['recompute_layers']}" if row["recompute_layers"] else "")
    sp = " sp" if row["sequence_parallel"] else ""
    zero = " zero" if row["distributed_optimizer"] else ""
    v = f" v{row['virtual_stages']}" if row["schedule"] == "interleaved" else ""
    return f"dp {row['dp']} mb {row['micro_batch_size']}{v}{sp} {rec}{zero}"


def seconds(x):
    # Below a nanosecond is the replay's float rounding (an idle time of 1e-15 s), not time.
    return f"{x if abs(x) > 1e-9 else 0:.3g} s"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--global-batch-size", type=int, default=512)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--vocab-size", type=int, default=50257)
    parser.add_argument("--models", nargs="*", default=list(MODELS), help="a subset of MODELS")
    a = parser.parse_args()
    print("| model | cluster | layout | plan's choice | fits | GB | step s | tok/s/GPU | MFU | "
          "exposed tp | bubble | auto split | auto step s | auto bubble |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    winners = []
    for model in a.models:
        for cluster in CLUSTERS:
            priced = []
            for name, tp, pp, extra in LAYOUTS:
                row, why = price(a, model, cluster, tp, pp, extra)
                if row is None:
                    print(f"| {model} | {cluster} | {name} | - | n/a: {why} | | | | | | | | | |")
                    continue
                step = row["step_time_s"]
                priced.append((name, row))
                balanced = "| - | - | - |"
                if pp > 1:
                    auto, _ = price(a, model, cluster, tp, pp, extra, "auto")
                    if auto is not None:
                        if auto["pipeline_layers"] != "even":
                            priced.append((name + " auto", auto))
                        balanced = (f"| {auto['pipeline_layers']} | {auto['step_time_s']:.3g} | "
                                    f"{100 * auto['bubble_s'] / auto['step_time_s']:.0f}% |")
                print(f"| {model} | {cluster} | {name} | {describe(row)} | "
                      f"{'yes' if row['fits'] else 'no'} | "
                      f"{row['memory_bytes']['total'] / 1e9:.1f} | {step:.3g} | "
                      f"{row['tokens_per_s_per_gpu']:.0f} | {row['mfu']:.3f} | "
                      f"{100 * row['tp_comm_exposed_s'] / step:.0f}% | "
                      f"{100 * row['bubble_s'] / step:.0f}% {balanced}")
            fitting = sorted((p for p in priced if p[1]["fits"]),
                             key=lambda p: p[1]["step_time_s"])
            if not fitting:
                winners.append((model, cluster, "none fits", ""))
                continue
            best = fitting[0]
            if len(fitting) == 1:
                winners.append((model, cluster, best[0], "the only layout that fits"))
                continue
            second = fitting[1]
            gains = {t: second[1][k] - best[1][k] for k, t in TERMS.items()}
            term = max(gains, key=gains.get)
            gap = second[1]["step_time_s"] / best[1]["step_time_s"] - 1
            key = [k for k, t in TERMS.items() if t == term][0]
            winners.append((model, cluster, best[0],
                            f"{100 * gap:.0f}% faster than {second[0]}; {term} "
                            f"{seconds(best[1][key])} against {seconds(second[1][key])}"))
    print("\n| model | cluster | winner | decided by |")
    print("|---|---|---|---|")
    for model, cluster, best, why in winners:
        print(f"| {model} | {cluster} | {best} | {why} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
