"""plan's command line (docs/PLANNER.md): the JSON fields of every layout, fixed options staying
fixed, the line saying why the best won, plan --serve's table and JSON, and bad input (a layout that cannot divide the model, an
unknown preset, a malformed cluster file, a bad option value) ending with exactly one
"error: ..." line naming the option or file, exit code 1, and no crash.

Run: /usr/bin/python3 test_plan_cli.py --bin BUILD/bin
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

BIN = None
MPIEXEC = "mpiexec"
TIMEOUT = 60
FIELDS = ("tp pp dp schedule virtual_stages pipeline_layers micro_batch_size microbatches sequence_parallel "
          "recompute distributed_optimizer precision fits memory_bytes step_time_s "
          "tokens_per_s_per_gpu model_tflops_per_gpu mfu compute_s tp_comm_exposed_s "
          "pp_comm_exposed_s dp_comm_exposed_s bubble_s").split()
MEMORY = "weights grads optimizer activations comm workspace total".split()
SMALL = ["--model", "gpt2", "--global-batch-size", "32", "--cluster", "dgx-a100"]


def plan(*args):
    proc = subprocess.run([os.path.join(BIN, "plan")] + list(args), capture_output=True,
                          text=True, timeout=TIMEOUT,
                          env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    return proc.returncode, proc.stdout, proc.stderr


class PlanOutputTest(unittest.TestCase):
    def test_json_has_every_field_and_fixed_options_stay_fixed(self):
        code, out, err = plan(*SMALL, "--nodes", "2", "--tp", "4", "--json")
        self.assertEqual(code, 0, err)
        rows = [json.loads(line) for line in out.splitlines()]
        self.assertGreater(len(rows), 10)
        for row in rows:
            for field in FIELDS:
                self.assertIn(field, row)
            for part in MEMORY:
                self.assertIn(part, row["memory_bytes"])
            self.assertEqual(row["tp"], 4)
            self.assertEqual(row["tp"] * row["pp"] * row["dp"], 16)
            # A GPU cluster's prediction carries the published-run check's error band, which
            # covers Megatron's regime only: this project's own rows are predictions.
            band = row["step_time_validation"]
            self.assertEqual(band["regime"], "megatron-mixed")
            self.assertEqual(row["step_time_validated"], row["precision"] == "megatron-mixed")
            self.assertGreaterEqual(band["published_runs"], 20)
            self.assertLessEqual(band["mean_abs_error"], 0.10)
            self.assertLess(band["lowest_error"], 0)
            self.assertGreater(band["highest_error"], 0)
        times = [r["step_time_s"] for r in rows if r["fits"]]
        self.assertEqual(times, sorted(times))
        # Left out, the schedule and recomputation were enumerated.
        self.assertGreater(len({r["schedule"] for r in rows}), 1)
        self.assertEqual({r["recompute"] for r in rows}, {"none", "selective", "full"})

    def test_pipeline_layers_are_priced_as_given(self):
        """--pipeline-layers fixes the split (and pp x v): every row has it, its command carries
        it, and on GPT-2 at pp 4, where the last stage also holds the head over 50257 tokens,
        2,4,4,2 is priced faster than the even 3,3,3,3, and auto's split at least as fast as
        both; left out, the layout is priced at even and at auto's split, auto first."""
        fixed = [*SMALL, "--nodes", "1", "--tp", "1", "--pp", "4", "--schedule", "1f1b",
                 "--micro-batch-size", "4", "--recompute", "none", "--precision", "bf16",
                 "--sequence-parallel=false", "--distributed-optimizer=false", "--json"]
        step = {}
        for split in ("even", "2,4,4,2"):
            code, out, err = plan(*fixed, "--pipeline-layers", split)
            self.assertEqual(code, 0, err)
            rows = [json.loads(line) for line in out.splitlines()]
            self.assertEqual(len(rows), 1, out)
            self.assertEqual(rows[0]["pipeline_layers"], split)
            self.assertEqual("--pipeline-layers 2,4,4,2" in rows[0]["commands"]["mpirun"],
                             split != "even")
            step[split] = rows[0]["step_time_s"]
        self.assertLess(step["2,4,4,2"], step["even"])
        code, out, err = plan(*fixed, "--pipeline-layers", "auto")
        self.assertEqual(code, 0, err)
        rows = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(rows), 1, out)
        chosen = rows[0]["pipeline_layers"]
        self.assertNotIn(chosen, ("even", "3,3,3,3"))
        self.assertIn("--pipeline-layers " + chosen, rows[0]["commands"]["mpirun"])
        self.assertLessEqual(rows[0]["step_time_s"], step["2,4,4,2"])
        code, out, err = plan(*fixed)
        self.assertEqual(code, 0, err)
        rows = [json.loads(line) for line in out.splitlines()]
        self.assertEqual([r["pipeline_layers"] for r in rows], [chosen, "even"])
        code, out, err = plan(*SMALL, "--nodes", "1", "--pipeline-layers", "2,4,4,2", "--json")
        self.assertEqual(code, 0, err)
        for row in map(json.loads, out.splitlines()):
            self.assertEqual(row["pp"] * row["virtual_stages"], 4, row)

    def test_best_layout_runs_as_printed(self):
        """The printed command lines: --json carries them for every layout, and train accepts
        the best one's options as they are (its memory report, on as many ranks), for GPT-2 and
        for the Llama family (whose architecture options the command carries)."""
        for model in ("tiny", "llama-tiny"):
            with self.subTest(model=model):
                self.check_best_layout_runs(model)

    def check_best_layout_runs(self, model):
        with tempfile.TemporaryDirectory() as tmp:
            cluster = os.path.join(tmp, "two.ini")
            with open(cluster, "w") as f:
                f.write("base = dgx-h100\nname = two\ngpus_per_node = 2\n")
            args = ["--cluster", cluster, "--nodes", "1", "--model", model,
                    "--global-batch-size", "8", "--precision", "fp32"]
            code, out, err = plan(*args, "--json")
            self.assertEqual(code, 0, err)
            best = json.loads(out.splitlines()[0])
            mpirun = best["commands"]["mpirun"]
            self.assertTrue(mpirun.startswith("mpirun -np 2 --map-by ppr:2:node build/bin/train "))
            self.assertIn(f"--tp {best['tp']} --pp {best['pp']}", mpirun)
            self.assertEqual("--arch llama" in mpirun, model == "llama-tiny", mpirun)
            self.assertTrue(best["commands"]["sbatch"].startswith(
                "sbatch --nodes=1 --ntasks-per-node=2 --gpus-per-task=1 "
                "launch/programs/slurm/train.sbatch "))
            code, text, err = plan(*args)
            self.assertIn("run the best (add --data and the run's own options):\n  " + mpirun,
                          text)
            options = mpirun.split(" build/bin/train ")[1].split()
            proc = subprocess.run(
                [MPIEXEC, "--oversubscribe", "-n", "2", os.path.join(BIN, "train")] + options +
                ["--memory-report", "--device", "cpu", "--threads", "1"],
                capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp,
                env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                         OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("predicted memory per rank", proc.stdout)

    def test_planner_md_example_is_the_output(self):
        """docs/PLANNER.md's example of plan's output is what plan prints."""
        root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
        with open(os.path.join(root, "docs", "PLANNER.md")) as f:
            text = f.read()
        block = text.split("\n$ plan ", 1)[1].split("\n```", 1)[0].splitlines()
        proc = subprocess.run([os.path.join(BIN, "plan")] + block[0].split(), cwd=root,
                              capture_output=True, text=True, timeout=TIMEOUT,
                              env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1",
                                       OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.splitlines(), block[1:],
                         "update docs/PLANNER.md's example to plan's output")

    def test_table_names_the_decisive_term(self):
        code, out, err = plan(*SMALL, "--nodes", "1", "--tp", "2", "--pp", "2",
                              "--micro-batch-size", "4", "--recompute", "none")
        self.assertEqual(code, 0, err)
        self.assertIn("rank", out)
        self.assertRegex(out, r"why: .* decided by (compute|exposed tp communication|"
                              r"exposed pp communication|exposed dp communication|"
                              r"pipeline bubble)")
        # On GPUs selective recomputation repeats nothing (the fused attention keeps no
        # probabilities): it ties with none, and the reason line says so.
        code, out, err = plan(*SMALL, "--nodes", "1", "--tp", "2", "--pp", "2",
                              "--micro-batch-size", "4", "--sequence-parallel=false",
                              "--distributed-optimizer=false", "--precision", "bf16",
                              "--pipeline-layers", "even", "--schedule", "1f1b")
        self.assertEqual(code, 0, err)
        self.assertIn("recompute none bf16; runner-up: tp 2 pp 2 dp 2 1f1b mb 4 recompute "
                      "selective bf16\nwhy: the same predicted step as the runner-up", out)

    def test_megatron_regime_is_named(self):
        code, out, err = plan(*SMALL, "--tp", "4", "--precision", "megatron-mixed")
        self.assertEqual(code, 0, err)
        self.assertIn("precision megatron-mixed: Megatron-LM's mixed precision", out)
        # The published-run check's band is said to be of that regime's rows; the table of
        # this project's own regimes says its step times are predictions the check does not
        # cover (once one "validated on 22 published runs" line sat above either).
        self.assertIn("step times of the megatron-mixed rows (Megatron-LM's regime) checked "
                      "against 22 published A100 runs", out)
        self.assertNotIn("fp32 and bf16 rows", out)
        code, out, err = plan(*SMALL, "--tp", "4", "--precision", "bf16")
        self.assertEqual(code, 0, err)
        self.assertIn("step times of the fp32 and bf16 rows: predictions for this project's own "
                      "kernels on GPUs, not checked against measured GPU runs", out)
        self.assertNotIn("megatron-mixed rows", out)

    def test_memory_in_gb_and_a_headroom(self):
        """Memory in GB (1e9 bytes), as train prints it (plan printed GiB); --memory-headroom
        takes its GB from the GPU's memory before a layout fits."""
        fixed = [*SMALL, "--nodes", "1", "--tp", "1", "--pp", "1", "--micro-batch-size", "4",
                 "--recompute", "none", "--precision", "fp32", "--distributed-optimizer=false"]
        code, out, err = plan(*fixed, "--json")
        self.assertEqual(code, 0, err)
        row = json.loads(out.splitlines()[0])
        total = row["memory_bytes"]["total"]
        self.assertTrue(row["fits"], row)
        code, out, err = plan(*fixed)
        self.assertEqual(code, 0, err)
        self.assertIn("mem GB", out)
        self.assertIn(f"{total / 1e9:8.2f}", out)
        headroom = 80 - total / 1e9 + 1  # leaves 1 GB less than the layout needs
        code, out, err = plan(*fixed, "--memory-headroom", str(headroom), "--json")
        self.assertEqual(code, 0, err)
        self.assertFalse(json.loads(out.splitlines()[0])["fits"])
        code, out, err = plan(*fixed, "--memory-headroom", str(headroom))
        self.assertIn(f"GB less {headroom:g} GB of --memory-headroom", out)


SERVE = ["--serve", "--model", "gpt2", "--cluster", "dgx-h100"]
SERVE_FIELDS = ("tp pp gpus weight_bytes_per_gpu max_sequences fits ttft_s tpot_s "
                "throughput").split()


class PlanServeTest(unittest.TestCase):
    def test_json_has_every_field_and_every_concurrency(self):
        code, out, err = plan(*SERVE, "--concurrency", "1,8,4096", "--json")
        self.assertEqual(code, 0, err)
        rows = [json.loads(line) for line in out.splitlines()]
        # GPT-2's 12 heads and 12 layers: tp and pp in {1, 2, 4}, tp x pp at most 8.
        self.assertEqual(sorted((r["tp"], r["pp"]) for r in rows),
                         [(1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2)])
        for row in rows:
            for field in SERVE_FIELDS:
                self.assertIn(field, row)
            self.assertEqual([t["concurrency"] for t in row["throughput"]], [1, 8, 4096])
            self.assertTrue(row["fits"])
            self.assertGreater(row["ttft_s"], row["tpot_s"])
            # More requests at once never lower the throughput.
            rates = [t["tokens_per_s"] for t in row["throughput"]]
            self.assertEqual(rates, sorted(rates))

    def test_fixed_sizes_and_nodes(self):
        code, out, err = plan(*SERVE, "--tp", "2", "--nodes", "2", "--json")
        self.assertEqual(code, 0, err)
        rows = [json.loads(line) for line in out.splitlines()]
        self.assertEqual([(r["tp"], r["pp"]) for r in rows], [(2, 1), (2, 2), (2, 4)])

    def test_table_names_the_best_of_each(self):
        code, out, err = plan(*SERVE, "--prompt-tokens", "256", "--output-tokens", "64",
                              "--concurrency", "1,64")
        self.assertEqual(code, 0, err)
        self.assertIn("prompt 256, output 64 tokens", out)
        self.assertIn("tok/s@64", out)
        self.assertIn("lowest TTFT: tp", out)
        self.assertIn("highest throughput at concurrency 64: tp", out)


class PlanBadInputTest(unittest.TestCase):
    def check(self, args, expected):
        code, out, err = plan(*args)
        self.assertEqual(code, 1, out + err)
        lines = [line for line in err.splitlines() if line.strip()]
        self.assertEqual(len(lines), 1, err)
        self.assertTrue(lines[0].startswith("error: "), err)
        self.assertIn(expected, lines[0])
        for crash in ("terminate called", "Aborted", "Segmentation", "internal error"):
            self.assertNotIn(crash, err)

    def test_layout_that_cannot_divide_the_model(self):
        self.check(SMALL + ["--tp", "8", "--n-head", "12"], "--tp 8 does not divide --n-head 12")
        self.check(SMALL + ["--pp", "5"], "--pp 5 does not divide the 8 GPUs")
        self.check(SMALL + ["--pp", "8", "--n-layer", "12"],
                   "--n-layer 12 does not split evenly over --pp 8")
        self.check(SMALL + ["--tp", "1", "--pp", "1", "--micro-batch-size", "3"],
                   "--global-batch-size 32 is not a multiple of dp 8 x --micro-batch-size 3")

    def test_unknown_preset(self):
        self.check(["--cluster", "dgx-z100"], "--cluster 'dgx-z100' is neither a readable file "
                                              "nor a preset")

    def test_malformed_cluster_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".ini", delete=False) as f:
            f.write("base = dgx-h100\n[gpu]\npeak_bf16_tflops = fast\n")
        try:
            self.check(["--cluster", f.name], f"--cluster {f.name} line 3: 'fast' is not a "
                                              "non-negative number")
            with open(f.name, "w") as again:
                again.write("base = dgx-h100\ngpus_per_node = 1e9\n")
            self.check(["--cluster", f.name], "gpus_per_node must be a count in [1, 256]")
        finally:
            os.unlink(f.name)
        with tempfile.TemporaryDirectory() as d:  # a FIFO would block the read forever
            fifo = os.path.join(d, "cluster.ini")
            os.mkfifo(fifo)
            self.check(["--cluster", fifo], f"--cluster {fifo}: is a FIFO")

    def test_bad_values(self):
        self.check(SMALL + ["--schedule", "2f2b"], "--schedule must be one of")
        self.check(SMALL + ["--precision", "fp8"], "--precision must be one of")
        self.check(SMALL + ["--nodes", "0"], "--nodes must be in [1, 16384]")
        # Sizes beyond the documented bounds are refused at once (the search would run for
        # hours), and sizes that would divide by zero or overflow before any division.
        self.check(SMALL + ["--nodes", "100000000"],
                   "--nodes must be in [1, 16384] (got 100000000)")
        self.check(["--global-batch-size", str(2**63 - 1)],
                   "--global-batch-size must be in [1, 1048576]")
        self.check(SMALL + ["--virtual-stages", "0"], "--virtual-stages must be at least 1")
        self.check(SMALL + ["--tp", "65536", "--pp", "65536"], "--tp 65536")
        self.check(SMALL + ["--tp", "4", "--schedule", "interleaved", "--pp", "1"],
                   "--schedule interleaved needs --pp of at least 2")
        self.check(SMALL + ["--map-by", "diagonal"], "--map-by must be one of slot | node")
        self.check(SMALL + ["--memory-headroom", "-1"], "--memory-headroom must be a number of GB")
        self.check(SMALL + ["--memory-headroom", "80"],
                   "--memory-headroom 80 leaves nothing of the 80 GB")
        self.check(SMALL + ["--nodes", "2", "--map-by", "node", "--tp", "2"],
                   "--tp 2 with --map-by node puts each tp group across nodes")

    def test_bad_serving_values(self):
        self.check(SMALL + ["--prompt-tokens", "64"], "--prompt-tokens prices serving: add --serve")
        self.check(SERVE + ["--schedule", "1f1b"], "--schedule prices training")
        self.check(SERVE + ["--prompt-tokens", "0"], "--prompt-tokens must be at least 1")
        self.check(SERVE + ["--output-tokens", "-3"], "--output-tokens must be at least 1")
        self.check(SERVE + ["--prompt-tokens", "1000", "--output-tokens", "100"],
                   "exceed the model's --seq-len 1024")
        for bad in ("", "4,,8", "0", "x", "1;2", "99999999999"):
            self.check(SERVE + ["--concurrency", bad], "--concurrency must be positive counts")
        self.check(SERVE + ["--bytes-per-weight", "3"], "--bytes-per-weight must be 4 or 2")
        self.check(SERVE + ["--tp", "8"], "--tp 8 does not divide --n-head 12")
        self.check(SERVE + ["--n-head", "16", "--tp", "16", "--nodes", "2"],
                   "--tp 16 spans nodes of 8 GPUs")
        self.check(SERVE + ["--tp", "4", "--pp", "4"], "no layout of --tp x --pp fits the 8 GPUs")


if __name__ == "__main__":
    import argparse
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--mpiexec", default="mpiexec")
    args, rest = parser.parse_known_args()
    BIN = os.path.abspath(args.bin)
    MPIEXEC = args.mpiexec
    unittest.main(argv=[sys.argv[0]] + rest)
