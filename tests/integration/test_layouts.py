"""Layouts agree with the serial run, end to end (docs/DESIGN.md "Model", "Checkpoint", "Testing"):
the same tiny model and data trained at tp 2, tp 4, dp 2, dp 4 and tp 2 x dp 2, each with and
without --sequence-parallel, gives the 1-rank run's per-step losses and gradient norms within
1e-5 relative, and its final weights (every /model dataset) and optimizer state (every
/optimizer dataset) within 1e-4 relative by tensor norm, ||a - b|| / ||b|| (AdamW divides by
sqrt(exp_avg_sq), which amplifies the rounding of tiny gradients element by element, so
elements are not compared one by one). Resuming across layouts: the step-3 checkpoint of the
tp 4 run continued at tp 2 and at tp 1 x dp 2, and the tp 1 x dp 2 run's continued at tp 4,
each give the straight 1-rank 6-step run's steps 4..6 within the same tolerances. Also two
--sequence-parallel rules: --seq-len not a multiple of --tp is a one-line error naming
--seq-len, and at tp 1 the option trains normally and says it has no effect. And
--no-overlap-tp-comm is the overlapped tp 2 run bit for bit, with and without sequence
parallelism. The worst relative differences seen are printed at the end.

The norm matters: the key third of c_attn.bias has a gradient that is exactly zero in exact
arithmetic (a constant added to every key shifts each query's scores alike, and softmax ignores
it), so its values are rounding noise, different in every layout; they are ~1e-5 of the tensor's
norm, which is what the 1e-4 bound on h.*.attn.c_attn.bias absorbs.

Every run uses --steps 6 --save-every 3, so the lr schedule is the same in all of them.

Run: /usr/bin/python3 test_layouts.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

MODEL = h.EQUIVALENCE_MODEL
STEPS = h.EQUIVALENCE_STEPS
SAVE_AT = h.EQUIVALENCE_SAVE_AT
RUN_TIMEOUT = 60

# name: (ranks, layout options)
LAYOUTS = {
    "tp2": (2, ["--tp", "2"]),
    "tp4": (4, ["--tp", "4"]),
    "dp2": (2, []),
    "dp4": (4, []),
    "tp2_dp2": (4, ["--tp", "2", "--dp", "2"]),
}
SP = "--sequence-parallel"


def allreduce_tp_bytes(dp):
    """tp bytes per step without sequence parallelism (docs/ARCHITECTURE.md): per microbatch 4
    all-reduces of b*s*h floats per layer, the embedding's and the head's, 3 of b*s for the
    loss; one double for the gradient norm."""
    arg = lambda name: int(MODEL[MODEL.index(name) + 1])  # noqa: E731
    b, s, d, layers = (arg("--micro-batch-size"), arg("--seq-len"), arg("--d-model"),
                       arg("--n-layer"))
    micro = arg("--global-batch-size") // (dp * b)
    return 4 * micro * ((4 * layers + 2) * b * s * d + 3 * b * s) + 8


class LayoutTest(h.EquivalenceTest):
    """The 1-rank reference (6 steps, checkpoints at 3 and 6) is made once for all tests."""

    worst = {}  # what -> (relative difference, where)
    RUN_TIMEOUT = RUN_TIMEOUT
    PREFIX = "gpt-layouts"

    @classmethod
    def setUpClass(cls):
        cls.make_folders()  # the layout runs are kept for the resume tests (step-3 checkpoints)
        cls.ref = cls.train_reference("serial", MODEL)
        help_text = h.run("train", ["--help"], timeout=30, check=True)
        cls.has_sp = SP in help_text.stdout + help_text.stderr
        if not cls.has_sp:
            print(f"NOTE: train --help has no {SP}: its variants are skipped", flush=True)

    # ---- helpers

    def check_layout(self, name, sp):
        np, layout = LAYOUTS[name]
        label = name + ("+sp" if sp else "")
        if sp and not self.has_sp:
            self.skipTest(f"train --help has no {SP} yet")
        got, ck, result = self.train_layout(label, MODEL + layout + ([SP] if sp else []), np)
        type(self).runs[label] = ck
        self.assert_like(got, ck, self.ref, range(1, STEPS + 1), label)
        if "--tp" not in layout and sp:
            self.assertIn("no effect", result.stdout + result.stderr,
                          f"{SP} at tp 1 should say it has no effect\n" + result.describe())
        if "--tp" in layout and sp:
            # In effect: all-gathers and reduce-scatters instead of the plain all-reduces.
            plain = allreduce_tp_bytes(np // int(layout[layout.index("--tp") + 1]))
            moved = h.by_step(got, "tp_bytes")
            self.assertTrue(all(v != plain for v in moved.values()),
                            f"{label}: tp_bytes {moved} are those of the plain all-reduces "
                            f"({plain}): is {SP} ignored?")

    def source(self, label):
        """The step-3 checkpoint of a layout's run (made here if its test has not run)."""
        if label not in self.runs:
            np, layout = LAYOUTS[label]
            _, ck, _ = self.train_layout(label, MODEL + layout, np)
            type(self).runs[label] = ck
        return h.checkpoint_file(self.runs[label], SAVE_AT)

    def resume(self, source_label, name, np, layout):
        self.resume_like(self.source(source_label), MODEL + layout, np, self.ref,
                         f"{source_label}->{name}")

    # ---- resume across layouts

    def test_resume_tp4_at_tp2(self):
        self.resume("tp4", "tp2", 2, ["--tp", "2"])

    def test_resume_tp4_at_dp2(self):
        self.resume("tp4", "dp2", 2, [])

    def test_resume_dp2_at_tp4(self):
        self.resume("dp2", "tp4", 4, ["--tp", "4"])

    # ---- tp communication overlap

    def test_tp_overlap_changes_no_bit(self):
        """--no-overlap-tp-comm (each column-parallel weight gradient after its input gradient's
        tp reduction) is the overlapped run bit for bit, at tp 2 with and without SP."""
        for label, extra in (("tp2", []), ("tp2+sp", [SP])):
            if extra and not self.has_sp:
                continue
            if label not in self.runs:
                self.check_layout("tp2", bool(extra))
            got, ck, _ = self.train_layout(label + "_waited",
                                           MODEL + LAYOUTS["tp2"][1] + extra +
                                           ["--no-overlap-tp-comm"], 2)
            straight = self.runs[label]  # its checkpoint folder, beside its metrics file
            metrics = h.read_metrics(os.path.join(os.path.dirname(straight), "m.jsonl"))
            for key in ("loss", "grad_norm"):
                self.assertEqual(h.by_step(got, key), h.by_step(metrics, key), f"{label}: {key}")
            h.assert_checkpoints_identical(self, h.checkpoint_file(ck, STEPS),
                                           h.checkpoint_file(straight, STEPS))

    # ---- --sequence-parallel rules

    def test_sp_seq_len_not_multiple_of_tp(self):
        if not self.has_sp:
            self.skipTest(f"train --help has no {SP} yet")
        model = list(MODEL)
        model[model.index("--seq-len") + 1] = "18"  # a multiple of 2, not of 4
        args = model + ["--tp", "4", SP, "--steps", "1", "--checkpoint-dir", self.path("ck")]
        result = h.train(args, np=4, timeout=RUN_TIMEOUT, check=False)
        self.assertNotEqual(result.returncode, 0, result.describe())
        errors = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
        self.assertEqual(len(errors), 1, "expected one error line\n" + result.describe())
        self.assertIn("--seq-len", errors[0], result.describe())
        self.assertLess(result.seconds, 40, "the error should come within seconds")
        self.assertFalse(os.path.exists(self.path("ck")) and h.step_files(self.path("ck")),
                         "no checkpoint after an option error")

    def test_sp_at_tp1_serial(self):
        """One rank: trains as without the option (bit for bit) and says it has no effect."""
        if not self.has_sp:
            self.skipTest(f"train --help has no {SP} yet")
        got, ck, result = h.train_to(self.path("serial+sp"), MODEL + [SP], STEPS, SAVE_AT,
                                     timeout=RUN_TIMEOUT)
        self.assertIn("no effect", result.stdout + result.stderr, result.describe())
        self.assert_same_run(got, ck, self.ref)


h.add_layout_tests(LayoutTest, {
    name + ("_sp" if sp else ""): ((name, sp),
                                   f"{name}{' with ' + SP if sp else ''} against the 1-rank run")
    for name in LAYOUTS for sp in (False, True)})

if __name__ == "__main__":
    h.main()
