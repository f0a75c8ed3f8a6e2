"""Training on the GPU, end to end (docs/DESIGN.md "Backends", "Testing"): CUDA fp32 follows the CPU run
(losses 1e-5 relative, final weights and optimizer state 1e-4 by tensor norm); bf16 follows fp32 to
bf16 rounding (losses 2e-2 relative, decreasing alike); tp 2, pp 2 (1f1b and zb-h1), dp 2 and
tp 2 x pp 2 sharing the one GPU over --gpu-comm mpi follow the serial CUDA fp32 run; serve on CUDA
answers concurrent requests with generate's CUDA text; NCCL at one
rank equals MPI at one rank, NCCL refuses two ranks on one GPU and auto picks MPI there;
--deterministic bf16 repeats bit for bit, and resumes bit for bit; checkpoints move between cuda
bf16 and cpu fp32 both ways (same datasets, shapes and dtypes).

Exits 77 (CTest: skipped) with the reason when `train --device cuda` says the build has no CUDA
backend or no CUDA device is visible.

Run: python3 test_gpu_training.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import concurrent.futures
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402
from serve_harness import Server  # noqa: E402

STEPS = 8
STOP_AT = 4
# Warm-up over the whole run: each step's lr is lr * s / warmup whatever --steps says, so a run
# stopped at STOP_AT and resumed takes the straight run's learning rates.
MODEL = ["--n-layer", "2", "--n-head", "4", "--d-model", "64", "--seq-len", "32",
         "--global-batch-size", "16", "--micro-batch-size", "4", "--threads", "1",
         "--eval-every", "0", "--log-every", "1", "--data-order", "random", "--seed", "2024",
         "--lr", "0.01", "--min-lr", "0.001", "--warmup-steps", str(STEPS)]
CPU = ["--device", "cpu", "--precision", "fp32"]
GPU_MEMORY = ["--memory-limit-gb", "2"]  # per rank: several ranks and tests share the GPU
CUDA_FP32 = ["--device", "cuda", "--precision", "fp32"] + GPU_MEMORY
CUDA_BF16 = ["--device", "cuda", "--precision", "bf16"] + GPU_MEMORY
DET = ["--deterministic"]

LOSS_REL = 1e-5       # fp32 GPU vs CPU, and layouts vs serial
GRAD_NORM_REL = 1e-4
STATE_REL = 1e-4      # checkpoint tensors by norm
BF16_LOSS_REL = 2e-2
# A bf16 layout against the serial bf16 run (SGD): tp's bf16 partial sums round, so they differ
# at bf16's resolution, as tests/integration/test_bf16.py derives.
BF16_LAYOUT_CURVE_REL = 2.0 ** -8
BF16_LAYOUT_STATE_REL = 1e-2
RUN_TIMEOUT = 120

# name: (ranks, layout options); all over --gpu-comm mpi on the one GPU
LAYOUTS = {
    "tp2": (2, ["--tp", "2"]),
    "pp2_1f1b": (2, ["--pp", "2", "--schedule", "1f1b"]),
    "pp2_zbh1": (2, ["--pp", "2", "--schedule", "zb-h1"]),
    "dp2": (2, []),
    "tp2_pp2": (4, ["--tp", "2", "--pp", "2"]),
}

NO_GPU_MARKERS = ("no CUDA backend", "no CUDA device")


def probe_gpu():
    """None when train runs on the GPU, else the line saying why not."""
    with tempfile.TemporaryDirectory(prefix="gpt-gpu-probe-") as tmp:
        result = h.train(MODEL + CUDA_BF16 + ["--steps", "0", "--checkpoint-dir",
                                              os.path.join(tmp, "ck")],
                         tiny=False, check=False, timeout=RUN_TIMEOUT)
    if result.returncode == 0:
        return None
    text = result.stdout + result.stderr
    for line in text.splitlines():
        if any(marker in line for marker in NO_GPU_MARKERS):
            return line.strip()
    return None  # another failure: the tests below will show it


class GpuTrainingTest(h.TempDirTest, h.WorstDifferences):
    """Runs shared by several tests are made once, on first use."""

    _runs = {}
    worst = {}

    @classmethod
    def setUpClass(cls):
        cls._dir = tempfile.TemporaryDirectory(prefix="gpt-gpu-runs-")

    @classmethod
    def tearDownClass(cls):
        cls._dir.cleanup()
        cls.report_worst("worst relative differences")

    # ---- helpers

    def train_run(self, name, options, np=1, steps=STEPS, extra=(), folder=None):
        """Trains to `steps` (checkpoints at STOP_AT and the end); returns (metrics, ck dir)."""
        folder = folder or self.path(name)
        ck, metrics = os.path.join(folder, "ck"), os.path.join(folder, "m.jsonl")
        os.makedirs(folder, exist_ok=True)
        h.train(MODEL + list(options) + list(extra) +
                ["--steps", steps, "--save-every", STOP_AT, "--checkpoint-dir", ck,
                 "--metrics", metrics], np=np, tiny=False, timeout=RUN_TIMEOUT)
        return h.read_metrics(metrics), ck

    def shared(self, name, options, np=1):
        """A run several tests compare with, made once per class."""
        if name not in self._runs:
            folder = os.path.join(self._dir.name, name)
            type(self)._runs[name] = self.train_run(name, options, np=np, folder=folder)
        return self._runs[name]

    def cpu_ref(self):
        return self.shared("cpu_fp32", CPU)

    def cuda_ref(self):
        return self.shared("cuda_fp32", CUDA_FP32)

    def cuda_bf16_det(self):
        return self.shared("cuda_bf16_det", CUDA_BF16 + DET)

    def assert_curve(self, got, ref, steps, name, loss_rel=LOSS_REL, grad_rel=GRAD_NORM_REL):
        for key, rel in (("loss", loss_rel), ("grad_norm", grad_rel)):
            values, want = h.by_step(got, key), h.by_step(ref, key)
            self.assertEqual(sorted(values), list(steps), f"{name}: steps logged ({key})")
            for s in steps:
                h.assert_close(self, values[s], want[s], rel, f"{name}: {key} at step {s}")
                self.note(key, abs(values[s] - want[s]) / max(abs(want[s]), 1e-30),
                          f"{name} step {s}")

    def assert_state(self, ck, ref_ck, name, step=STEPS):
        ref = h.load_checkpoint(h.checkpoint_file(ref_ck, step))
        h.assert_state_close(self, h.checkpoint_file(ck, step), ref, STATE_REL, name, self.note)

    def assert_identical_runs(self, a, b, name):
        (ma, cka), (mb, ckb) = a, b
        for key in ("loss", "grad_norm", "lr"):
            self.assertEqual(h.by_step(ma, key), h.by_step(mb, key), f"{name}: {key} differs")
        h.assert_checkpoints_identical(self, h.checkpoint_file(cka, STEPS),
                                       h.checkpoint_file(ckb, STEPS))

    # ---- fp32 and bf16 against the CPU

    def test_a_cuda_fp32_matches_cpu(self):
        got, ck = self.cuda_ref()
        ref, ref_ck = self.cpu_ref()
        self.assert_curve(got, ref, range(1, STEPS + 1), "cuda fp32 vs cpu")
        self.assert_state(ck, ref_ck, "cuda fp32 vs cpu")

    def test_a_cuda_bf16_follows_fp32(self):
        got, _ = self.cuda_bf16_det()
        ref, _ = self.cuda_ref()
        loss, want = h.by_step(got, "loss"), h.by_step(ref, "loss")
        self.assertEqual(sorted(loss), list(range(1, STEPS + 1)))
        for s in range(1, STEPS + 1):
            h.assert_close(self, loss[s], want[s], BF16_LOSS_REL, f"bf16 loss at step {s}")
            self.note("bf16 loss", abs(loss[s] - want[s]) / abs(want[s]), f"step {s}")
        drop, want_drop = loss[1] - loss[STEPS], want[1] - want[STEPS]
        self.assertGreater(want_drop, 0, f"fp32 loss does not decrease: {want}")
        self.assertGreater(drop, 0.8 * want_drop,
                           f"bf16 loss fell by {drop:.4f}, fp32 by {want_drop:.4f}")

    # ---- layouts sharing the GPU over MPI

    def check_layout(self, name):
        np, layout = LAYOUTS[name]
        got, ck = self.train_run(name, CUDA_FP32 + layout + ["--gpu-comm", "mpi"], np=np)
        ref, ref_ck = self.cuda_ref()
        self.assert_curve(got, ref, range(1, STEPS + 1), name)
        self.assert_state(ck, ref_ck, name)

    def test_b_layout_tp2(self):
        self.check_layout("tp2")

    def test_b_layout_pp2_1f1b(self):
        self.check_layout("pp2_1f1b")

    def test_b_layout_pp2_zbh1(self):
        self.check_layout("pp2_zbh1")

    def test_b_layout_dp2(self):
        self.check_layout("dp2")

    def test_b_layout_tp2_pp2(self):
        self.check_layout("tp2_pp2")

    def test_b_layout_tp2_pp2_bf16(self):
        """bf16's 16-bit tp and pp messages on the GPU: the CUDA pack kernels and the host-staged
        bf16 collectives, tp 2 x pp 2 against the serial CUDA bf16 run."""
        bf16 = CUDA_BF16 + DET + ["--optimizer", "sgd"]
        ref, ref_ck = self.shared("cuda_bf16_sgd", bf16)
        np, layout = LAYOUTS["tp2_pp2"]
        got, ck = self.train_run("tp2_pp2_bf16", bf16 + layout + ["--gpu-comm", "mpi"], np=np)
        self.assert_curve(got, ref, range(1, STEPS + 1), "tp2_pp2 bf16", BF16_LAYOUT_CURVE_REL,
                          BF16_LAYOUT_CURVE_REL)
        h.assert_state_close(self, h.checkpoint_file(ck, STEPS),
                             h.load_checkpoint(h.checkpoint_file(ref_ck, STEPS)),
                             BF16_LAYOUT_STATE_REL, "tp2_pp2 bf16", self.note)

    # ---- the GPU transports

    def test_c_nccl_one_rank_equals_mpi_one_rank(self):
        mpi = self.train_run("mpi1", CUDA_FP32 + DET + ["--gpu-comm", "mpi"])
        folder = self.path("nccl1")
        ck, metrics = os.path.join(folder, "ck"), os.path.join(folder, "m.jsonl")
        result = h.train(MODEL + CUDA_FP32 + DET +
                         ["--gpu-comm", "nccl", "--steps", STEPS, "--save-every", STOP_AT,
                          "--checkpoint-dir", ck, "--metrics", metrics],
                         tiny=False, check=False, timeout=RUN_TIMEOUT)
        text = result.stdout + result.stderr
        if result.returncode != 0 and "nccl" in text.lower() and (
                "not built" in text or "without NCCL" in text or "no NCCL" in text):
            self.skipTest("this build has no NCCL: " + text.strip().splitlines()[-1])
        self.assertEqual(result.returncode, 0, result.describe())
        self.assert_identical_runs(mpi, (h.read_metrics(metrics), ck), "nccl vs mpi at 1 rank")

    def test_c_nccl_refuses_two_ranks_on_one_gpu_auto_picks_mpi(self):
        ck = self.path("ck")
        result = h.train(MODEL + CUDA_FP32 + ["--tp", "2", "--gpu-comm", "nccl", "--steps", "2",
                                              "--checkpoint-dir", ck],
                         np=2, tiny=False, check=False, timeout=RUN_TIMEOUT)
        self.assertNotEqual(result.returncode, 0, result.describe())
        errors = [l for l in result.stderr.splitlines() if l.startswith("error: ")]
        self.assertTrue(errors, "expected an error line\n" + result.describe())
        self.assertTrue(any("nccl" in l.lower() or "--gpu-comm" in l for l in errors),
                        "the error should name NCCL or --gpu-comm\n" + result.describe())
        self.assertFalse(os.path.exists(ck) and h.step_files(ck), "no checkpoint after an error")
        # auto takes MPI when the ranks share the GPU: the same run trains.
        h.train(MODEL + CUDA_FP32 + ["--tp", "2", "--gpu-comm", "auto", "--steps", "2",
                                     "--checkpoint-dir", self.path("ck_auto")],
                np=2, tiny=False, timeout=RUN_TIMEOUT)

    # ---- determinism and resume

    def test_d_deterministic_bf16_repeats_bit_for_bit(self):
        first = self.cuda_bf16_det()
        again = self.train_run("again", CUDA_BF16 + DET)
        self.assert_identical_runs(first, again, "two --deterministic bf16 runs")

    def test_d_resume_bit_for_bit(self):
        straight = self.cuda_bf16_det()
        folder = self.path("stopped")
        metrics, ck = self.train_run("stopped", CUDA_BF16 + DET, steps=STOP_AT, folder=folder)
        self.assertEqual(h.step_files(ck), [f"step-{STOP_AT:08d}.h5"])
        result = h.train(MODEL + CUDA_BF16 + DET +
                         ["--steps", STEPS, "--resume", "auto", "--checkpoint-dir", ck,
                          "--metrics", os.path.join(folder, "m.jsonl")],
                         tiny=False, timeout=RUN_TIMEOUT)
        self.assertIn("resumed from", result.stdout + result.stderr, result.describe())
        resumed = h.read_metrics(os.path.join(folder, "m.jsonl"))
        self.assertEqual([m["step"] for m in h.step_lines(resumed)], list(range(1, STEPS + 1)))
        self.assert_identical_runs(straight, (resumed, ck), "resumed vs straight")

    # ---- checkpoints between devices

    def resume_from(self, name, source, options):
        """Copies nothing: resumes `source` (a file) into a fresh folder; returns (metrics, ck)."""
        folder = self.path(name)
        ck, metrics = os.path.join(folder, "ck"), os.path.join(folder, "m.jsonl")
        result = h.train(MODEL + list(options) +
                         ["--steps", STEPS, "--resume", source, "--checkpoint-dir", ck,
                          "--metrics", metrics], tiny=False, timeout=RUN_TIMEOUT)
        self.assertIn("resumed from", result.stdout + result.stderr, result.describe())
        got = h.read_metrics(metrics)
        self.assertEqual([m["step"] for m in h.step_lines(got)], list(range(STOP_AT + 1, STEPS + 1)))
        return got, ck

    def assert_same_schema(self, path_a, path_b):
        import h5py
        def schema(path):
            out = {}
            with h5py.File(path, "r") as f:
                f.visititems(lambda n, o: out.__setitem__(n, (o.shape, str(o.dtype)))
                             if isinstance(o, h5py.Dataset) else None)
                root = sorted(f.attrs.keys())
            return out, root
        (da, ra), (db, rb) = schema(path_a), schema(path_b)
        self.assertEqual(ra, rb, "root attributes differ")
        self.assertEqual(da, db, "datasets, shapes or dtypes differ")

    def test_e_cuda_bf16_checkpoint_resumes_on_cpu_fp32(self):
        _, bf16_ck = self.cuda_bf16_det()
        source = h.checkpoint_file(bf16_ck, STOP_AT)
        cpu_got, cpu_ck = self.resume_from("on_cpu", source, CPU)
        gpu_got, gpu_ck = self.resume_from("on_cuda_fp32", source, CUDA_FP32)
        # The same file continued in fp32 on either device: the same run to float32 rounding.
        self.assert_curve(cpu_got, gpu_got, range(STOP_AT + 1, STEPS + 1), "bf16 ck -> cpu")
        self.assert_state(cpu_ck, gpu_ck, "bf16 ck -> cpu")
        self.assert_same_schema(h.checkpoint_file(cpu_ck, STEPS), h.checkpoint_file(bf16_ck, STEPS))

    def test_e_cpu_checkpoint_resumes_on_cuda(self):
        ref, ref_ck = self.cpu_ref()
        source = h.checkpoint_file(ref_ck, STOP_AT)
        fp32_got, fp32_ck = self.resume_from("on_cuda_fp32", source, CUDA_FP32)
        self.assert_curve(fp32_got, ref, range(STOP_AT + 1, STEPS + 1), "cpu ck -> cuda fp32")
        self.assert_state(fp32_ck, ref_ck, "cpu ck -> cuda fp32")
        bf16_got, bf16_ck = self.resume_from("on_cuda_bf16", source, CUDA_BF16)
        loss, want = h.by_step(bf16_got, "loss"), h.by_step(ref, "loss")
        for s in range(STOP_AT + 1, STEPS + 1):
            h.assert_close(self, loss[s], want[s], BF16_LOSS_REL, f"cpu ck -> bf16 loss {s}")
        self.assert_same_schema(h.checkpoint_file(bf16_ck, STEPS), h.checkpoint_file(ref_ck, STEPS))

    # ---- serving on the GPU

    def test_f_serve_on_cuda_gives_generates_text(self):
        """serve on CUDA answers three concurrent requests (greedy and sampled) with generate's
        text on CUDA: the same fp32 row kernels in both, whatever the batch."""
        _, ref_ck = self.cpu_ref()
        checkpoint = h.checkpoint_file(ref_ck, STEPS)
        requests = [("1", 12, 0.0, 1), ("12+34=", 10, 1.0, 5), ("7+8=15\n", 8, 0.0, 1)]
        server = Server(checkpoint, 1, ["--device", "cuda"] + GPU_MEMORY)
        try:
            with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
                texts = list(pool.map(lambda r: server.complete(*r), requests))
        finally:
            code, out, err = server.stop()
        self.assertEqual(code, 0, out + err)
        for (prompt, max_tokens, temperature, seed), text in zip(requests, texts):
            out = h.run("generate", ["--checkpoint", checkpoint, "--prompt", prompt,
                                     "--max-new-tokens", max_tokens, "--temperature",
                                     temperature, "--seed", seed, "--device", "cuda"] +
                        GPU_MEMORY, check=True).stdout
            self.assertEqual(text.rstrip("\n"), out[len(prompt):].rstrip("\n"), prompt)


if __name__ == "__main__":
    h.init()
    reason = probe_gpu()
    if reason is not None:
        print(f"SKIPPED: {reason}", flush=True)
        sys.exit(77)
    h.main()
