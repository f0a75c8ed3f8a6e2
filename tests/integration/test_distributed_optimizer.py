"""The ZeRO-1 distributed optimizer (--distributed-optimizer), end to end: trained at dp 2, dp 4,
tp 2 x dp 2, and tp 2 x pp 2 x dp 2 with 1f1b and with zb-h1 (and --sequence-parallel), it gives the 1-rank run's per-step
losses and gradient norms within 1e-5 relative and its final weights and optimizer state (every
/model and /optimizer dataset) within 1e-4 relative by tensor norm, the layouts suite's
tolerances (test_layouts.py says why by norm). Its checkpoints have the schema of any other: the
dp 4 run's step-3 file resumed at dp 2 without the option, and a dp 2 run's without it resumed at
dp 4 with it, each continue the 1-rank run's steps 4..6 within the same tolerances. At dp 1 the
option trains as without it and says it has no effect. A small --dp-bucket-size gives several
buckets, so padding, the tied wte's own bucket and shards that split parameters all occur.

Run: /usr/bin/python3 test_distributed_optimizer.py --bin BUILD/bin [--mpiexec PATH ...]
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

MODEL = h.EQUIVALENCE_MODEL
STEPS = 6
SAVE_AT = 3
RUN_TIMEOUT = 90
ZERO = ["--distributed-optimizer", "--dp-bucket-size", "3000"]

# name: (ranks, layout options)
LAYOUTS = {
    "dp2": (2, []),
    "dp4": (4, []),
    "tp2_dp2": (4, ["--tp", "2"]),
    "tp2_pp2_dp2_1f1b": (8, ["--tp", "2", "--pp", "2", "--schedule", "1f1b"]),
    "tp2_pp2_dp2_zbh1_sp": (8, ["--tp", "2", "--pp", "2", "--schedule", "zb-h1",
                                "--sequence-parallel"]),
}


class DistributedOptimizerTest(h.TempDirTest, h.WorstDifferences):
    """The 1-rank reference (6 steps, checkpoints at 3 and 6) is made once for all tests."""

    worst = {}

    @classmethod
    def setUpClass(cls):
        cls._ref = tempfile.TemporaryDirectory(prefix="gpt-zero-ref-")
        cls.ref_dir = os.path.join(cls._ref.name, "ck")
        metrics = os.path.join(cls._ref.name, "m.jsonl")
        h.train(MODEL + ["--steps", STEPS, "--save-every", SAVE_AT, "--checkpoint-dir",
                         cls.ref_dir, "--metrics", metrics], timeout=RUN_TIMEOUT)
        cls.ref = h.read_metrics(metrics)
        cls.ref_final = h.load_checkpoint(h.checkpoint_file(cls.ref_dir, STEPS))
        cls._runs = tempfile.TemporaryDirectory(prefix="gpt-zero-runs-")
        cls.runs = {}

    @classmethod
    def tearDownClass(cls):
        cls._ref.cleanup()
        cls._runs.cleanup()
        cls.report_worst("worst relative differences against the 1-rank run")

    def run_layout(self, label, np, options):
        """Trains to STEPS; returns (metrics, checkpoint dir, result)."""
        folder = os.path.join(self._runs.name, label)
        ck, metrics = os.path.join(folder, "ck"), os.path.join(folder, "m.jsonl")
        os.makedirs(folder, exist_ok=True)
        result = h.train(MODEL + options + ["--steps", STEPS, "--save-every", SAVE_AT,
                                            "--checkpoint-dir", ck, "--metrics", metrics],
                         np=np, timeout=RUN_TIMEOUT)
        type(self).runs[label] = ck
        return h.read_metrics(metrics), ck, result

    def assert_like_reference(self, metrics, ck, steps, label):
        h.assert_curve_close(self, metrics, self.ref, steps, h.CURVE_REL, label, self.note)
        h.assert_state_close(self, h.checkpoint_file(ck, STEPS), self.ref_final, h.STATE_REL,
                             label, self.note)

    def check_layout(self, name):
        np, layout = LAYOUTS[name]
        got, ck, result = self.run_layout(name, np, layout + ZERO)
        self.assertIn("optimizer state sharded over dp", result.stdout + result.stderr,
                      result.describe())
        self.assert_like_reference(got, ck, range(1, STEPS + 1), name)

    def source(self, label, np, options):
        """The step-3 checkpoint of a run (made here if no earlier test made it)."""
        if label not in self.runs:
            self.run_layout(label, np, options)
        return h.checkpoint_file(self.runs[label], SAVE_AT)

    def resume(self, source, np, options, label):
        metrics, ck = h.train_resumed(self, MODEL + options, source, STEPS, np, RUN_TIMEOUT)
        self.assert_like_reference(metrics, ck, range(SAVE_AT + 1, STEPS + 1), label)

    # ---- checkpoints across the option

    def test_b_resume_dp4_sharded_at_dp2_replicated(self):
        src = self.source("dp4", 4, LAYOUTS["dp4"][1] + ZERO)
        self.resume(src, 2, [], "dp4+zero->dp2")

    def test_b_resume_dp2_replicated_at_dp4_sharded(self):
        src = self.source("dp2_replicated", 2, [])
        self.resume(src, 4, ZERO, "dp2->dp4+zero")

    def test_c_dp3_padded_buckets_like_replicated(self):
        """dp 3 does not divide the buckets (multiples of 32 here): padding is in play. Against
        the same layout without the option (the global batch must split over 3)."""
        batch = ["--global-batch-size", "18"]
        plain, plain_ck, _ = self.run_layout("dp3", 3, batch)
        got, ck, result = self.run_layout("dp3_zero", 3, batch + ZERO)
        line = [l for l in (result.stdout + result.stderr).splitlines() if "sharded over dp 3" in l]
        self.assertTrue(line, result.describe())
        self.assertNotIn("(padding 0 floats", line[0], "expected padded buckets at dp 3")
        h.assert_curve_close(self, got, plain, range(1, STEPS + 1), h.CURVE_REL, "dp3+zero")
        h.assert_state_close(self, h.checkpoint_file(ck, STEPS),
                             h.load_checkpoint(h.checkpoint_file(plain_ck, STEPS)), h.STATE_REL,
                             "dp3+zero vs dp3", self.note)

    def test_c_dp1_says_no_effect(self):
        got, ck, result = self.run_layout("dp1", 1, ZERO)
        self.assertIn("no effect", result.stdout + result.stderr, result.describe())
        for key in ("loss", "grad_norm"):
            self.assertEqual(h.by_step(got, key), h.by_step(self.ref, key), key)
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, STEPS),
                                       h.checkpoint_file(self.ref_dir, STEPS))


def _add_layout_tests():
    for name in LAYOUTS:
        def test(self, name=name):
            self.check_layout(name)
        test.__doc__ = f"{name} with --distributed-optimizer against the 1-rank run"
        # "test_a_..." sorts the layouts before the resume tests that reuse their runs.
        setattr(DistributedOptimizerTest, f"test_a_{name}", test)


_add_layout_tests()

if __name__ == "__main__":
    h.main()
