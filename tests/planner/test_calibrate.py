"""`plan --calibrate` end to end (docs/PLANNER.md, "Calibrating a CPU cluster"): two ranks measure
this machine on a tiny budget and a tiny model, the written file is a CPU cluster that
`plan --cluster FILE` reads back and prices a layout with (memory on the CPU backend, ranks
beyond the cores allowed), and a cluster file cut to one line is one error line, exit code 1.
The figures themselves are not checked: a shared machine measures what it measures.

Run: /usr/bin/python3 test_calibrate.py --bin BUILD/bin --mpiexec MPIEXEC --mpiexec-flags=FLAGS
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import unittest

ARGS = None
MODEL = ["--n-layer", "2", "--n-head", "2", "--d-model", "32", "--seq-len", "16",
         "--vocab-size", "256"]
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMP_NUM_THREADS="1")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=50, env=ENV)


class CalibrateTest(unittest.TestCase):
    def test_calibrated_file_parses_and_prices(self):
        plan = os.path.join(ARGS.bin, "plan")
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "cpu.ini")
            proc = run([ARGS.mpiexec] + ARGS.mpiexec_flags.split() +
                       ["-n", "2", plan, "--calibrate", path, "--calibrate-seconds", "2"] + MODEL)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("calibrate: wrote", proc.stdout)
            with open(path) as f:
                text = f.read()
            for key in ("[cpu]", "cores =", "gemm_curve =", "forward_scale =", "[intra_node]"):
                self.assertIn(key, text)
            proc = run([plan, "--cluster", path, "--ranks", "4", "--tp", "2", "--pp", "2",
                        "--global-batch-size", "4", "--json"] + MODEL)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            row = json.loads(proc.stdout.splitlines()[0])
            self.assertGreater(row["step_time_s"], 0)
            self.assertGreater(row["memory_bytes"]["activations"], 0)

            with open(path, "w") as f:
                f.write(text.splitlines()[0] + "\n[gpu]\npeak_fp32_tflops = x\n")
            proc = run([plan, "--cluster", path])
            self.assertEqual(proc.returncode, 1)
            lines = proc.stderr.strip().splitlines()
            self.assertEqual(len(lines), 1, proc.stderr)
            self.assertTrue(lines[0].startswith("error: "), lines[0])
            self.assertIn(path, lines[0])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--mpiexec", default="mpiexec")
    parser.add_argument("--mpiexec-flags", default="--oversubscribe --bind-to none")
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest)
