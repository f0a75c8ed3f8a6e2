"""Memory (docs/MEMORY.md): the memory model against the ledger, and activation recomputation.

1. --recompute selective and full (and full limited by --recompute-layers) give bit-identical
   losses, gradient norms, final weights and optimizer state to --recompute none in the same
   layout: at 1 rank, tp 2 with --sequence-parallel, pp 2 with 1f1b, pp 2 with zb-h1 and pp 2
   interleaved with uneven chunks (--pipeline-layers 0,3,2,1).
2. Every run here (and every train run of the suite, through gpt_harness.train) proves the model
   to the byte: no rank reports a ledger that differs from its prediction, and the metrics file's
   measured memory events equal the predicted ones for rank 0 and each stage's heaviest rank.
   Here also: each step line's mem_peak_bytes is rank 0's measured total, on stage 0 of the
   pp 2 1f1b run (two microbatches in flight) activations shrink from none to selective to full,
   and on both stages of pp 2 zb-h1 selective and full keep less than none.
3. train --memory-report prints one row per rank (coordinates, six categories, total) that
   agrees with a real run's predicted events, and trains nothing.

Run: /usr/bin/python3 test_memory.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

MODEL = h.with_options(h.EQUIVALENCE_MODEL, n_layer=4, global_batch_size=8)
STEPS = 3
RUN_TIMEOUT = 90
CATEGORIES = ["weights", "grads", "optimizer", "activations", "comm", "workspace"]

# name: (ranks, layout options)
LAYOUTS = {
    "serial": (1, []),
    "tp2_sp": (2, ["--tp", "2", "--sequence-parallel"]),
    "pp2_1f1b": (2, ["--pp", "2", "--schedule", "1f1b"]),
    "pp2_zbh1": (2, ["--pp", "2", "--schedule", "zb-h1"]),
    # uneven chunks: stage 0 holds the embedding without blocks + 2 blocks, stage 1 3 + 1 (the
    # last option given wins)
    "pp2_interleaved_uneven": (2, ["--pp", "2", "--schedule", "interleaved", "--virtual-stages",
                                   "2", "--n-layer", "6", "--pipeline-layers", "0,3,2,1"]),
}
MODES = [["--recompute", "none"], ["--recompute", "selective"], ["--recompute", "full"]]


def memory_events(metrics, kind):
    return {m["rank"]: m for m in metrics if m.get("event") == "memory" and m["kind"] == kind}


class MemoryTest(h.TempDirTest):
    """The runs are made once per class, in a folder that outlives each test's own."""

    runs = {}  # (layout, mode text) -> (metrics, final checkpoint)

    @classmethod
    def setUpClass(cls):
        cls._runs_dir = tempfile.TemporaryDirectory(prefix="gpt-memory-runs-")

    @classmethod
    def tearDownClass(cls):
        cls._runs_dir.cleanup()

    def train(self, layout, mode):
        key = (layout, " ".join(mode))
        if key not in self.runs:
            np, options = LAYOUTS[layout]
            folder = os.path.join(self._runs_dir.name, layout + "_" + "_".join(mode[1::2]))
            ck, metrics = os.path.join(folder, "ck"), os.path.join(folder, "m.jsonl")
            h.train(MODEL + options + mode + ["--steps", STEPS, "--checkpoint-dir", ck,
                                              "--metrics", metrics],
                    np=np, timeout=RUN_TIMEOUT, tiny=False)
            type(self).runs[key] = (h.read_metrics(metrics), h.checkpoint_file(ck, STEPS))
        return self.runs[key]

    def assert_identical_runs(self, layout, mode):
        ref_metrics, ref_ck = self.train(layout, MODES[0])
        metrics, ck = self.train(layout, mode)
        for key in ("loss", "grad_norm"):
            self.assertEqual(h.by_step(metrics, key), h.by_step(ref_metrics, key),
                             f"{layout} {mode}: {key} differs from --recompute none")
        h.assert_checkpoints_identical(self, ck, ref_ck)

    def test_a_recompute_is_bit_identical(self):
        for layout in LAYOUTS:
            for mode in MODES[1:]:
                with self.subTest(layout=layout, mode=mode):
                    self.assert_identical_runs(layout, mode)

    def test_a_recompute_layers(self):
        self.assert_identical_runs("pp2_1f1b", ["--recompute", "full", "--recompute-layers", "1"])

    def test_b_activations_shrink_with_recompute(self):
        stage0 = [memory_events(self.train("pp2_1f1b", mode)[0], "measured")[0]["bytes"]
                  for mode in MODES]
        activations = [b["activations"] for b in stage0]
        self.assertGreater(activations[0], activations[1], "selective keeps less than none")
        self.assertGreater(activations[1], activations[2], "full keeps less than selective")
        for b in stage0:  # recomputation moves nothing else but workspace
            for c in ("weights", "grads", "optimizer", "comm"):
                self.assertEqual(b[c], stage0[0][c], c)

    def test_b_zbh1_full_recompute_keeps_less_than_none(self):
        """ZB-H1 runs W apart from B-input: full recomputation once kept a rebuilt cache per
        block until its W, more than none on every stage. Measured on both stages."""
        for rank in (0, 1):
            activations = [memory_events(self.train("pp2_zbh1", mode)[0], "measured")[rank]
                           ["bytes"]["activations"] for mode in MODES]
            with self.subTest(stage=rank):
                self.assertGreater(activations[0], activations[1], "selective keeps less than none")
                self.assertGreater(activations[0], activations[2], "full keeps less than none")

    def test_b_step_lines_report_rank0_peak(self):
        metrics, _ = self.train("pp2_1f1b", MODES[0])
        peak = memory_events(metrics, "measured")[0]["bytes"]["total"]
        self.assertEqual({m["mem_peak_bytes"] for m in h.step_lines(metrics)}, {peak})
        predicted = memory_events(metrics, "predicted")
        self.assertEqual(sorted(predicted), [0, 1], "rank 0 and stage 1's heaviest rank")
        for event in predicted.values():
            self.assertEqual(event["bytes"]["total"],
                             sum(event["bytes"][c] for c in CATEGORIES))

    def test_c_memory_report(self):
        np, options = LAYOUTS["pp2_1f1b"]
        ck = self.path("report_ck")
        result = h.run("train", MODEL + options + ["--memory-report", "--checkpoint-dir", ck],
                       np=np, timeout=RUN_TIMEOUT, check=True)
        rows = {}
        for line in result.stdout.splitlines():
            fields = line.split()
            if len(fields) == 4 + len(CATEGORIES) + 1 and fields[0].isdigit():
                numbers = [int(f) for f in fields]
                rows[numbers[0]] = numbers
        self.assertEqual(sorted(rows), list(range(np)), result.describe())
        self.assertEqual([rows[r][3] for r in range(np)], [0, 1], "pp coordinate of each rank")
        predicted = memory_events(self.train("pp2_1f1b", MODES[0])[0], "predicted")
        for rank, event in predicted.items():
            self.assertEqual(rows[rank][4:], [event["bytes"][c] for c in CATEGORIES]
                             + [event["bytes"]["total"]], f"rank {rank}")
        self.assertRegex(result.stdout, re.compile(r"heaviest: rank \d \(pp stage \d\)"))
        self.assertFalse(os.path.exists(ck), "--memory-report must not train or write")


if __name__ == "__main__":
    h.main()
