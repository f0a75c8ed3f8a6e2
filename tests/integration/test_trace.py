"""--trace end to end (docs/DESIGN.md "Pipeline schedules are data").

1. 1f1b and zb-h1 at --pp 4 (m = 8): the merged Chrome trace is valid JSON with every rank;
   for each rank and recorded step (2 and 3) the action names are the schedule's order (1f1b:
   min(pp-s-1, m) forwards, then one forward one backward, then the rest, built here; zb-h1:
   every F, B and W once, each kind in microbatch order, W(i) after B(i)); one rank's events do
   not overlap; F(mb) on stage s+1 starts after F(mb) on stage s ends, within the clock-offset
   error; scripts/trace_to_svg.py draws 4 rows (one label per rank) and one rect per action.
2. --trace to an unwritable path: one "error:" line naming --trace, no training.

Run: /usr/bin/python3 test_trace.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
import gpt_harness as h  # noqa: E402

SVG_SCRIPT = os.path.join(HERE, "..", "..", "scripts", "trace_to_svg.py")
PP, M = 4, 8
ARGS = ["--pp", str(PP), "--n-layer", "4", "--n-head", "4", "--d-model", "32", "--seq-len", "16",
        "--global-batch-size", "16", "--micro-batch-size", "2", "--threads", "1", "--steps", "3",
        "--eval-every", "0"]
TOLERANCE_US = 2000.0  # clock-offset error allowed between ranks
EPS_US = 1.0           # rounding of the printed microseconds


def expected_1f1b(stage):
    warm = min(PP - stage - 1, M)
    names = [f"F{i}" for i in range(warm)]
    for i in range(M - warm):
        names += [f"F{warm + i}", f"B{i}"]
    names += [f"B{i}" for i in range(M - warm, M)]
    return names


class TraceTest(h.TempDirTest):

    def run_traced(self, schedule):
        trace = self.path("T.json")
        result = h.train(ARGS + ["--schedule", schedule, "--trace", trace,
                                 "--checkpoint-dir", self.path("ck")],
                         np=PP, timeout=90, tiny=False)
        self.assertRegex(result.stdout + result.stderr, r"wrote trace .*T\.json \(\d+ events\)")
        with open(trace) as f:
            data = json.load(f)
        return trace, data, result

    def check_trace(self, schedule, data):
        events = data["traceEvents"]
        labels = {e["tid"]: e["args"]["name"] for e in events
                  if e.get("ph") == "M" and e.get("name") == "thread_name"}
        self.assertEqual(sorted(labels), list(range(PP)))
        for r in range(PP):
            self.assertEqual(labels[r], f"rank {r} (tp 0, dp 0, pp {r})")
        boxes = [e for e in events if e.get("ph") == "X"]
        steps = sorted({e["args"]["step"] for e in boxes})
        self.assertEqual(steps, [2, 3], "steps 2..min(steps, 4) are recorded")
        actions = [e for e in boxes if e["cat"] != "wait"]
        for e in boxes:
            self.assertGreaterEqual(e["dur"], 0.0)
            self.assertIn(e["cat"], ("forward", "backward", "weight", "wait"))
        start_of, end_of = {}, {}
        for r in range(PP):
            mine = sorted((e for e in boxes if e["tid"] == r), key=lambda e: e["ts"])
            for a, b in zip(mine, mine[1:]):
                self.assertLessEqual(a["ts"] + a["dur"], b["ts"] + EPS_US,
                                     f"rank {r}: {a['name']} overlaps {b['name']}")
            for step in steps:
                names = [e["name"] for e in mine if e["cat"] != "wait"
                         and e["args"]["step"] == step]
                if schedule == "1f1b":
                    self.assertEqual(names, expected_1f1b(r), f"rank {r} step {step}")
                else:
                    for kind in "FBW":
                        self.assertEqual([n for n in names if n[0] == kind],
                                         [f"{kind}{i}" for i in range(M)],
                                         f"rank {r} step {step} {kind}")
                    for i in range(M):
                        self.assertLess(names.index(f"B{i}"), names.index(f"W{i}"))
                    self.assertEqual(len(names), 3 * M)
            for e in mine:
                if e["cat"] == "forward":
                    key = (e["args"]["step"], e["args"]["microbatch"], r)
                    start_of[key], end_of[key] = e["ts"], e["ts"] + e["dur"]
        for (step, mb, r), start in start_of.items():
            if r > 0:
                self.assertGreaterEqual(start, end_of[(step, mb, r - 1)] - TOLERANCE_US,
                                        f"F{mb} of step {step} on stage {r} before stage {r - 1}")
        return actions

    def check_svg(self, trace, actions):
        svg = self.path("timeline.svg")
        subprocess.run([sys.executable, SVG_SCRIPT, trace, "-o", svg], check=True,
                       capture_output=True, timeout=60)
        with open(svg) as f:
            text = f.read()
        self.assertTrue(text.startswith("<svg"))
        labels = re.findall(r"<text[^>]*>rank \d+ \(tp", text)
        self.assertEqual(len(labels), PP, "one label per rank")
        # Action boxes have a stroke; waits and the background have none.
        rects = re.findall(r'<rect [^>]*stroke="#333333"', text)
        self.assertEqual(len(rects), len(actions), "one rect per action")
        self.assertRegex(text, rf"schedule: steps 2-\d+, {PP} ranks</text>")
        for kind in ("forward (F)", "waiting for a message"):
            self.assertIn(f">{kind}</text>", text, "the legend")
        step_svg = self.path("step2.svg")
        subprocess.run([sys.executable, SVG_SCRIPT, trace, "-o", step_svg, "--step", "2"],
                       check=True, capture_output=True, timeout=60)
        with open(step_svg) as f:
            self.assertEqual(len(re.findall(r'<rect [^>]*stroke="#333333"', f.read())),
                             len(actions) // 2)

    def test_1f1b(self):
        trace, data, _ = self.run_traced("1f1b")
        actions = self.check_trace("1f1b", data)
        self.assertEqual(len(actions), 2 * PP * 2 * M)
        self.check_svg(trace, actions)

    def test_zbh1(self):
        trace, data, _ = self.run_traced("zb-h1")
        actions = self.check_trace("zb-h1", data)
        self.assertEqual(len(actions), 2 * PP * 3 * M)
        self.assertTrue(any(e["name"].startswith("W") for e in actions))
        self.check_svg(trace, actions)

    def test_unwritable_path(self):
        blocker = self.path("a-file")
        with open(blocker, "w") as f:
            f.write("x")
        ck = self.path("ck")
        result = h.train(["--steps", "1", "--trace", os.path.join(blocker, "T.json"),
                          "--checkpoint-dir", ck], np=2, timeout=60, check=False)
        self.assertNotEqual(result.returncode, 0, result.describe())
        errors = [l for l in (result.stdout + result.stderr).splitlines()
                  if l.startswith("error:")]
        self.assertEqual(len(errors), 1, "expected one error line\n" + result.describe())
        self.assertIn("--trace", errors[0], result.describe())
        self.assertFalse(os.path.exists(ck) and h.step_files(ck), "no checkpoint")


if __name__ == "__main__":
    h.main()
