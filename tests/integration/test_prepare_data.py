"""prepare-data round trip (docs/DESIGN.md "Data"): a text file -> PREFIX.train.h5 and PREFIX.val.h5
with byte tokens (train the first part, validation the last --val-fraction), vocab_size 256,
tokenizer "bytes", read back with h5py; then train on them with --data/--val-data, resume, and
eval the checkpoint on the validation file.

Run: /usr/bin/python3 test_prepare_data.py --bin BUILD/bin [--mpiexec PATH ...]
"""

import os
import shutil
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
        # eval takes the validation set the run recorded when --data is not given.
        result = h.run("eval", ["--checkpoint", h.checkpoint_file(ck, 3),
                                "--eval-windows", 4, "--threads", 1], check=True)
        self.assertIn(val_file + ": loss", result.stdout, result.describe())
        match = re.search(r"loss ([0-9.]+)", result.stdout)
        self.assertIsNotNone(match, result.describe())
        h.assert_close(self, float(match.group(1)), h.val_lines(got)[0]["val_loss"], 1e-5,
                       "eval vs train's val_loss")
        # A checkpoint folder, or its `latest`, names the folder's newest valid checkpoint.
        for given in (ck, os.path.join(ck, "latest")):
            result = h.run("eval", ["--checkpoint", given, "--eval-windows", 1, "--threads", 1],
                           check=True)
            self.assertIn("step-00000004.h5 (the newest valid one in", result.stdout,
                          result.describe())


    def test_resume_from_another_directory(self):
        """A run started with relative paths resumes from elsewhere (the checkpoint records the
        absolute paths), takes an equivalent path for --data, and a moved copy of the data by its
        recorded tokens and bytes; other data is still refused."""
        prefix, _ = self.check_split(sample_text(), 0.2)
        work = os.path.dirname(prefix)
        name = os.path.basename(prefix)
        ck = self.path("ck")
        h.train(["--data", name + ".train.h5", "--val-data", name + ".val.h5", "--steps", 1,
                 "--eval-every", 1, "--checkpoint-dir", ck], cwd=work)
        elsewhere = self.path("elsewhere")
        os.makedirs(elsewhere)
        r = h.train(["--resume", "auto", "--checkpoint-dir", ck, "--steps", 2], cwd=elsewhere)
        self.assertIn(f"data: {prefix}.train.h5 (the checkpoint's)", r.stdout, r.describe())
        r = h.train(["--resume", "auto", "--checkpoint-dir", ck, "--steps", 3, "--data",
                     os.path.relpath(prefix + ".train.h5", elsewhere)],
                    cwd=elsewhere)
        moved = os.path.join(elsewhere, "moved.train.h5")
        shutil.copyfile(prefix + ".train.h5", moved)
        r = h.train(["--resume", "auto", "--checkpoint-dir", ck, "--steps", 4, "--data", moved],
                    cwd=elsewhere)
        self.assertIn(f"data: {moved} stands for the recorded {prefix}.train.h5", r.stdout,
                      r.describe())
        r = h.train(["--resume", "auto", "--checkpoint-dir", ck, "--steps", 5, "--data",
                     prefix + ".val.h5"], cwd=elsewhere, check=False)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("does not match the shards recorded", r.stderr, r.describe())


class FromBinTest(h.TempDirTest):
    """prepare-data --from-bin: llm.c shards (256-int32 header, magic 20240520, version 1, then
    uint16 tokens) and nanoGPT's headerless uint16 files become data set shards with the same
    tokens, which train reads as one set; damaged files are one error line each."""

    def write_llmc(self, name, tokens, claimed=None, version=1):
        import numpy as np
        header = np.zeros(256, dtype="<i4")
        header[:3] = [20240520, version, len(tokens) if claimed is None else claimed]
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(header.tobytes() + np.asarray(tokens, dtype="<u2").tobytes())
        return path

    def write_nanogpt(self, name, tokens):
        import numpy as np
        path = self.path(name)
        np.asarray(tokens, dtype="<u2").tofile(path)
        return path

    def read(self, path):
        import h5py
        import numpy as np
        with h5py.File(path, "r") as f:
            return np.array(f["tokens"][()]), dict(f.attrs)

    def test_llmc_and_nanogpt_files_become_shards(self):
        import numpy as np
        rng = np.random.default_rng(11)
        a = rng.integers(0, 50257, 3000)
        b = rng.integers(0, 50257, 2000)
        files = [self.write_llmc("fineweb_train_000001.bin", a), self.write_nanogpt("train.bin", b)]
        out = self.path("shards")
        r = h.run("prepare-data", ["--from-bin"] + files + ["--output", out], check=True)
        self.assertIn("llm.c shard", r.stdout)
        self.assertIn("headerless uint16", r.stdout)
        for name, tokens in (("fineweb_train_000001.h5", a), ("train.h5", b)):
            got, attrs = self.read(os.path.join(out, name))
            self.assertTrue(np.array_equal(got, tokens), name)
            self.assertEqual(int(attrs["vocab_size"]), 50257)
            self.assertEqual(attrs["tokenizer"], "gpt2")
            self.assertEqual(int(attrs["eot"]), 50256)
            self.assertEqual(int(attrs["max_token"]), int(tokens.max()))
        # The two shards train as one set (GPT-2's vocabulary on a tiny model).
        ck = self.path("ck")
        r = h.train(["--data", out, "--steps", "2", "--checkpoint-dir", ck], timeout=120)
        self.assertIn("5000 tokens in 2 shards", r.stdout, r.describe())

    def test_character_level_nanogpt_set_with_its_vocabulary(self):
        import numpy as np
        tokens = np.random.default_rng(2).integers(0, 65, 4000)
        path = self.write_nanogpt("shakespeare_char.bin", tokens)
        out = self.path("chars")
        h.run("prepare-data", ["--from-bin", path, "--output", out, "--vocab-size", "65",
                               "--tokenizer", "nanogpt-char"], check=True)
        got, attrs = self.read(os.path.join(out, "shakespeare_char.h5"))
        self.assertTrue(np.array_equal(got, tokens))
        self.assertEqual((int(attrs["vocab_size"]), attrs["tokenizer"]), (65, "nanogpt-char"))
        self.assertNotIn("eot", attrs)

    def test_damaged_files_are_one_error_each(self):
        good = list(range(100))
        cases = {
            "claims_more": (lambda: self.write_llmc("a.bin", good, claimed=101), [],
                            "claims 101 tokens"),
            "version": (lambda: self.write_llmc("b.bin", good, version=2), [],
                        "llm.c data version 2"),
            "odd_size": (lambda: self.write_bytes("c.bin", b"\x01\x02\x03"), [],
                         "not a whole number of uint16 tokens"),
            "over_vocab": (lambda: self.write_nanogpt("d.bin", [1, 2, 300]),
                           ["--vocab-size", "256", "--tokenizer", "bytes"], "token 300"),
            "missing": (lambda: self.path("none.bin"), [], "no such file"),
            "no_vocab": (lambda: self.write_nanogpt("e.bin", good), ["--tokenizer", "chars"],
                         "needs --vocab-size"),
        }
        for name, (make, extra, expected) in cases.items():
            with self.subTest(case=name):
                path = make()
                out = self.path("out-" + name)
                r = h.run("prepare-data", ["--from-bin", path, "--output", out] + extra)
                self.assertEqual(r.returncode, 1, r.describe())
                errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
                self.assertEqual(len(errors), 1, r.describe())
                self.assertIn(expected, errors[0])
                written = os.listdir(out) if os.path.isdir(out) else []
                self.assertEqual(written, [], "nothing written")

    def write_bytes(self, name, data):
        path = self.path(name)
        with open(path, "wb") as f:
            f.write(data)
        return path


if __name__ == "__main__":
    h.main()
