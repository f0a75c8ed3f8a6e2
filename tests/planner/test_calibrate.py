"""`plan --calibrate` end to end (docs/PLANNER.md, "Calibrating a CPU cluster"): two ranks measure
this machine on a tiny budget and a tiny model, the written file is a CPU cluster that
`plan --cluster FILE` reads back and prices a layout with (memory on the CPU backend, ranks
beyond the cores allowed), and a cluster file cut to one line is one error line, exit code 1.
The figures themselves are not checked (a shared machine measures what it measures), only the
intra-node curves' sizes and their times' order, and the points at which the cost of sharing a
core and the stage's size were measured; then `plan --calibrate-turns` with two ranks a core adds
the cost of meeting while taking turns, and bad input to it is one error line.

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
    return subprocess.run(cmd, capture_output=True, text=True, timeout=100, env=ENV)


class CalibrateTest(unittest.TestCase):
    def grid_points(self, cpu, key):
        """The one `key = MBxAT:SCALE, ...` line of the [cpu] section, and its (MBxAT, scale)."""
        lines = [l for l in cpu.splitlines() if l.startswith(key + " =")]
        self.assertEqual(len(lines), 1, cpu)
        return lines[0], [(p.split(":")[0].strip(), float(p.split(":")[1]))
                          for p in lines[0].split("=", 1)[1].split(",")]

    def check_turns(self, plan, path, cores, step_time):
        """`plan --calibrate-turns` with two ranks a core adds turn_seconds at share 2 for
        micro-batches 1 and 4, keeps the file's comment lines, and the file still prices the
        4-rank layout, no faster (a turn is never below 0). Too few ranks, or a GPU preset, is
        one error line and exit code 1."""
        with open(path) as f:
            first = f.readline()
        launch = [ARGS.mpiexec] + ARGS.mpiexec_flags.split()
        proc = run(launch + ["-n", str(2 * cores), plan, "--calibrate-turns", path,
                             "--calibrate-seconds", "2"] + MODEL)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("calibrate: added turn_seconds", proc.stdout)
        with open(path) as f:
            text = f.read()
        self.assertTrue(text.startswith(first), text[:300])
        self.assertIn("# plan --calibrate-turns: turn_seconds measured with", text)
        line, points = self.grid_points(text.split("[cpu]")[1], "turn_seconds")
        self.assertEqual([key for key, _ in points], ["1x2", "4x2"], line)
        self.assertTrue(all(0 <= seconds < 0.01 for _, seconds in points), line)
        proc = run([plan, "--cluster", path, "--ranks", "4", "--tp", "2", "--pp", "2",
                    "--global-batch-size", "4", "--json"] + MODEL)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        turned = json.loads(proc.stdout.splitlines()[0])["step_time_s"]
        if cores == 2:  # 4 ranks share 2 cores: every meeting pays its turn
            self.assertGreaterEqual(turned, step_time * (1 - 1e-9))
        for ranks, cluster, message in ((cores, path, "needs at least 2 ranks a core"),
                                        (2 * cores, "dgx-h100", "is not a CPU cluster file")):
            proc = run(launch + ["-n", str(ranks), plan, "--calibrate-turns", cluster,
                                 "--calibrate-seconds", "2"] + MODEL)
            self.assertEqual(proc.returncode, 1, proc.stderr)
            errors = [l for l in proc.stderr.splitlines() if l.startswith("error: ")]
            self.assertEqual(len(errors), 1, proc.stderr)  # agreed: rank 0 says it
            self.assertIn(message, errors[0])

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
            # The intra-node link: two measured curves from 8 bytes to 16 MB, each point's time
            # (size over bandwidth) no larger than a larger size's.
            intra = text.split("[intra_node]")[1].split("[")[0]
            for key in ("curve", "one_way_curve"):
                line = [l for l in intra.splitlines() if l.startswith(key + " =")]
                self.assertEqual(len(line), 1, intra)
                points = [tuple(float(x) for x in p.split(":"))
                          for p in line[0].split("=", 1)[1].split(",")]
                self.assertEqual([size for size, _ in points],
                                 [8, 4e3, 32e3, 128e3, 512e3, 2e6, 16e6])
                times = [size / gbs for size, gbs in points]
                for small, large in zip(times, times[1:]):  # 6 printed digits: a size's time
                    self.assertLessEqual(small, large * (1 + 1e-4), line[0])  # may equal the next
                self.assertTrue(all(gbs > 0 for _, gbs in points), line[0])
            # The cost of sharing a core: (micro-batch x ranks a core: scale) at micro-batches 1
            # and 4 and 2, 4 and 8 ranks a core (up to 64 copies of the model on the machine).
            cpu = text.split("[cpu]")[1]
            cores = int([l for l in cpu.splitlines() if l.startswith("cores =")][0].split("=")[1])
            line, points = self.grid_points(cpu, "sharing_scale")
            expected = [f"{mb}x{share}" for mb in (1, 4) for share in (2, 4, 8)
                        if share * cores <= 64]
            self.assertEqual([key for key, _ in points], expected, line)
            self.assertTrue(all(scale > 0 for _, scale in points), line)
            # The stage's size: (micro-batch x layers: scale) for a model of 1 layer at each timed
            # micro-batch, and the whole model's 2 at 1 by definition.
            line, points = self.grid_points(cpu, "stage_scale")
            self.assertEqual([key for key, _ in points],
                             [f"{mb}x{layers}" for mb in (1, 2, 4, 8, 16) for layers in (1, 2)],
                             line)
            self.assertTrue(all(scale > 0 for _, scale in points), line)
            self.assertEqual([scale for key, scale in points if key.endswith("x2")], [1.0] * 5)
            proc = run([plan, "--cluster", path, "--ranks", "4", "--tp", "2", "--pp", "2",
                        "--global-batch-size", "4", "--json"] + MODEL)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            row = json.loads(proc.stdout.splitlines()[0])
            self.assertGreater(row["step_time_s"], 0)
            self.assertGreater(row["memory_bytes"]["activations"], 0)
            # The published-run band is the GPU model's; a calibrated CPU has its own benchmark.
            self.assertNotIn("step_time_validation", row)
            if 2 * cores <= 8:  # two ranks a core: a few processes on a small machine
                self.check_turns(plan, path, cores, row["step_time_s"])

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
