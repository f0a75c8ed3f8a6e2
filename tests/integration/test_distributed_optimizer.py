"""The ZeRO-1 distributed optimizer (--distributed-optimizer), end to end: trained at dp 2, dp 4,
tp 2 x dp 2, and tp 2 x pp 2 x dp 2 with 1f1b and with zb-h1 (and --sequence-parallel), it gives the 1-rank run's per-step
losses and gradient norms within 1e-5 relative and its final weights and optimizer state (every
/model and /optimizer dataset) within 1e-4 relative by tensor norm, the layouts suite's
tolerances (test_layouts.py says why by norm). Its checkpoints have the schema of any other: the
dp 4 run's step-3 file resumed at dp 2 without the option, and a dp 2 run's without it resumed at
dp 4 with it, each continue the 1-rank run's steps 4..6 within the same tolerances. At dp 1 the
option trains as without it and says it has no effect. A small --dp-bucket-size gives several
buckets, so padding, the tied wte's own bucket and shards that split parameters all occur. The
layouts run with the parameter gather behind the next forward (the default); at dp 2 the run
that waits for it after the step (--no-overlap-param-gather) is the same run bit for bit.

Run: /usr/bin/python3 test_distributed_optimizer.py --bin BUILD/bin [--mpiexec PATH ...]
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

MODEL = h.EQUIVALENCE_MODEL
STEPS = h.EQUIVALENCE_STEPS
SAVE_AT = h.EQUIVALENCE_SAVE_AT
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


class DistributedOptimizerTest(h.EquivalenceTest):
    """The 1-rank reference (6 steps, checkpoints at 3 and 6) is made once for all tests."""

    worst = {}
    metrics_of = {}
    RUN_TIMEOUT = RUN_TIMEOUT
    PREFIX = "gpt-zero"

    @classmethod
    def setUpClass(cls):
        cls.make_folders()
        cls.ref = cls.train_reference("serial", MODEL)

    def run_layout(self, label, np, options):
        """Trains to STEPS; returns (metrics, checkpoint dir, result)."""
        metrics, ck, result = self.train_layout(label, MODEL + options, np)
        type(self).runs[label] = ck
        type(self).metrics_of[label] = metrics
        return metrics, ck, result

    def check_layout(self, name):
        np, layout = LAYOUTS[name]
        got, ck, result = self.run_layout(name, np, layout + ZERO)
        self.assertIn("optimizer state sharded over dp", result.stdout + result.stderr,
                      result.describe())
        self.assert_like(got, ck, self.ref, range(1, STEPS + 1), name)

    def source(self, label, np, options):
        """The step-3 checkpoint of a run (made here if no earlier test made it)."""
        if label not in self.runs:
            self.run_layout(label, np, options)
        return h.checkpoint_file(self.runs[label], SAVE_AT)

    def resume(self, source, np, options, label):
        self.resume_like(source, MODEL + options, np, self.ref, label)

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

    def test_d_gather_overlap_changes_no_bit(self):
        if "dp2" not in self.runs:
            self.run_layout("dp2", 2, LAYOUTS["dp2"][1] + ZERO)
        got, ck, _ = self.run_layout("dp2_waited", 2,
                                     LAYOUTS["dp2"][1] + ZERO + ["--no-overlap-param-gather"])
        self.assert_same_run(got, ck, {"metrics": self.metrics_of["dp2"], "ck": self.runs["dp2"]})

    def test_c_dp1_says_no_effect(self):
        got, ck, result = self.run_layout("dp1", 1, ZERO)
        self.assertIn("no effect", result.stdout + result.stderr, result.describe())
        self.assert_same_run(got, ck, self.ref)


h.add_layout_tests(DistributedOptimizerTest, {
    name: ((name,), f"{name} with --distributed-optimizer against the 1-rank run")
    for name in LAYOUTS})

if __name__ == "__main__":
    h.main()
