"""Checkpoint and resume, end to end (docs/DESIGN.md "Checkpoint", "Testing"): resuming gives exactly
(bit for bit) the run that never stopped in the same layout -- losses and gradient norms in the
metrics files, every /model and /optimizer dataset of the final checkpoints -- at 1 rank, at
tp 2 and at dp 2 (also with --distributed-optimizer); in another layout it continues the same loss curve to float32 rounding. Also
--resume auto (fresh start, skipping a corrupt newest file), --keep-last, --steps 0,
--init-from and stop requests (SIGTERM and Ctrl-C -> exit code 3, a checkpoint, an exact
continuation; a second Ctrl-C -> exit 130; SIGTERM and Ctrl-C to a plain mpiexec, with the grace
the set-up installs -> the notice on mpiexec's stderr at once, a complete checkpoint, mpiexec's
exit 1, an exact continuation).

The learning-rate schedule depends on --steps after the warm-up, so runs that stop early and
runs that go on are compared with a warm-up longer than both (lr = lr * s / warmup for every
step s either runs), unless they use the same --steps.

Run: /usr/bin/python3 test_resume.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

# Warm-up longer than any run here: each step's lr is the same whatever --steps says.
RUN = ["--lr", "0.01", "--min-lr", "0.001", "--warmup-steps", "20", "--seed", "4321"]
STOP_EXIT_CODE = 3  # launch/runtime/signals.h kExitStopped, documented for stop requests


def corrupt_dataset(path, dataset="/model/wte"):
    """Flips bytes in the middle of a dataset's data region (its crc32 no longer matches)."""
    import h5py
    with h5py.File(path, "r") as f:
        offset = f[dataset].id.get_offset()
        size = f[dataset].id.get_storage_size()
    with open(path, "r+b") as f:
        f.seek(offset + size // 2)
        chunk = f.read(8)
        f.seek(offset + size // 2)
        f.write(bytes(b ^ 0xA5 for b in chunk))


def has_step_line(metrics):
    """Whether the metrics file holds a complete line of a step (its loss)."""
    try:
        with open(metrics) as f:
            return any(line.endswith("\n") and '"loss"' in line for line in f)
    except OSError:
        return False


class ResumeTest(h.TempDirTest):
    """Run A, the reference: 6 steps straight at 1 rank, checkpoints at 3 and 6 (made once)."""

    @classmethod
    def setUpClass(cls):
        cls._ref = tempfile.TemporaryDirectory(prefix="gpt-resume-ref-")
        cls.ref_dir = os.path.join(cls._ref.name, "ck")
        cls.ref_metrics = os.path.join(cls._ref.name, "m.jsonl")
        h.train(RUN + ["--steps", "6", "--save-every", "3", "--checkpoint-dir", cls.ref_dir,
                       "--metrics", cls.ref_metrics])
        cls.ref = h.read_metrics(cls.ref_metrics)

    @classmethod
    def tearDownClass(cls):
        cls._ref.cleanup()

    # ---- helpers

    def straight_and_resumed(self, np, layout):
        """Run A' (6 steps straight) and run B (3 steps, then --resume auto to 6) in a layout;
        returns their metrics and final checkpoints."""
        a_dir, a_metrics = self.path("a"), self.path("a.jsonl")
        b_dir, b_metrics = self.path("b"), self.path("b.jsonl")
        h.train(RUN + layout + ["--steps", "6", "--checkpoint-dir", a_dir,
                                "--metrics", a_metrics], np=np)
        h.train(RUN + layout + ["--steps", "3", "--checkpoint-dir", b_dir,
                                "--metrics", b_metrics], np=np)
        self.assertEqual(h.step_files(b_dir), ["step-00000003.h5"])
        result = h.train(RUN + layout + ["--steps", "6", "--resume", "auto",
                                         "--checkpoint-dir", b_dir, "--metrics", b_metrics],
                         np=np)
        self.assertIn("resumed from", result.stdout + result.stderr, result.describe())
        return (h.read_metrics(a_metrics), h.read_metrics(b_metrics),
                h.checkpoint_file(a_dir, 6), h.checkpoint_file(b_dir, 6))

    def assert_same_steps(self, a, b, steps, keys=("loss", "grad_norm", "lr")):
        """Exact equality of the JSON values, step by step."""
        for key in keys:
            va, vb = h.by_step(a, key), h.by_step(b, key)
            for s in steps:
                self.assertIn(s, va, f"step {s} missing from the first metrics file")
                self.assertIn(s, vb, f"step {s} missing from the second metrics file")
                self.assertEqual(va[s], vb[s], f"{key} at step {s}: {va[s]!r} vs {vb[s]!r}")

    def assert_bit_exact_resume(self, np, layout):
        a, b, a_file, b_file = self.straight_and_resumed(np, layout)
        # B's file was appended on resume: steps 1..6 once each.
        self.assertEqual([m["step"] for m in h.step_lines(b)], [1, 2, 3, 4, 5, 6])
        self.assert_same_steps(a, b, range(1, 7))
        h.assert_checkpoints_identical(self, a_file, b_file)
        return a

    # ---- bit for bit in the same layout

    def test_resume_bit_exact_1rank(self):
        a = self.assert_bit_exact_resume(1, [])
        self.assert_same_steps(a, self.ref, range(1, 7))  # and the same as the reference

    def test_resume_bit_exact_tp2(self):
        a = self.assert_bit_exact_resume(2, ["--tp", "2"])
        for s in range(1, 7):  # tp 2 follows the serial run to float32 rounding
            h.assert_close(self, h.by_step(a, "loss")[s], h.by_step(self.ref, "loss")[s], 1e-5,
                           f"tp 2 loss at step {s} vs 1 rank")

    def test_resume_bit_exact_dp2(self):
        a = self.assert_bit_exact_resume(2, [])
        for s in range(1, 7):
            h.assert_close(self, h.by_step(a, "loss")[s], h.by_step(self.ref, "loss")[s], 1e-5,
                           f"dp 2 loss at step {s} vs 1 rank")

    def test_resume_bit_exact_dp2_distributed_optimizer(self):
        """ZeRO-1: each dp rank writes its shard of the optimizer state into the full datasets
        and reads its shard back, so the continuation is still exact."""
        a = self.assert_bit_exact_resume(2, ["--distributed-optimizer", "--dp-bucket-size",
                                             "5000"])
        for s in range(1, 7):
            h.assert_close(self, h.by_step(a, "loss")[s], h.by_step(self.ref, "loss")[s], 1e-5,
                           f"dp 2 distributed-optimizer loss at step {s} vs 1 rank")

    # ---- another layout

    def test_resume_in_another_layout(self):
        """Saved at tp 2 on 2 ranks at step 3, resumed at 1 rank to step 6."""
        ck, metrics = self.path("ck"), self.path("m.jsonl")
        h.train(RUN + ["--tp", "2", "--steps", "3", "--checkpoint-dir", ck,
                       "--metrics", metrics], np=2)
        result = h.train(RUN + ["--steps", "6", "--resume", "auto", "--checkpoint-dir", ck,
                                "--metrics", metrics])
        self.assertIn("step-00000003.h5", result.stdout + result.stderr, result.describe())
        got, ref = h.by_step(h.read_metrics(metrics), "loss"), h.by_step(self.ref, "loss")
        self.assertEqual(sorted(got), [1, 2, 3, 4, 5, 6])
        for s in range(1, 7):
            h.assert_close(self, got[s], ref[s], 1e-5, f"loss at step {s}")
        attrs = h.load_checkpoint_attrs(h.checkpoint_file(ck, 6))
        self.assertEqual(int(attrs["step"]), 6)
        self.assertEqual(int(attrs["consumed_samples"]), 6 * 8)

    def test_resume_from_1rank_at_dp2(self):
        """The reference's step-3 file (1 rank) resumed at dp 2: same curve to rounding."""
        ck, metrics = self.path("ck"), self.path("m.jsonl")
        os.makedirs(ck)
        shutil.copy(h.checkpoint_file(self.ref_dir, 3), ck)
        h.train(RUN + ["--steps", "6", "--resume", h.checkpoint_file(ck, 3),
                       "--checkpoint-dir", ck, "--metrics", metrics], np=2)
        got, ref = h.by_step(h.read_metrics(metrics), "loss"), h.by_step(self.ref, "loss")
        self.assertEqual(sorted(got), [4, 5, 6])
        for s in range(4, 7):
            h.assert_close(self, got[s], ref[s], 1e-5, f"loss at step {s}")

    # ---- --resume auto, --keep-last, --steps 0, --init-from

    def test_resume_auto_without_checkpoint_starts_fresh(self):
        ck, metrics = self.path("empty-dir"), self.path("m.jsonl")
        result = h.train(RUN + ["--steps", "2", "--resume", "auto", "--checkpoint-dir", ck,
                                "--metrics", metrics])
        self.assertIn("starting fresh", result.stdout + result.stderr, result.describe())
        got = h.read_metrics(metrics)
        self.assertEqual([m["step"] for m in h.step_lines(got)], [1, 2])
        self.assert_same_steps(got, self.ref, [1, 2])
        self.assertEqual(h.step_files(ck), ["step-00000002.h5"])

    def test_resume_auto_refuses_when_no_checkpoint_is_valid(self):
        """Checkpoint files that all fail to load are not trained over (nor deleted by
        --keep-last): one error line naming each, and the folder left as it was."""
        ck = self.path("all-invalid")
        os.makedirs(ck)
        shutil.copy(h.checkpoint_file(self.ref_dir, 6), ck)
        corrupt_dataset(h.checkpoint_file(ck, 6))
        with open(os.path.join(ck, "step-00000007.h5"), "w") as f:
            f.write("not a checkpoint\n")
        before = sorted(os.listdir(ck))
        result = h.train(RUN + ["--steps", "8", "--resume", "auto", "--keep-last", "1",
                                "--checkpoint-dir", ck], check=False)
        self.assertNotEqual(result.returncode, 0, result.describe())
        errors = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
        self.assertEqual(len(errors), 1, result.describe())
        for name in ("step-00000006.h5", "step-00000007.h5", "none is valid"):
            self.assertIn(name, errors[0], result.describe())
        self.assertEqual(sorted(os.listdir(ck)), before, "the folder was changed")

    def test_resume_auto_past_a_bad_latest_and_leftover_temporaries(self):
        """`latest` naming a missing file, or not a file name at all: a warning naming it, and
        the newest valid step file is taken. Temporaries of a killed write are removed."""
        for latest in ("step-00000009.h5", "../elsewhere/step-00000003.h5"):
            ck, metrics = self.path("bad-latest"), self.path("m.jsonl")
            shutil.rmtree(ck, ignore_errors=True)
            os.makedirs(ck)
            shutil.copy(h.checkpoint_file(self.ref_dir, 3), ck)
            with open(os.path.join(ck, "latest"), "w") as f:
                f.write(latest + "\n")
            leftovers = ["step-00000005.h5.tmp", "latest.tmp"]
            for name in leftovers:
                with open(os.path.join(ck, name), "w") as f:
                    f.write("partial\n")
            result = h.train(RUN + ["--steps", "6", "--resume", "auto", "--checkpoint-dir", ck,
                                    "--metrics", metrics])
            warnings = [l for l in result.stderr.splitlines() if l.startswith("warning: ")]
            self.assertTrue(any(latest in l for l in warnings), result.describe())
            self.assertIn("resumed from " + h.checkpoint_file(ck, 3), result.stdout,
                          result.describe())
            self.assert_same_steps(h.read_metrics(metrics), self.ref, range(4, 7))
            for name in leftovers:
                self.assertFalse(os.path.exists(os.path.join(ck, name)), name + " left behind")
                self.assertIn("removed " + name, result.stdout, result.describe())

    def test_kill_during_checkpoint_writes(self):
        """kill -9 while a checkpoint is being written (its .tmp exists), at three moments: every
        step file left is complete, --resume auto takes the newest, the partial file is never
        taken for a checkpoint, and the next run removes it, and the folder's .lock and the
        watchdog's heartbeats the kills left. The model is large enough (about 40 MB a
        checkpoint) that a write takes measurable time."""
        model = RUN + ["--n-layer", "4", "--n-head", "8", "--d-model", "256", "--seq-len", "64",
                       "--global-batch-size", "4", "--micro-batch-size", "4", "--save-every", "1",
                       "--keep-last", "2"]
        ck = self.path("killed")
        run = model + ["--steps", "40", "--resume", "auto", "--checkpoint-dir", ck]
        for delay in (0.0, 0.01, 0.05):
            proc = subprocess.Popen(h.command("train", h.with_tiny(run)), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                before = set(h.step_files(ck)) if os.path.isdir(ck) else set()
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and proc.poll() is None:
                    temps = [f for f in os.listdir(ck) if f.endswith(".h5.tmp")] \
                        if os.path.isdir(ck) else []
                    if temps and set(h.step_files(ck)) != before:
                        break  # a write in progress, after this run's first checkpoint
                    time.sleep(0.001)
                self.assertIsNone(proc.poll(), "the run ended before it could be killed")
                time.sleep(delay)
            finally:
                h.kill_group(proc)
                proc.communicate()
            files = h.step_files(ck)
            self.assertTrue(files, "no checkpoint survived")
            for name in files:
                attrs = h.load_checkpoint_attrs(os.path.join(ck, name))
                self.assertEqual(attrs.get("complete"), 1, name + " is not complete")
        metrics = self.path("m.jsonl")
        newest = h.step_files(ck)[-1]
        # What the kills left of the folder's lock and the watchdog's heartbeats (a killed 4-rank
        # job leaves a file per rank), which the next run cleans: it kept them once.
        self.assertTrue(os.path.exists(os.path.join(ck, ".lock")))
        with open(os.path.join(ck, ".watchdog", "rank-00003.json"), "w") as f:
            f.write("{}\n")
        result = h.train(run + ["--metrics", metrics], timeout=120)
        self.assertIn("resumed from " + os.path.join(ck, newest), result.stdout, result.describe())
        self.assertRegex(result.stdout, r"removed [12] heartbeat file\(s\) in .*\.watchdog")
        self.assertEqual([f for f in os.listdir(ck) if f.endswith(".tmp")], [])
        self.assertEqual([f for f in os.listdir(ck) if f in (".lock", ".watchdog")], [])
        self.assertEqual(h.step_lines(h.read_metrics(metrics))[-1]["step"], 40)

    def test_keep_last(self):
        ck = self.path("ck")
        h.train(RUN + ["--steps", "5", "--save-every", "1", "--keep-last", "2",
                       "--checkpoint-dir", ck])
        self.assertEqual(h.step_files(ck), ["step-00000004.h5", "step-00000005.h5"])
        self.assertEqual(h.read_latest(ck), "step-00000005.h5")
        leftovers = [f for f in os.listdir(ck)
                     if f not in ("latest", ".lock", "step-00000004.h5", "step-00000005.h5")]
        self.assertEqual(leftovers, [], "temporary files left in the checkpoint folder")

    def test_resume_auto_skips_corrupt_newest(self):
        ck, metrics = self.path("ck"), self.path("m.jsonl")
        h.train(RUN + ["--steps", "4", "--save-every", "2", "--checkpoint-dir", ck])
        self.assertEqual(h.step_files(ck), ["step-00000002.h5", "step-00000004.h5"])
        corrupt_dataset(h.checkpoint_file(ck, 4))
        result = h.train(RUN + ["--steps", "6", "--resume", "auto", "--checkpoint-dir", ck,
                                "--metrics", metrics])
        warnings = [l for l in result.stderr.splitlines() if l.startswith("warning: ")]
        self.assertTrue(any("step-00000004.h5" in l for l in warnings),
                        "expected a warning about the skipped step-4 file\n" + result.describe())
        self.assertIn("step-00000002.h5", result.stdout, result.describe())
        got = h.read_metrics(metrics)
        self.assertEqual([m["step"] for m in h.step_lines(got)], [3, 4, 5, 6])
        self.assert_same_steps(got, self.ref, range(3, 7))
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, 6),
                                       h.checkpoint_file(self.ref_dir, 6))

    def test_resume_file_explicit(self):
        """--resume FILE (not auto) from the reference's step-3 file, into another folder."""
        ck, metrics = self.path("ck"), self.path("m.jsonl")
        h.train(RUN + ["--steps", "6", "--resume", h.checkpoint_file(self.ref_dir, 3),
                       "--checkpoint-dir", ck, "--metrics", metrics])
        got = h.read_metrics(metrics)
        self.assertEqual([m["step"] for m in h.step_lines(got)], [4, 5, 6])
        self.assert_same_steps(got, self.ref, range(4, 7))
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, 6),
                                       h.checkpoint_file(self.ref_dir, 6))

    def test_resume_at_final_step_trains_nothing(self):
        ck = self.path("ck")
        os.makedirs(ck)
        shutil.copy(h.checkpoint_file(self.ref_dir, 6), ck)
        result = h.train(RUN + ["--steps", "6", "--resume", "auto", "--checkpoint-dir", ck])
        self.assertEqual(h.step_files(ck), ["step-00000006.h5"], result.describe())

    def test_steps_zero_writes_initial_checkpoint(self):
        ck = self.path("ck")
        h.train(RUN + ["--steps", "0", "--checkpoint-dir", ck])
        self.assertEqual(h.step_files(ck), ["step-00000000.h5"])
        self.assertEqual(h.read_latest(ck), "step-00000000.h5")
        ckpt = h.load_checkpoint(h.checkpoint_file(ck, 0))
        self.assertEqual(int(ckpt["attrs"]["complete"]), 1)
        self.assertEqual(int(ckpt["attrs"]["step"]), 0)
        self.assertEqual(int(ckpt["attrs"]["consumed_samples"]), 0)
        self.assertIn("/model/wte", ckpt["data"])
        self.assertEqual(ckpt["data"]["/model/wte"].shape, (256, 32))
        # The initial weights: LayerNorm weight 1, biases 0.
        self.assertTrue((ckpt["data"]["/model/ln_f.weight"] == 1).all())
        self.assertTrue((ckpt["data"]["/model/h.0.attn.c_attn.bias"] == 0).all())

    def test_init_from(self):
        """Weights only: starts at step 1 with fresh optimizer state and counters."""
        src = h.checkpoint_file(self.ref_dir, 6)
        ck0 = self.path("ck0")
        h.train(RUN + ["--steps", "0", "--init-from", src, "--checkpoint-dir", ck0])
        init = h.load_checkpoint(h.checkpoint_file(ck0, 0))
        ref = h.load_checkpoint(src)
        import numpy as np
        model = [n for n in ref["data"] if n.startswith("/model/")]
        self.assertTrue(model)
        for name in model:
            self.assertTrue(np.array_equal(init["data"][name], ref["data"][name]),
                            f"--init-from did not load {name}")

        ck, metrics = self.path("ck"), self.path("m.jsonl")
        result = h.train(RUN + ["--steps", "2", "--init-from", src, "--checkpoint-dir", ck,
                                "--metrics", metrics])
        got = h.read_metrics(metrics)
        self.assertEqual([m["step"] for m in h.step_lines(got)], [1, 2], result.describe())
        self.assertEqual(h.step_files(ck), ["step-00000002.h5"])
        final = h.load_checkpoint(h.checkpoint_file(ck, 2))
        self.assertEqual(int(final["optimizer_attrs"]["step"]), 2)
        self.assertEqual(int(final["attrs"]["step"]), 2)
        self.assertEqual(int(final["attrs"]["consumed_samples"]), 2 * 8)
        # Trained weights: the step-1 loss is below the fresh run's, with the same samples.
        self.assertLess(h.by_step(got, "loss")[1], h.by_step(self.ref, "loss")[1])
        # lr restarts with the schedule: step 1 of the warm-up again.
        self.assertEqual(h.by_step(got, "lr")[1], h.by_step(self.ref, "lr")[1])

    def test_init_from_with_resume_auto_requeues_a_fine_tune(self):
        """One command, as the Slurm template runs it (it adds --resume auto): --init-from X
        starts the fine-tune in an empty folder, and after an interruption the same command
        continues the folder's checkpoint, bit for bit (once the two options were refused
        together). --resume FILE with --init-from is still refused."""
        src = h.checkpoint_file(self.ref_dir, 6)
        ck = self.path("ck")
        command = RUN + ["--init-from", src, "--resume", "auto", "--steps", "4", "--save-every",
                         "2", "--seq-len", "8", "--seed", "99", "--checkpoint-dir", ck]
        r = h.train(command)
        self.assertIn("starting from --init-from", r.stdout, r.describe())
        straight = self.path("straight-4.h5")
        shutil.move(h.checkpoint_file(ck, 4), straight)
        with open(os.path.join(ck, "latest"), "w") as f:
            f.write("step-00000002.h5\n")
        r = h.train(command)
        self.assertIn("--resume auto: continuing", r.stdout, r.describe())
        self.assertIn("resumed from", r.stdout, r.describe())
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, 4), straight)
        r = h.train(RUN + ["--init-from", src, "--resume", src, "--checkpoint-dir",
                           self.path("ck2")], check=False)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("--resume FILE and --init-from exclude each other", r.stderr)

    # ---- resume keeps the run

    def test_resume_auto_keeps_the_run_options(self):
        """A run with non-default batch, schedule, optimizer, eval, save, log and metrics options,
        resumed with --resume auto and nothing else (as a requeued Slurm job is), continues with
        the checkpoint's options: the final checkpoint equals the uninterrupted run's bit for
        bit, checkpoints come every --save-every steps, log lines every --log-every, and the
        metrics go on in the run's file (once the last three were dropped silently). Metrics
        lines written after the checkpoint (a run that died after it) are superseded: one line
        per step."""
        run = ["--global-batch-size", "16", "--micro-batch-size", "8", "--lr", "0.004",
               "--min-lr", "0.0004", "--warmup-steps", "2", "--weight-decay", "0.05",
               "--beta2", "0.99", "--grad-clip", "0.5", "--eval-every", "3", "--eval-windows",
               "4", "--data-order", "sequential", "--seed", "77", "--log-every", "2"]
        ck, metrics = self.path("ck"), self.path("m.jsonl")
        h.train(run + ["--steps", "7", "--save-every", "3", "--checkpoint-dir", ck,
                       "--metrics", metrics])
        straight = h.read_metrics(metrics)
        final = self.path("straight-7.h5")
        shutil.move(h.checkpoint_file(ck, 7), final)
        os.remove(h.checkpoint_file(ck, 6))
        with open(os.path.join(ck, "latest"), "w") as f:
            f.write("step-00000003.h5\n")
        # Only --resume auto and the folder.
        r = h.run("train", ["--resume", "auto", "--checkpoint-dir", ck, "--threads", "1"],
                  check=True)
        self.assertNotIn("(checkpoint:", r.stdout, r.describe())
        self.assertIn("lines past step 3 superseded", r.stdout, r.describe())
        self.assertIn("steps 4..7", r.stdout, r.describe())
        logged = [int(line.split()[1].split("/")[0]) for line in r.stdout.splitlines()
                  if line.startswith("step ") and "| loss" in line]
        self.assertEqual(logged, [4, 6, 7], r.describe())
        self.assertEqual(h.step_files(ck), ["step-00000003.h5", "step-00000006.h5",
                                            "step-00000007.h5"])
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, 7), final)
        got = h.read_metrics(metrics)
        self.assertEqual([m["step"] for m in h.step_lines(got)], [1, 2, 3, 4, 5, 6, 7])
        self.assertEqual([m["step"] for m in h.val_lines(got)], [3, 6, 7])
        values = ("step", "loss", "grad_norm", "lr", "val_loss")  # not the timings
        # Memory events carry no step: each run writes its own (docs/MEMORY.md).
        self.assertEqual([{k: m[k] for k in values if k in m} for m in got if "step" in m],
                         [{k: m[k] for k in values if k in m} for m in straight if "step" in m])

    def test_resume_logs_each_given_option_that_differs(self):
        ck = self.path("ck")
        shutil.copytree(self.ref_dir, ck)
        os.remove(h.checkpoint_file(ck, 6))
        with open(os.path.join(ck, "latest"), "w") as f:
            f.write("step-00000003.h5\n")
        r = h.train(RUN + ["--resume", "auto", "--checkpoint-dir", ck, "--steps", "4",
                           "--lr", "0.02"], tiny=False)
        self.assertIn("--steps 4 (checkpoint: 6)", r.stdout, r.describe())
        self.assertIn("--lr 0.02 (checkpoint: 0.01)", r.stdout, r.describe())
        self.assertNotIn("--warmup-steps", r.stdout, r.describe())  # given alike: not logged
        self.assertIn("steps 4..4", r.stdout, r.describe())

    def test_failed_metrics_write_is_an_error(self):
        for np in (1, 2):
            with self.subTest(np=np):
                r = h.train(RUN + ["--steps", "3", "--checkpoint-dir", self.path(f"ck{np}"),
                                   "--metrics", "/dev/full"], np=np, check=False)
                self.assertNotEqual(r.returncode, 0, r.describe())
                self.assertIn("error: --metrics /dev/full: cannot write (No space left on device)",
                              r.stderr, r.describe())

    # ---- stop request

    def test_sigterm_and_ctrl_c_checkpoint_and_resume_exactly(self):
        """SIGTERM to the process, and SIGINT to its process group (what Ctrl-C in a terminal
        does), after the first metrics line: the signal is acknowledged at once, then exit 3, a
        checkpoint at the step reached, and resuming it gives the uninterrupted run bit for bit."""
        steps = 200
        # A bigger batch: each step takes tens of milliseconds, so the signal lands early.
        run = RUN + ["--global-batch-size", "64", "--micro-batch-size", "8"]
        for name, send in (("SIGTERM", lambda pid: os.kill(pid, signal.SIGTERM)),
                           ("SIGINT", lambda pid: os.killpg(pid, signal.SIGINT))):
            with self.subTest(signal=name):
                ck, metrics = self.path(name, "ck"), self.path(name, "m.jsonl")
                os.makedirs(self.path(name))
                cmd = h.command("train", h.with_tiny(run + ["--steps", steps, "--checkpoint-dir",
                                                         ck, "--metrics", metrics]))
                returncode, out, err = self.signal_after_first_step(cmd, metrics, send)
                reached = self.assert_stopped(returncode, out, err, metrics, ck, steps,
                                              "exit code after " + name)
                self.assertIn(name + ": stopping after this step with a checkpoint", out)
                self.assertEqual(h.read_latest(ck), f"step-{reached:08d}.h5")
                attrs = h.load_checkpoint_attrs(h.checkpoint_file(ck, reached))
                self.assertEqual(int(attrs["complete"]), 1)
                self.assertEqual(int(attrs["step"]), reached)
                self.assert_resume_continues_exactly(run, steps, ck, metrics, np=1)

    def test_second_ctrl_c_quits_at_once(self):
        """Ctrl-C twice: the second quits at once with exit 130 and no checkpoint. Steps of about
        a third of a second leave time to send it before the stop completes; a run that still
        beat it (exit 3) is tried again."""
        run = RUN + ["--global-batch-size", "4096", "--micro-batch-size", "64"]
        for attempt in range(3):
            ck = self.path(f"ck{attempt}")
            cmd = h.command("train", h.with_tiny(run + ["--steps", 100, "--checkpoint-dir", ck]))
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True)
            try:
                # The watcher is running once the trainer says what it trains.
                self.read_until(proc, "training ")
                os.killpg(proc.pid, signal.SIGINT)
                self.read_until(proc, "SIGINT: stopping after this step")
                os.killpg(proc.pid, signal.SIGINT)
                out, err = proc.communicate(timeout=60)
            except BaseException:
                h.kill_group(proc)
                proc.communicate()
                raise
            if proc.returncode == STOP_EXIT_CODE:
                continue
            why = f"\n--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{err[-3000:]}"
            self.assertEqual(proc.returncode, 130, why)
            self.assertIn("error: interrupted again: quitting without a checkpoint", err, why)
            self.assertEqual(h.step_files(ck), [], why)
            return
        self.fail("every run finished its stop before the second Ctrl-C arrived")

    def test_sigusr1_to_one_rank_stops_all(self):
        """At dp 2, SIGUSR1 (what Slurm sends before a time limit) to rank 1 alone: the ranks
        agree at the step boundary, checkpoint, and all exit 3; resuming continues exactly."""
        steps = 60
        run = RUN + ["--global-batch-size", "64", "--micro-batch-size", "8"]
        ck, metrics = self.path("ck"), self.path("m.jsonl")
        # Each rank records its pid, then becomes the program (exec keeps the pid).
        wrapper = 'echo $$ > "$GPT_PID_DIR/pid.$OMPI_COMM_WORLD_RANK"; exec "$0" "$@"'
        cmd = ([h.MPIEXEC] + h.MPIEXEC_FLAGS + ["-x", "GPT_PID_DIR", "-n", "2",
                                                "/bin/sh", "-c", wrapper, h.binary("train")]
               + h.on_cpu_unless_named("train", h.with_tiny(run + ["--steps", steps,
                                                                   "--checkpoint-dir", ck,
                                                                   "--metrics", metrics])))
        env = dict(os.environ, GPT_PID_DIR=self.tmp)
        pid_file = self.path("pid.1")

        def to_rank_1(_):
            with open(pid_file) as f:
                os.kill(int(f.read().strip()), signal.SIGUSR1)

        returncode, out, err = self.signal_after_first_step(
            cmd, metrics, to_rank_1, env=env,
            ready=lambda: os.path.exists(pid_file) and os.path.getsize(pid_file) > 0)
        self.assert_stopped(returncode, out, err, metrics, ck, steps, "mpiexec's exit code")
        self.assert_resume_continues_exactly(run, steps, ck, metrics, np=2)

    def test_sigterm_and_ctrl_c_to_mpiexec_checkpoint_at_once(self):
        """At dp 2 under a plain `mpiexec -n 2 train`, with the grace the project's set-up
        installs (odls_base_sigkill_timeout 5, scripts/install_deps.sh): SIGTERM to mpiexec's pid,
        and SIGINT to its process group (Ctrl-C). Open MPI forwards neither; mpiexec sends the
        ranks SIGCONT at once, SIGTERM T s later, SIGKILL T s after that, shows no output of the
        ranks meanwhile, and exits 1 whatever they do (docs/OPERATIONS.md). The ranks take its
        SIGCONT as the stop request: rank 0 says so on mpiexec's own stderr at once, the ranks
        write a complete checkpoint, and resuming it continues exactly."""
        env = {k: v for k, v in os.environ.items() if k != "OMPI_MCA_odls_base_sigkill_timeout"}
        info = subprocess.run(["ompi_info", "--param", "odls", "base", "--level", "9",
                               "--parsable"], capture_output=True, text=True, env=env).stdout
        self.assertIn("odls_base_sigkill_timeout:value:5", info,
                      "the grace scripts/install_deps.sh installs is not set: run it")
        run = ["--lr", "0.01", "--min-lr", "0.001", "--warmup-steps", "20000", "--seed", "4321",
               "--global-batch-size", "64", "--micro-batch-size", "8"]
        stopped = []
        for name, send in (("SIGTERM", lambda pid: os.kill(pid, signal.SIGTERM)),
                           ("SIGINT", lambda pid: os.killpg(pid, signal.SIGINT))):
            os.makedirs(self.path(name))
            ck, metrics = self.path(name, "ck"), self.path(name, "m.jsonl")
            cmd = ([h.MPIEXEC] + h.MPIEXEC_FLAGS + ["-n", "2", h.binary("train")]
                   + h.on_cpu_unless_named("train", h.with_tiny(
                       run + ["--log-every", "100", "--steps", 20000, "--checkpoint-dir", ck,
                              "--metrics", metrics])))
            lines = []  # (seconds after the signal, stderr line)
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, start_new_session=True, env=env)
            try:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not has_step_line(metrics):
                    time.sleep(0.005)
                self.assertIsNone(proc.poll(), "the run ended before it could be stopped")
                start = time.monotonic()
                reader = threading.Thread(target=lambda: lines.extend(
                    (time.monotonic() - start, line) for line in proc.stderr))
                reader.start()
                send(proc.pid)
                out = proc.stdout.read()
                proc.wait(timeout=60)
                ended = time.monotonic() - start
                reader.join(timeout=10)
            except BaseException:
                h.kill_group(proc)
                proc.communicate()
                raise
            err = "".join(line for _, line in lines)
            why = f"{name}\n--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{err[-3000:]}"
            self.assertEqual(proc.returncode, 1, "Open MPI's mpiexec after " + why)
            reached = max(m["step"] for m in h.step_lines(h.read_metrics(metrics)))
            said = {line.strip(): at for at, line in lines}
            notice = ("mpiexec is ending the job (its SIGCONT: it was sent SIGTERM or Ctrl-C): "
                      "stopping after this step with a checkpoint")
            written = f"stop requested: checkpoint written at step {reached}; resume with --resume auto"
            self.assertIn(notice, said, why)
            self.assertIn(written, said, why)
            # At once: seconds before mpiexec ends (it waits out 2T = 10 s).
            self.assertLess(said[written], 3.0, why)
            self.assertGreater(ended, said[written] + 3.0, why)
            self.assertEqual(h.step_files(ck), [f"step-{reached:08d}.h5"], why)
            self.assertEqual(h.read_latest(ck), f"step-{reached:08d}.h5", why)
            attrs = h.load_checkpoint_attrs(h.checkpoint_file(ck, reached))
            self.assertEqual(int(attrs["complete"]), 1, why)
            stopped.append((ck, metrics, reached))
        # Both resumed to the same step, so that one reference serves.
        end = max(reached for _, _, reached in stopped) + 3
        for ck, metrics, _ in stopped:
            self.assert_resume_continues_exactly(run, end, ck, metrics, np=2)

    # ---- helpers of the stop tests

    def signal_after_first_step(self, cmd, metrics, send, env=None, ready=lambda: True):
        """Starts cmd in a session of its own, waits (60 s at most) for its first step's metrics
        line and for ready(), calls send(pid) and waits for the end; returns (exit code, stdout,
        stderr). The run must still be going when signalled. (A signal before the first step,
        after start-up's memory lines, would end the run at once without a checkpoint.)"""
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True, env=env)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                if has_step_line(metrics) and ready():
                    break
                time.sleep(0.005)
            self.assertIsNone(proc.poll(), "the run ended before it could be stopped")
            send(proc.pid)
            out, err = proc.communicate(timeout=60)
        except BaseException:
            h.kill_group(proc)
            proc.communicate()
            raise
        return proc.returncode, out, err

    def read_until(self, proc, text):
        """Reads proc's stdout up to a line containing text (the run is killed by the caller if
        it never comes: readline returns "" at its end)."""
        while True:
            line = proc.stdout.readline()
            self.assertNotEqual(line, "", f"the run ended before printing {text!r}")
            if text in line:
                return

    def assert_stopped(self, returncode, out, err, metrics, ck, steps, what):
        """A stopped run: exit code 3, before its last step, with exactly the checkpoint of the
        step it reached. Returns that step."""
        why = f"\n--- stdout ---\n{out[-3000:]}\n--- stderr ---\n{err[-3000:]}"
        self.assertEqual(returncode, STOP_EXIT_CODE, what + why)
        reached = max(m["step"] for m in h.step_lines(h.read_metrics(metrics)))
        self.assertLess(reached, steps, why)
        self.assertEqual(h.step_files(ck), [f"step-{reached:08d}.h5"], why)
        return reached

    def assert_resume_continues_exactly(self, run, steps, ck, metrics, np):
        """Resumes the stopped run to `steps` and compares it with the run that never stopped
        (same --steps): every step's metrics and the final checkpoint, bit for bit. The
        reference is trained once per test (the stop tests resume two runs alike)."""
        h.train(run + ["--steps", steps, "--resume", "auto", "--checkpoint-dir", ck,
                       "--metrics", metrics], np=np, timeout=90)
        ref_ck, ref_metrics = self.path("ref"), self.path("ref.jsonl")
        if not os.path.exists(ref_metrics):
            h.train(run + ["--steps", steps, "--checkpoint-dir", ref_ck,
                           "--metrics", ref_metrics], np=np, timeout=90)
        got, ref = h.read_metrics(metrics), h.read_metrics(ref_metrics)
        self.assertEqual(sorted(h.by_step(got, "loss")), list(range(1, steps + 1)))
        self.assert_same_steps(got, ref, range(1, steps + 1))
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, steps),
                                       h.checkpoint_file(ref_ck, steps))


if __name__ == "__main__":
    h.main()
