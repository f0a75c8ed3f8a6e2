#!/usr/bin/python3
"""Draws a `train --metrics FILE` as one picture: the training loss per step with the validation
loss, the learning rate, tokens per second, and the step's time split (compute, tp
communication, dp communication, pipeline wait) stacked per step. PNG or SVG by the output's
extension. Needs matplotlib (Debian's python3-matplotlib, for /usr/bin/python3).

    /usr/bin/python3 scripts/plot_metrics.py metrics.jsonl -o run.png [--title TEXT]

Several files (a run and its resumptions, or runs to compare) are drawn together, one colour
each, labelled by file name. Steps a file has no line for (a run that died before its
checkpoint and was not resumed, a stretch logged elsewhere) are left as gaps, not bridged by a
line: a line joins two points only when no more steps lie between them than the file's usual
spacing (its --log-every).
"""
import argparse
import json
import os
import sys

SPLIT = [("compute_s", "compute"), ("tp_comm_s", "tp comm"), ("dp_comm_s", "dp comm"),
         ("pp_wait_s", "pipeline wait")]


def read_lines(path):
    """The step lines and validation lines of a metrics file, by step (a later line wins, as
    a resumed run rewrites the steps after its checkpoint)."""
    steps, vals = {}, {}
    with open(path) as f:
        for number, text in enumerate(f, 1):
            text = text.strip()
            if not text:
                continue
            try:
                line = json.loads(text)
            except ValueError:
                sys.exit(f"plot_metrics: {path} line {number} is not JSON")
            if not isinstance(line, dict) or "step" not in line:
                continue
            if "loss" in line:
                steps[line["step"]] = line
            elif "val_loss" in line:
                vals[line["step"]] = line["val_loss"]
    return [steps[s] for s in sorted(steps)], sorted(vals.items())


def missing_stretches(steps):
    """The (before, after) step pairs between which a file has no line although it logs more
    often: farther apart than its usual spacing (the median distance between its lines)."""
    if len(steps) < 2:
        return []
    spacing = sorted(b - a for a, b in zip(steps, steps[1:]))[(len(steps) - 1) // 2]
    return [(a, b) for a, b in zip(steps, steps[1:]) if b - a > spacing]


def with_gaps(steps, values, stretches):
    """The points of a line, with a break (NaN) wherever one of the missing stretches lies
    between two of them, so a gap is drawn as a gap and not as a line across it."""
    xs, ys = [], []
    for i, (step, value) in enumerate(zip(steps, values)):
        if i > 0 and any(steps[i - 1] <= a and b <= step for a, b in stretches):
            xs.append(float("nan"))
            ys.append(float("nan"))
        xs.append(step)
        ys.append(value)
    return xs, ys


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("metrics", nargs="+", help="metrics files from train --metrics")
    ap.add_argument("-o", "--output", required=True, help="picture file (.png or .svg)")
    ap.add_argument("--title", help="the picture's title (default: the files' names)")
    args = ap.parse_args(argv)
    if os.path.splitext(args.output)[1].lower() not in (".png", ".svg"):
        sys.exit("plot_metrics: --output must end in .png or .svg")
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot_metrics: needs matplotlib (apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text in an SVG
    import matplotlib.pyplot as plt

    runs = [(os.path.basename(p), *read_lines(p)) for p in args.metrics]
    if not any(steps for _, steps, _ in runs):
        sys.exit("plot_metrics: no step lines in " + ", ".join(args.metrics))
    fig, (ax_loss, ax_lr, ax_speed, ax_split) = plt.subplots(4, 1, figsize=(10, 13), sharex=True)
    fig.suptitle(args.title or ", ".join(name for name, _, _ in runs))
    for index, (name, steps, vals) in enumerate(runs):
        colour = f"C{index}"
        x = [m["step"] for m in steps]
        gaps = missing_stretches(x)
        ax_loss.plot(*with_gaps(x, [m["loss"] for m in steps], gaps), color=colour, linewidth=1,
                     label=f"{name}: train loss")
        if vals:  # points, joined only where no step line is missing between them
            ax_loss.plot(*with_gaps([s for s, _ in vals], [v for _, v in vals], gaps), "o--",
                         color=colour, label=f"{name}: validation loss")
        ax_lr.plot(*with_gaps(x, [m.get("lr", float("nan")) for m in steps], gaps),
                   color=colour, label=name)
        ax_speed.plot(*with_gaps(x, [m["tokens_per_s"] for m in steps], gaps), color=colour,
                      label=name)
    ax_loss.set_ylabel("loss (nats per token)")
    ax_loss.set_title("loss")
    ax_loss.legend()
    ax_lr.set_ylabel("learning rate")
    ax_lr.set_title("learning rate")
    ax_speed.set_ylabel("tokens/s")
    ax_speed.set_title("tokens/s")
    if len(runs) > 1:
        ax_lr.legend()
        ax_speed.legend()
    # The time split of the first file: stacked, in milliseconds, with the same gaps.
    name, steps, _ = runs[0]
    x = [m["step"] for m in steps]
    gaps = missing_stretches(x)
    split = [with_gaps(x, [1e3 * m.get(key, 0.0) for m in steps], gaps) for key, _ in SPLIT]
    ax_split.stackplot(split[0][0], *[values for _, values in split],
                       labels=[label for _, label in SPLIT])
    ax_split.set_ylabel("ms per step")
    ax_split.set_title(f"step time split ({name})")
    ax_split.set_xlabel("step")
    ax_split.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(args.output)
    print(f"wrote {args.output} ({sum(len(s) for _, s, _ in runs)} steps)")


if __name__ == "__main__":
    main()
