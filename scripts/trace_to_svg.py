#!/usr/bin/env python3
"""Draws a Chrome trace written by `train --trace FILE` as an SVG timeline.

A title (the schedule, the steps, the ranks), one row per rank (its label on the left), one box
per action coloured by kind (F blue, B green, W orange, waits on receives and sends light grey),
the microbatch number inside boxes wide enough for it, a time axis in milliseconds and a legend
of the colours; idle time is empty space. Python 3 standard library only.

    python3 scripts/trace_to_svg.py trace.json -o timeline.svg [--step N]
"""
import argparse
import json
import sys
from xml.sax.saxutils import escape

COLOURS = {"forward": "#5b8fd9", "backward": "#5fb35f", "weight": "#f0a04b", "wait": "#dddddd"}
LEGEND = {"forward": "forward (F)", "backward": "backward (B, or input gradient with W)",
          "weight": "weight gradient (W)", "wait": "waiting for a message"}
ROW_H, ROW_GAP, LABEL_W, AXIS_H, MARGIN, TITLE_H, LEGEND_H = 26, 6, 190, 34, 10, 24, 22


def nice_tick(span_ms, width_px):
    """A tick step (ms) of 1, 2 or 5 times a power of ten giving about one tick per 80 px."""
    target = span_ms * 80.0 / max(width_px, 1)
    step = 10.0 ** int(f"{target:e}".split("e")[1])
    for m in (1, 2, 5, 10):
        if m * step >= target:
            return m * step
    return 10 * step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="Chrome trace JSON from train --trace")
    ap.add_argument("-o", "--output", help="SVG file (default: TRACE with .svg)")
    ap.add_argument("--step", type=int, help="draw only this training step")
    ap.add_argument("--width", type=int, default=1400, help="drawing width in px")
    args = ap.parse_args(argv)

    with open(args.trace) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names, boxes = {}, []
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "X":
            if args.step is not None and e.get("args", {}).get("step") != args.step:
                continue
            boxes.append(e)
    ranks = sorted(set(names) | {e["tid"] for e in boxes})
    if not ranks:
        sys.exit("trace_to_svg: no ranks in " + args.trace)
    t0 = min((e["ts"] for e in boxes), default=0.0)
    t1 = max((e["ts"] + e["dur"] for e in boxes), default=t0 + 1.0)
    span = max(t1 - t0, 1.0)  # microseconds
    plot_w = args.width - LABEL_W - 2 * MARGIN
    scale = plot_w / span
    top = MARGIN + TITLE_H
    height = top + len(ranks) * (ROW_H + ROW_GAP) + AXIS_H + LEGEND_H + MARGIN
    row_of = {r: i for i, r in enumerate(ranks)}
    title = trace.get("otherData", {}).get("schedule", "") if isinstance(trace, dict) else ""
    steps = sorted({e.get("args", {}).get("step") for e in boxes} - {None})
    step_text = (f"step {steps[0]}" if len(steps) == 1 else
                 f"steps {steps[0]}-{steps[-1]}" if steps else "no steps")
    heading = f"{title or 'pipeline'} schedule: {step_text}, {len(ranks)} ranks"

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{args.width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<title>{escape(title or "pipeline")} timeline</title>',
           f'<rect x="0" y="0" width="{args.width}" height="{height}" fill="white"/>',
           f'<text x="{MARGIN}" y="{MARGIN + 14}" font-size="14" font-weight="bold">'
           f'{escape(heading)}</text>']
    for r in ranks:
        y = top + row_of[r] * (ROW_H + ROW_GAP)
        out.append(f'<text x="{MARGIN}" y="{y + ROW_H / 2 + 4:.1f}">'
                   f'{escape(names.get(r, f"rank {r}"))}</text>')
        out.append(f'<line x1="{LABEL_W}" y1="{y + ROW_H}" x2="{LABEL_W + plot_w}" '
                   f'y2="{y + ROW_H}" stroke="#eeeeee"/>')
    for e in sorted(boxes, key=lambda e: (e["tid"], e["ts"])):
        y = top + row_of[e["tid"]] * (ROW_H + ROW_GAP)
        x = LABEL_W + (e["ts"] - t0) * scale
        w = max(e["dur"] * scale, 0.5)
        cat = e.get("cat", "")
        colour = COLOURS.get(cat, "#999999")
        wait = cat == "wait"
        h, yy = (ROW_H * 0.5, y + ROW_H * 0.25) if wait else (ROW_H, y)
        tip = f'{e["name"]} step {e.get("args", {}).get("step", "?")}: {e["dur"] / 1e3:.3f} ms'
        out.append(f'<rect x="{x:.2f}" y="{yy:.1f}" width="{w:.2f}" height="{h:.1f}" '
                   f'fill="{colour}" stroke="{"none" if wait else "#333333"}" stroke-width="0.4">'
                   f'<title>{escape(tip)}</title></rect>')
        label = str(e.get("args", {}).get("microbatch", ""))
        if not wait and w >= 7 * len(label) + 2:
            out.append(f'<text x="{x + w / 2:.2f}" y="{y + ROW_H / 2 + 4:.1f}" '
                       f'text-anchor="middle" fill="white">{label}</text>')
    axis_y = top + len(ranks) * (ROW_H + ROW_GAP) + 4
    out.append(f'<line x1="{LABEL_W}" y1="{axis_y}" x2="{LABEL_W + plot_w}" y2="{axis_y}" '
               f'stroke="black"/>')
    span_ms = span / 1e3
    tick = nice_tick(span_ms, plot_w)
    k = 0
    while k * tick <= span_ms + 1e-9:
        x = LABEL_W + k * tick * 1e3 * scale
        out.append(f'<line x1="{x:.2f}" y1="{axis_y}" x2="{x:.2f}" y2="{axis_y + 5}" '
                   f'stroke="black"/>')
        out.append(f'<text x="{x:.2f}" y="{axis_y + 17}" text-anchor="middle">'
                   f'{k * tick:g}</text>')
        k += 1
    out.append(f'<text x="{MARGIN}" y="{axis_y + 17}">time (ms)</text>')
    # The legend: the kinds this trace has, in the order of COLOURS.
    present = {e.get("cat", "") for e in boxes}
    x, legend_y = LABEL_W, axis_y + AXIS_H - 6
    for cat, colour in COLOURS.items():
        if cat not in present:
            continue
        out.append(f'<rect x="{x}" y="{legend_y}" width="12" height="12" fill="{colour}" '
                   f'stroke="#666666" stroke-width="0.4"/>')
        out.append(f'<text x="{x + 17}" y="{legend_y + 10}">{escape(LEGEND[cat])}</text>')
        x += 30 + 7 * len(LEGEND[cat])
    out.append("</svg>")
    path = args.output or (args.trace.rsplit(".", 1)[0] + ".svg")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"wrote {path} ({len(ranks)} ranks, {len(boxes)} boxes)")


if __name__ == "__main__":
    main()
