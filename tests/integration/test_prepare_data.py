"""prepare-data round trip (DESIGN.md "Data"): a text file -> PREFIX.train.h5 and PREFIX.val.h5
with byte tokens (train the first part, validation the last --val-fraction), vocab_size 256,
tokenizer "bytes", read back with h5py; then train on them with --data/--val-data, resume, and
eval the checkpoint on the validation file.

Run: /usr/bin/python3 test_prepare_data.py --bin BUILD/bin [--mpiexec PATH ...]
"""

import os
import re
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402


def sample_text():
    # Some structure, some UTF-8 (multi-byte) and control bytes, a few thousand bytes.
    lines = [f"line {i}: the quick brown fox jumps over {i * 7 % 13} lazy dogs; café ünï ✓\t\n"
             for i in range(80)]
    return "".join(lines).encode("utf-8") + bytes([0, 1, 255, 128, 10])


class PrepareDataTest(h.TempDirTest):

    def read(self, path):
        import h5py
        import numpy as np
        with h5py.File(path, "r") as f:
            tokens = f["tokens"]
            self.assertEqual(tokens.ndim, 1)
            self.assertIn(tokens.dtype, (np.dtype("uint16"), np.dtype("uint32")))
            attrs = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
            return np.array(tokens[()]), attrs

    def prepare(self, data, val_fraction=None):
        text = self.path("input.txt")
        with open(text, "wb") as f:
            f.write(data)
        prefix = self.path("corpus")
        args = ["--input", text, "--output", prefix]
        if val_fraction is not None:
            args += ["--val-fraction", val_fraction]
        result = h.run("prepare-data", args, check=True, timeout=30)
        return prefix, result

    def check_split(self, data, val_fraction):
        prefix, result = self.prepare(data, val_fraction)
        train, train_attrs = self.read(prefix + ".train.h5")
        val, val_attrs = self.read(prefix + ".val.h5")
        n = len(data)
        fraction = 0.1 if val_fraction is None else val_fraction
        self.assertLessEqual(abs(len(val) - n * fraction), 1.0,
                             f"{len(val)} validation tokens of {n} for fraction {fraction}")
        self.assertEqual(len(train) + len(val), n)
        self.assertEqual(train.tolist(), list(data[:len(train)]), "train = the first bytes")
        self.assertEqual(val.tolist(), list(data[len(train):]), "val = the last bytes")
        for attrs in (train_attrs, val_attrs):
            self.assertEqual(int(attrs["vocab_size"]), 256)
            self.assertEqual(attrs["tokenizer"], "bytes")
        return prefix, result

    def test_round_trip_default_fraction(self):
        prefix, result = self.check_split(sample_text(), None)
        self.assertEqual(result.stderr.strip(), "", result.describe())
        self.assertFalse([f for f in os.listdir(self.tmp) if f.endswith(".tmp")],
                         "temporary files left behind")

    def test_round_trip_quarter(self):
        self.check_split(sample_text(), 0.25)

    def test_train_on_prepared_data(self):
        prefix, _ = self.check_split(sample_text(), 0.2)
        train_file, val_file = prefix + ".train.h5", prefix + ".val.h5"
        ck, metrics = self.path("ck"), self.path("m.jsonl")
        common = ["--data", train_file, "--val-data", val_file, "--eval-windows", 4,
                  "--checkpoint-dir", ck, "--metrics", metrics]
        h.train(common + ["--steps", 3, "--eval-every", 3])
        got = h.read_metrics(metrics)
        self.assertEqual([m["step"] for m in h.step_lines(got)], [1, 2, 3])
        self.assertEqual([v["step"] for v in h.val_lines(got)], [3])
        cfg = h.config_of(h.checkpoint_file(ck, 3))
        self.assertEqual(cfg["data"], train_file)
        self.assertEqual(cfg["vocab_size"], 256)
        # Resume takes the data set from the checkpoint (no --data given).
        h.train(["--steps", 4, "--resume", "auto", "--checkpoint-dir", ck, "--metrics",
                 metrics, "--eval-every", 0])
        self.assertEqual(h.step_files(ck)[-1], "step-00000004.h5")
        # eval on the validation file; the checkpoint was trained on --data, so eval needs it.
        result = h.run("eval", ["--checkpoint", h.checkpoint_file(ck, 3), "--data", val_file,
                                "--eval-windows", 4, "--threads", 1], check=True)
        match = re.search(r"loss ([0-9.]+)", result.stdout)
        self.assertIsNotNone(match, result.describe())
        h.assert_close(self, float(match.group(1)), h.val_lines(got)[0]["val_loss"], 1e-5,
                       "eval vs train's val_loss")


if __name__ == "__main__":
    h.main()
