"""Sharded data sets end to end (docs/DESIGN.md "Data", docs/DATA.md): the same tokens as one file
and as shards of uneven sizes (one shard shorter than a window, so windows span three files)
train identically, because sample j's window is a pure function of (seed, j) over the
concatenated shards:
1. a 1-rank run on a directory of shards gives the single-file run's losses, gradient norms,
   validation losses (--val-data as a comma-separated list) and final checkpoint bit for bit,
   and its checkpoints record the resolved shard list (paths and token counts);
2. the step-3 checkpoint of a run on a glob, resumed to step 6, gives the same bit for bit;
3. tp 2, dp 2 and pp 2 on the shards give the 1-rank single-file run within the layout tests'
   tolerances (1e-5 relative);
4. a resume whose glob now matches one more file is a one-line error naming that file.
5. train's peak resident memory (the child's ru_maxrss) on 2M and 40M tokens differs by less
   than 24 MB (loaded whole as int32, the larger set alone took 152 MB more).

Run: /usr/bin/python3 test_shards.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

MODEL = h.with_options(h.EQUIVALENCE_MODEL, eval_every=3) + ["--eval-windows", "8"]
STEPS = 6
CUTS = [0, 20011, 20013, 41000]  # shard starts; the second shard has 2 tokens (T is 16)


def text_tokens(n):
    """n bytes of varied, deterministic text as byte tokens."""
    words = ["alpha", "beta", "gamma", "delta", "shard", "window", "token", "rank", "seed"]
    out, i = bytearray(), 0
    while len(out) < n:
        out += f"{words[i * 7 % 9]} {i * i % 1000} {words[i % 9]}.\n".encode()
        i += 1
    return list(out[:n])


def write_tokens(path, tokens, vocab_size=256):
    import h5py
    import numpy as np
    with h5py.File(path, "w") as f:
        f["tokens"] = np.asarray(tokens, dtype=np.uint16)
        f.attrs["vocab_size"] = vocab_size
        f.attrs["tokenizer"] = "bytes"
        f.attrs["max_token"] = int(max(tokens))


def write_shards(directory, tokens, cuts):
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, start in enumerate(cuts):
        end = cuts[i + 1] if i + 1 < len(cuts) else len(tokens)
        paths.append(os.path.join(directory, f"part-{i:03d}.h5"))
        write_tokens(paths[-1], tokens[start:end])
    return paths



def sample_crc32(path):
    """docs/DATA.md's shard sample: crc32 of 4 KiB at the start, middle and end of the file."""
    import zlib
    size, crc = os.path.getsize(path), 0
    with open(path, "rb") as f:
        for at in (0, max(0, size // 2 - 2048), max(0, size - 4096)):
            f.seek(at)
            crc = zlib.crc32(f.read(4096), crc)
    return crc

class ShardTest(h.TempDirTest, h.WorstDifferences):
    """The data (one file, its shards) and the 1-rank single-file reference are made once."""

    worst = {}

    @classmethod
    def setUpClass(cls):
        cls._ref = tempfile.TemporaryDirectory(prefix="gpt-shards-ref-")
        d = cls.dir = cls._ref.name
        tokens = text_tokens(60000)
        cls.whole = os.path.join(d, "whole.h5")
        write_tokens(cls.whole, tokens)
        cls.shard_dir = os.path.join(d, "shards")
        cls.shards = write_shards(cls.shard_dir, tokens, CUTS)
        cls.sizes = [CUTS[i + 1] - CUTS[i] for i in range(len(CUTS) - 1)] + [60000 - CUTS[-1]]
        val = text_tokens(3000)[::-1]
        cls.val_whole = os.path.join(d, "val.h5")
        write_tokens(cls.val_whole, val)
        cls.val_shards = ",".join(write_shards(os.path.join(d, "val"), val, [0, 100, 1500]))
        cls.ref_dir, cls.ref_metrics = os.path.join(d, "ck"), os.path.join(d, "m.jsonl")
        h.train(MODEL + ["--data", cls.whole, "--val-data", cls.val_whole, "--steps", STEPS,
                         "--checkpoint-dir", cls.ref_dir, "--metrics", cls.ref_metrics],
                tiny=False)
        cls.ref = h.read_metrics(cls.ref_metrics)

    @classmethod
    def tearDownClass(cls):
        cls.report_worst("worst relative differences, shards vs one file")
        cls._ref.cleanup()

    def run_on(self, data, name, np=1, layout=(), steps=STEPS, extra=()):
        ck, metrics = self.path(name), self.path(name + ".jsonl")
        h.train(MODEL + list(layout) + ["--data", data, "--val-data", self.val_shards,
                                        "--steps", steps, "--checkpoint-dir", ck,
                                        "--metrics", metrics] + list(extra), np=np, tiny=False)
        return h.read_metrics(metrics), ck

    def assert_same_as_reference(self, metrics):
        for key in ("loss", "grad_norm"):
            self.assertEqual(h.by_step(metrics, key), h.by_step(self.ref, key), key)
        self.assertEqual([m["val_loss"] for m in h.val_lines(metrics)],
                         [m["val_loss"] for m in h.val_lines(self.ref)])
        self.assertEqual(len(h.val_lines(self.ref)), 2)

    def test_directory_of_shards_is_bit_identical_and_recorded(self):
        metrics, ck = self.run_on(self.shard_dir, "dir")
        self.assert_same_as_reference(metrics)
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, STEPS),
                                       h.checkpoint_file(self.ref_dir, STEPS))
        config = h.config_of(h.checkpoint_file(ck, STEPS))
        self.assertEqual(config["data"], self.shard_dir)
        self.assertEqual(config["data_shards"],
                         [{"path": p, "tokens": n, "bytes": os.path.getsize(p),
                           "sample_crc32": sample_crc32(p)}
                          for p, n in zip(self.shards, self.sizes)])
        self.assertEqual([s["tokens"] for s in config["val_data_shards"]], [100, 1400, 1500])

    def test_resume_on_a_glob_is_bit_identical(self):
        glob = os.path.join(self.shard_dir, "part-*.h5")
        _, first = self.run_on(glob, "a", extra=["--save-every", "3"])
        metrics, ck = self.run_on(glob, "b", extra=["--resume", h.checkpoint_file(first, 3)])
        self.assertEqual(sorted(h.by_step(metrics, "loss")), [4, 5, 6])
        for key in ("loss", "grad_norm"):
            ref = h.by_step(self.ref, key)
            self.assertEqual(h.by_step(metrics, key), {s: ref[s] for s in (4, 5, 6)}, key)
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, STEPS),
                                       h.checkpoint_file(self.ref_dir, STEPS))

    def test_layouts_on_shards_match_the_single_file(self):
        listed = ",".join(self.shards)
        for name, layout in (("tp2", ["--tp", "2"]), ("dp2", []), ("pp2", ["--pp", "2"])):
            with self.subTest(layout=name):
                metrics, _ = self.run_on(listed, name, np=2, layout=layout)
                for key in ("loss", "grad_norm"):
                    got, ref = h.by_step(metrics, key), h.by_step(self.ref, key)
                    for step in range(1, STEPS + 1):
                        rel = abs(got[step] - ref[step]) / abs(ref[step])
                        self.note(key, rel, f"{name} step {step}")
                        self.assertLessEqual(rel, h.CURVE_REL, f"{name} {key} step {step}")

    def test_resume_with_another_shard_is_an_error(self):
        shard_dir = self.path("grows")
        shutil.copytree(self.shard_dir, shard_dir)
        glob = os.path.join(shard_dir, "*.h5")
        self.run_on(glob, "g", steps=3)  # then resumed with --steps 6: only the shards differ
        extra = os.path.join(shard_dir, "part-999.h5")
        shutil.copy(self.shards[0], extra)
        result = h.train(MODEL + ["--data", glob, "--steps", STEPS, "--resume", "auto",
                                  "--checkpoint-dir", self.path("g")], tiny=False, check=False)
        self.assertNotEqual(result.returncode, 0, result.describe())
        errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
        self.assertEqual(len(errors), 1, result.describe())
        self.assertIn(f"extra shard {extra} ({self.sizes[0]} tokens)", errors[0])

    def test_peak_memory_does_not_grow_with_the_data(self):
        peaks = {}
        for millions in (2, 40):
            data = self.path(f"big-{millions}")
            tokens = text_tokens(1 << 20)
            os.makedirs(data)
            for i in range(millions // 2):  # 2M-token shards
                write_tokens(os.path.join(data, f"s{i:03d}.h5"), tokens + tokens)
            peaks[millions] = peak_rss_kb(h.command("train", h.with_tiny(
                ["--data", data, "--steps", "2", "--data-order", "random",
                 "--checkpoint-dir", self.path(f"ck-{millions}")])))
        print(f"\ntrain peak RSS: 2M tokens {peaks[2]} kB, 40M tokens {peaks[40]} kB")
        self.assertLess(peaks[40] - peaks[2], 24 * 1024)


def peak_rss_kb(cmd):
    """The peak resident set of cmd, run in a fresh Python whose only child it is."""
    probe = ("import resource, subprocess, sys\n"
             "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", probe] + cmd, check=True, text=True,
                         capture_output=True, timeout=120)
    return int(out.stdout.strip())


if __name__ == "__main__":
    h.main()
