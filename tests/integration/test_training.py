"""The main job, end to end (docs/DESIGN.md "Data", "Programs", "Testing"): train on the built-in
arithmetic corpus with the default model and watch the loss fall; the metrics file's fields;
eval of the final checkpoint agrees with the last validation loss; generate is deterministic and
continues the prompt, its KV cache gives the full window's tokens, and a seed samples alike in
every layout; and the same short run at 2 ranks (dp 2, and tp 2) gives the 1-rank losses
to float32 rounding.

Run: /usr/bin/python3 test_training.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import math
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

# The default model (no --model): 4 layers, d_model 128, seq_len 64; a smaller batch for time.
DEFAULT_MODEL = ["--global-batch-size", "16", "--micro-batch-size", "8", "--threads", "1"]
STEPS, EVAL_EVERY, EVAL_WINDOWS = 60, 30, 32
# Calibrated: the first step's loss is ~5.5 (ln 256 = 5.55), the last 10 steps' mean ~2.4 after
# 60 steps. A model that does not learn stays near 5.5; 2 nats is robust and still demanding.
MIN_DROP = 2.0
STEP_FIELDS = ["step", "loss", "lr", "grad_norm", "tokens_per_s", "step_time_s", "compute_s",
               "tp_comm_s", "dp_comm_s", "pp_wait_s", "time", "elapsed_s"]
CORPUS_BYTES = set(b"0123456789+=\n")
SHORT_STEPS = 3


class TrainingTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="gpt-training-")
        cls.dir = cls._tmp.name
        cls.ck = os.path.join(cls.dir, "ck")
        cls.metrics_path = os.path.join(cls.dir, "m.jsonl")
        cls.result = h.train(DEFAULT_MODEL + [
            "--steps", STEPS, "--eval-every", EVAL_EVERY, "--eval-windows", EVAL_WINDOWS,
            "--log-every", 10, "--checkpoint-dir", cls.ck, "--metrics", cls.metrics_path],
            tiny=False, timeout=110)
        cls.metrics = h.read_metrics(cls.metrics_path)
        cls.final = h.checkpoint_file(cls.ck, STEPS)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_loss_falls(self):
        losses = h.by_step(self.metrics, "loss")
        self.assertEqual(sorted(losses), list(range(1, STEPS + 1)))
        first = losses[1]
        last10 = sum(losses[s] for s in range(STEPS - 9, STEPS + 1)) / 10
        self.assertGreater(first, 5.0, "the first loss should be near ln(256) = 5.55")
        self.assertLess(last10, first - MIN_DROP,
                        f"the loss did not fall enough: step 1 {first:.4f}, last 10 steps' "
                        f"mean {last10:.4f} (expected at least {MIN_DROP} nats lower)")
        self.assertTrue(all(math.isfinite(v) for v in losses.values()))

    def test_validation_lines(self):
        vals = h.val_lines(self.metrics)
        self.assertEqual([v["step"] for v in vals], [EVAL_EVERY, STEPS], vals)
        for v in vals:
            self.assertNotIn("loss", v, "a validation line has no 'loss'")
            self.assertTrue(math.isfinite(v["val_loss"]))
        losses = h.by_step(self.metrics, "loss")
        self.assertLess(vals[-1]["val_loss"], losses[1] - MIN_DROP + 0.5,
                        "validation loss did not fall with the training loss")

    def test_metrics_fields(self):
        steps = h.step_lines(self.metrics)
        for line in steps:
            for field in STEP_FIELDS:
                self.assertIn(field, line, f"step line lacks {field}: {line}")
                self.assertIsInstance(line[field], (int, float), f"{field} in {line}")
                self.assertTrue(math.isfinite(line[field]), f"{field} in {line}")
            self.assertGreater(line["tokens_per_s"], 0)
            self.assertGreater(line["step_time_s"], 0)
            self.assertGreaterEqual(line["compute_s"], 0)
            for field in ("tp_comm_s", "dp_comm_s", "pp_wait_s"):
                self.assertGreaterEqual(line[field], 0, f"{field} in {line}")
            self.assertLessEqual(line["compute_s"], line["step_time_s"] * (1 + 1e-9))
            self.assertGreater(line["lr"], 0)
            self.assertGreater(line["grad_norm"], 0)

    def test_log_lines(self):
        """One log line per --log-every steps (and the last), in 120 columns: the loss and its
        mean since the last line, elapsed time and ETA; every metrics line has the time."""
        lines = [l for l in self.result.stdout.splitlines() if re.match(r"^step\s+\d+/", l)]
        self.assertEqual(len(lines), STEPS // 10, self.result.stdout)
        for line in lines:
            self.assertLessEqual(len(line), 120, line)
        losses = h.by_step(self.metrics, "loss")
        mean = sum(losses[s] for s in range(STEPS - 9, STEPS + 1)) / 10
        self.assertIn(f"(avg {mean:.4f})", lines[-1])
        for piece in ("loss", "lr", "gnorm", "tok/s", "elapsed", "ETA 0:00"):
            self.assertIn(piece, lines[-1])
        times = [m["time"] for m in self.metrics]
        self.assertEqual(times, sorted(times))
        self.assertLess(abs(times[-1] - time.time()), 3600)

    def test_plot_metrics(self):
        """scripts/plot_metrics.py draws the run's metrics: SVG with its panels, and PNG."""
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                              "plot_metrics.py")
        for ext in ("svg", "png"):
            out = os.path.join(self.dir, "metrics." + ext)
            subprocess.run([sys.executable, script, self.metrics_path, "-o", out], check=True,
                           capture_output=True, timeout=120)
            with open(out, "rb") as f:
                data = f.read()
            if ext == "png":
                self.assertTrue(data.startswith(b"\x89PNG"), "a PNG file")
                continue
            text = data.decode()
            for piece in ("train loss", "validation loss", "learning rate", "tokens/s",
                          "step time split", "pipeline wait"):
                self.assertIn(piece, text)
        # Steps without a line are a gap, not a line across it (it once was one): a break
        # (NaN) between 3 and 10 of lines every step, none in lines every 10 steps ending at 35.
        import importlib.util
        spec = importlib.util.spec_from_file_location("plot_metrics", script)
        plot = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(plot)
        steps = [1, 2, 3, 10, 11, 12]
        xs, ys = plot.with_gaps(steps, [5.0] * 6, plot.missing_stretches(steps))
        self.assertEqual([x != x for x in xs], [False] * 3 + [True] + [False] * 3)
        self.assertEqual(plot.missing_stretches([10, 20, 30, 35]), [])
        # A validation line across the gap is broken too.
        vx, _ = plot.with_gaps([2, 12], [4.0, 3.0], plot.missing_stretches(steps))
        self.assertEqual(len(vx), 3)

    def test_final_checkpoint(self):
        attrs = h.load_checkpoint_attrs(self.final)
        self.assertEqual(int(attrs["complete"]), 1)
        self.assertEqual(int(attrs["step"]), STEPS)
        self.assertEqual(int(attrs["consumed_samples"]), STEPS * 16)
        self.assertEqual(attrs["tokenizer"], "bytes")
        self.assertEqual(h.read_latest(self.ck), os.path.basename(self.final))
        import h5py
        with h5py.File(self.final, "r") as f:  # docs/FORMATS.md's recipe gives the stored value
            self.assertEqual(h.metadata_crc32(f), int(attrs["metadata_crc32"]))

    def test_eval_matches_last_validation(self):
        result = h.run("eval", ["--checkpoint", self.final, "--eval-windows", EVAL_WINDOWS,
                                "--threads", 1], check=True)
        match = re.search(r"loss ([0-9.]+)", result.stdout)
        self.assertIsNotNone(match, result.describe())
        last_val = h.val_lines(self.metrics)[-1]["val_loss"]
        h.assert_close(self, float(match.group(1)), last_val, 1e-5,
                       "eval loss vs the last val_loss")
        self.assertIn(f"{EVAL_WINDOWS} windows", result.stdout)
        # In a tp 2 layout, to rounding.
        result = h.run("eval", ["--checkpoint", self.final, "--eval-windows", EVAL_WINDOWS,
                                "--threads", 1, "--tp", 2], np=2, check=True)
        match = re.search(r"loss ([0-9.]+)", result.stdout)
        self.assertIsNotNone(match, result.describe())
        h.assert_close(self, float(match.group(1)), last_val, 1e-5, "eval at tp 2")
        # And at dp 2 (2 ranks, tp 1): the windows split over the replicas.
        result = h.run("eval", ["--checkpoint", self.final, "--eval-windows", EVAL_WINDOWS,
                                "--threads", 1], np=2, check=True)
        match = re.search(r"loss ([0-9.]+)", result.stdout)
        self.assertIsNotNone(match, result.describe())
        h.assert_close(self, float(match.group(1)), last_val, 1e-5, "eval at dp 2")

    def generate(self, args, np=1):
        return h.run("generate", ["--checkpoint", self.final, "--threads", 1] + args, np=np,
                     check=True).stdout

    def test_generate_greedy_is_deterministic(self):
        prompt = "123+456="
        args = ["--prompt", prompt, "--temperature", 0, "--max-new-tokens", 24]
        first, second = self.generate(args), self.generate(args)
        self.assertEqual(first, second, "greedy generation differs between two runs")
        self.assertTrue(first.startswith(prompt), repr(first))
        continuation = first[len(prompt):].encode()
        self.assertGreaterEqual(len(continuation), 24)
        self.assertTrue(set(continuation) <= CORPUS_BYTES,
                        f"a trained model should write the corpus' characters: {first!r}")
        self.assertEqual(self.generate(args, np=2), first, "greedy generation at tp 2")

    def test_generate_sampling_is_seeded(self):
        args = ["--prompt", "7+8=", "--temperature", 1.0, "--top-k", 5, "--seed", 11,
                "--max-new-tokens", 16]
        first = self.generate(args)
        self.assertEqual(first, self.generate(args), "same seed, different samples")
        self.assertTrue(first.startswith("7+8="))

    def test_generate_top_p_nucleus_of_one_is_greedy(self):
        base = ["--prompt", "123+4", "--max-new-tokens", 12]
        greedy = self.generate(base + ["--temperature", 0])
        self.assertEqual(self.generate(base + ["--temperature", 1.0, "--top-p", 1e-9]), greedy)
        # top-p 1 is plain sampling: the same draws give the same text.
        sampled = base + ["--temperature", 1.5, "--seed", 3]
        self.assertEqual(self.generate(sampled + ["--top-p", 1]), self.generate(sampled))

    def test_generate_num_samples(self):
        args = ["--prompt", "1", "--temperature", 2.0, "--seed", 5, "--max-new-tokens", 16]
        many = self.generate(args + ["--num-samples", 3])
        parts = re.split(r"--- sample \d ---\n", many)
        self.assertEqual(parts[0], "", many)
        samples = parts[1:]
        self.assertEqual(len(samples), 3, many)
        self.assertEqual(samples[0], self.generate(args), "sample 1 is the single sample")
        self.assertGreater(len(set(samples)), 1, f"three samples alike: {many!r}")
        self.assertEqual(self.generate(args + ["--num-samples", 3], np=2), many, "at tp 2")

    def test_generate_prompt_from_file_and_as_ids(self):
        args = ["--temperature", 0, "--max-new-tokens", 10]
        want = self.generate(args + ["--prompt", "12+34="])
        path = os.path.join(self.dir, "prompt.txt")
        with open(path, "w") as f:
            f.write("12+34=")
        self.assertEqual(self.generate(args + ["--prompt-file", path]), want)
        ids = ",".join(str(b) for b in b"12+34=")
        self.assertEqual(self.generate(args + ["--prompt-tokens", ids]), want)

    def test_generate_stops_at_end_of_text(self):
        """generate ends a continuation at the tokenizer's end of text (GPT-2's <|endoftext|>,
        which prepare-data puts between the documents of a .jsonl), adding no text for it, unless
        --ignore-eos: a tiny model trained on documents "hello world" learns that <|endoftext|>
        follows them."""
        work = tempfile.mkdtemp(dir=self.dir)
        docs = os.path.join(work, "docs.jsonl")
        with open(docs, "w") as f:
            f.write('{"text": "hello world"}\n' * 3000)
        h.run("prepare-data", ["--input", docs, "--output", os.path.join(work, "d"),
                               "--tokenizer", "gpt2"], check=True)
        ck = os.path.join(work, "ck")
        h.train(["--data", os.path.join(work, "d.train.h5"), "--steps", 200, "--lr", 1e-2,
                 "--warmup-steps", 2, "--checkpoint-dir", ck])
        args = ["--checkpoint", ck, "--prompt", "hello world", "--temperature", 0,
                "--max-new-tokens", 6, "--threads", 1]
        stopped = h.run("generate", args, check=True).stdout.splitlines()[-1]
        self.assertEqual(stopped, "hello world")
        more = h.run("generate", args + ["--ignore-eos"], check=True).stdout.splitlines()[-1]
        self.assertTrue(more.startswith("hello world") and "hello world" in more[11:], repr(more))

    def test_generate_kv_cache_gives_the_full_window_tokens(self):
        """Decoding over cached keys and values gives the tokens of re-running the window, also
        past seq_len (64), where each token re-prefills the last window."""
        args = ["--prompt", "12+34=46\n5", "--temperature", 0, "--max-new-tokens", 64]
        cached = self.generate(args)
        self.assertEqual(cached, self.generate(args + ["--no-kv-cache"]))
        self.assertGreater(len(cached), 64 + 1, repr(cached))

    def test_generate_sampled_alike_in_every_layout(self):
        """The same seed gives the same sampled text at 1 rank, tp 2, pp 2 and tp 2 x pp 2 (each
        tp rank caches its heads, each stage its blocks)."""
        args = ["--prompt", "7+8=", "--temperature", 1.0, "--seed", 21, "--max-new-tokens", 40]
        want = self.generate(args)
        for np, layout in ((2, []), (2, ["--pp", 2]), (4, ["--pp", 2])):
            with self.subTest(np=np, layout=layout):
                self.assertEqual(self.generate(args + layout, np=np), want)

    def short_run(self, name, np, layout):
        """The run's metrics; its log has the time split (--log-detail), checked here."""
        metrics = os.path.join(self.dir, name + ".jsonl")
        result = h.train(DEFAULT_MODEL + layout + [
            "--steps", SHORT_STEPS, "--eval-every", 0, "--log-detail",
            "--checkpoint-dir", os.path.join(self.dir, name), "--metrics", metrics],
            np=np, tiny=False, timeout=90)
        last = [l for l in result.stdout.splitlines() if l.startswith(f"step {SHORT_STEPS}/")]
        for piece in ("GFLOP/s", "compute", "tp", "dp", "pp wait", "caches"):
            self.assertIn(piece, last[-1])
        return h.read_metrics(metrics)

    def test_same_losses_at_two_ranks(self):
        serial = self.short_run("serial", 1, [])
        # The warm-up (50 steps by default) makes the first steps' lr independent of --steps:
        # the short run is the long one's beginning, bit for bit.
        for key in ("loss", "grad_norm"):
            for s in range(1, SHORT_STEPS + 1):
                self.assertEqual(h.by_step(serial, key)[s], h.by_step(self.metrics, key)[s],
                                 f"{key} at step {s}: short vs long run")
        for name, layout in (("dp2", []), ("tp2", ["--tp", 2])):
            with self.subTest(layout=name):
                got = self.short_run(name, 2, layout)
                for key in ("loss", "grad_norm"):
                    for s in range(1, SHORT_STEPS + 1):
                        h.assert_close(self, h.by_step(got, key)[s], h.by_step(serial, key)[s],
                                       1e-5, f"{name}: {key} at step {s}")
                comm = "dp_comm_s" if name == "dp2" else "tp_comm_s"
                self.assertGreater(sum(m[comm] for m in h.step_lines(got)), 0,
                                   f"{name}: {comm} should count the communication")


if __name__ == "__main__":
    h.main()
