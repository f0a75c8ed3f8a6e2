"""--help of every program, and train's --config file (docs/DESIGN.md "Programs"): `train --help`
exits 0 and lists every contract option with its default; an INI-style --config file sets
options, and the command line wins over it (checked through the checkpoint's config attribute,
its root attributes and the metrics file).

Run: /usr/bin/python3 test_help_and_config.py --bin BUILD/bin [--mpiexec PATH ...]
"""

import json
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt_harness as h  # noqa: E402

# docs/DESIGN.md "Programs": these names are a contract.
CONTRACT_OPTIONS = """
tp pp dp schedule virtual-stages micro-batch-size global-batch-size n-layer n-head d-model
seq-len model data val-data data-order eval-every eval-windows steps optimizer lr min-lr
warmup-steps weight-decay beta1 beta2 eps momentum grad-clip seed device precision
checkpoint-dir save-every keep-last resume init-from metrics trace log-every comm-timeout config
""".split()
# Options whose default is the empty string (off / not given / built-in corpus): Boost prints no
# "(=...)" for an empty default, so these are only required to be listed.
NO_DEFAULT = {"config", "model", "data", "val-data", "resume", "init-from", "metrics", "trace"}


def option_line(help_text, name):
    """The help line that introduces --name (Boost prints '  --name arg (=default)  text')."""
    pattern = re.compile(r"^\s+(?:-\w \[ )?--" + re.escape(name) + r"(?:\s|\]|$)")
    for line in help_text.splitlines():
        if pattern.match(line):
            return line
    return None


class HelpTest(unittest.TestCase):

    def test_train_help_lists_contract_options_with_defaults(self):
        result = h.run("train", ["--help"], timeout=30)
        self.assertEqual(result.returncode, 0, result.describe())
        missing, no_default = [], []
        for name in CONTRACT_OPTIONS:
            line = option_line(result.stdout, name)
            if line is None:
                missing.append("--" + name)
            elif name not in NO_DEFAULT and "(=" not in line:
                no_default.append(line.strip())
        self.assertEqual(missing, [], "options missing from train --help\n" + result.stdout)
        self.assertEqual(no_default, [], "options shown without a default\n" + result.stdout)
        self.assertIsNotNone(option_line(result.stdout, "help"), result.stdout)
        self.assertNotIn("error", result.stderr.lower(), result.describe())

    def test_train_help_values(self):
        """A few defaults the design fixes: checkpoint-dir 'checkpoints', grid sizes 1."""
        out = h.run("train", ["--help"], timeout=30, check=True).stdout
        self.assertIn("(=checkpoints)", option_line(out, "checkpoint-dir"))
        self.assertIn("(=1)", option_line(out, "tp"))
        self.assertIn("(=1)", option_line(out, "pp"))
        self.assertIn("(=1f1b)", option_line(out, "schedule"))
        # It trains the Llama family too (--arch llama): the first line says so, not GPT-2 alone.
        self.assertIn("GPT-2 and Llama-family", out.splitlines()[0])

    def test_train_help_at_two_ranks_prints_once(self):
        result = h.run("train", ["--help"], np=2, timeout=60)
        self.assertEqual(result.returncode, 0, result.describe())
        self.assertEqual(result.stdout.count("--global-batch-size"), 1,
                         "help printed once per rank?\n" + result.describe())

    def test_tool_help(self):
        expect = {
            "eval": ["--checkpoint", "--data", "--eval-windows"],
            "generate": ["--checkpoint", "--prompt", "--max-new-tokens", "--temperature",
                         "--top-k", "--seed"],
            "prepare-data": ["--input", "--output", "--val-fraction"],
        }
        for program, names in expect.items():
            with self.subTest(program=program):
                result = h.run(program, ["--help"], timeout=30)
                self.assertEqual(result.returncode, 0, result.describe())
                for name in names:
                    self.assertIsNotNone(option_line(result.stdout, name[2:]),
                                         f"{program} --help lacks {name}\n{result.stdout}")
                self.assertEqual(result.stderr.strip(), "", result.describe())


class ConfigTest(h.TempDirTest):

    def test_option_given_twice_takes_the_last_value(self):
        """Wrapper scripts append overrides: the last of a repeated option wins, on the command
        line and in a config file."""
        config = self.path("twice.ini")
        with open(config, "w") as f:
            f.write("seed = 5\nseed = 6\n")
        ckdir = self.path("ck")
        h.train(["--config", config, "--steps", "3", "--lr", "0.1", "--steps", "1",
                 "--lr", "0.002", "--checkpoint-dir", ckdir])
        self.assertEqual(h.step_files(ckdir), ["step-00000001.h5"])
        cfg = h.config_of(h.checkpoint_file(ckdir, 1))
        self.assertEqual((cfg["steps"], cfg["lr"], cfg["seed"]), (1, 0.002, 6), cfg)

    def test_config_sets_options_and_command_line_wins(self):
        config = self.path("run.ini")
        with open(config, "w") as f:
            f.write("# a comment line\n"
                    "steps = 3\n"
                    "lr = 0.005\n"
                    "seed = 77\n"
                    "warmup-steps = 2\n"
                    "weight-decay = 0.05\n"
                    "data-order = sequential\n")
        ckdir, metrics = self.path("ck"), self.path("m.jsonl")
        # --lr and --steps given again on the command line: those win.
        h.train(["--config", config, "--lr", "0.002", "--steps", "2",
                 "--checkpoint-dir", ckdir, "--metrics", metrics])
        self.assertEqual(h.step_files(ckdir), ["step-00000002.h5"],
                         "--steps 2 from the command line should win over steps = 3")
        path = h.checkpoint_file(ckdir, 2)
        cfg = h.config_of(path)
        attrs = h.load_checkpoint_attrs(path)
        self.assertEqual(cfg["lr"], 0.002, f"command line --lr should win: {cfg}")
        self.assertEqual(cfg["steps"], 2, cfg)
        self.assertEqual(cfg["seed"], 77, f"seed from the config file: {cfg}")
        self.assertEqual(int(attrs["seed"]), 77)
        self.assertEqual(cfg["warmup_steps"], 2, cfg)
        self.assertEqual(cfg["weight_decay"], 0.05, cfg)
        self.assertEqual(cfg["data_order"], "sequential", cfg)
        # From the command line's --model tiny, untouched by the file.
        self.assertEqual((cfg["n_layer"], cfg["n_head"], cfg["d_model"], cfg["seq_len"]),
                         (2, 4, 32, 16), cfg)
        steps = h.step_lines(h.read_metrics(metrics))
        self.assertEqual([m["step"] for m in steps], [1, 2])
        # warm-up of 2 from the file, peak 0.002 from the command line: lr(1) = 0.002 * 1/2.
        h.assert_close(self, steps[0]["lr"], 0.001, 1e-6, "lr at step 1")
        h.assert_close(self, steps[1]["lr"], 0.002, 1e-6, "lr at step 2")

    def test_config_sets_model_shape(self):
        config = self.path("model.ini")
        with open(config, "w") as f:
            f.write("n-layer = 1\nd-model = 16\nn-head = 2\nseq-len = 8\nsteps = 1\n")
        ckdir = self.path("ck")
        # Without --model tiny, so the shape comes from the file alone.
        result = h.train(["--config", config, "--checkpoint-dir", ckdir, "--threads", "1",
                          "--eval-every", "0"], tiny=False, check=False, timeout=60)
        self.assertEqual(result.returncode, 0, result.describe())
        cfg = h.config_of(h.checkpoint_file(ckdir, 1))
        self.assertEqual((cfg["n_layer"], cfg["n_head"], cfg["d_model"], cfg["seq_len"]),
                         (1, 2, 16, 8), cfg)


if __name__ == "__main__":
    h.main()
