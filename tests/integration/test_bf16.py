"""bf16 precision on the CPU backend (docs/CUDA.md "Precision"): the GPU's default regime, with
every product reading bfloat16-rounded operands and accumulating in float32, run end to end.

1. Layouts against the serial bf16 run: GPT-2 at tp 2 with --sequence-parallel, pp 2 (1f1b),
   dp 2 with --distributed-optimizer and tp 2 x pp 2 (interleaved), and a Llama with grouped
   query attention at tp 2, each give the 1-rank bf16 run's losses and gradient norms within
   CURVE_REL and its final weights and optimizer state within STATE_REL by tensor norm. The
   bounds: a layout reorders float32 sums, which moves a product's operand by about k ulps of
   float32 (k a few units); an operand that lies that close to the midpoint between two bf16
   values rounds to the other neighbour, with probability about k * 2^-24 / 2^-8 = k * 2^-16
   per element, moving it by 2^-8 of its value. Over the D terms of a sum with random signs
   that gives a relative change of sqrt(k * 2^-16) * 2^-8, about 1e-5 for k = 4, against float32's
   1e-7: the float32 suites' bounds (1e-5 curve, 1e-4 state) grow by the same factor of 100, to
   1e-3 and 1e-2 (seen: see the worst differences printed at the end).
2. Resume in the same layout is bit for bit the uninterrupted run (tp 2 with
   --sequence-parallel, from its step-3 checkpoint).
3. The built-in run learns as in float32: 600 steps of the arithmetic corpus reach a final
   validation loss within 2% of the float32 run's.
Every run also proves the memory model to the byte (gpt_harness.train), the operand copies
included.

Run: /usr/bin/python3 test_bf16.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import concurrent.futures
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

# SGD: its update is linear in the gradient, so a layout's state differs from the serial run's as
# its gradients do. AdamW divides by sqrt(exp_avg_sq), which turns a gradient that is rounding
# noise into a full-lr step of random sign: in bf16 that noise is far above AdamW's eps (the key
# third of c_attn.bias, whose exact gradient is zero, differs by 10% between layouts after 6
# steps), in float32 it is below it. The learning test below runs AdamW.
BF16 = ["--precision", "bf16", "--optimizer", "sgd"]
MODEL = h.with_options(h.EQUIVALENCE_MODEL, n_layer=4, global_batch_size=8) + BF16
LLAMA = MODEL + ["--arch", "llama", "--n-kv-head", "2", "--ffn-hidden-size", "48"]
LEARN_STEPS = 600

# name: (model, ranks, layout options)
LAYOUTS = {
    "tp2_sp": (MODEL, 2, ["--tp", "2", "--sequence-parallel"]),
    "pp2_1f1b": (MODEL, 2, ["--pp", "2", "--schedule", "1f1b"]),
    "dp2_zero": (MODEL, 2, ["--distributed-optimizer"]),
    "tp2_pp2_interleaved": (MODEL, 4, ["--tp", "2", "--pp", "2", "--schedule", "interleaved",
                                       "--virtual-stages", "2"]),
    "llama_tp2": (LLAMA, 2, ["--tp", "2"]),
}


class Bf16Test(h.EquivalenceTest):
    """The serial bf16 references (GPT-2 and Llama) are made once for all tests."""

    worst = {}
    PREFIX = "gpt-bf16"
    CURVE_REL = 1e-3
    STATE_REL = 1e-2
    WORST_TITLE = "worst relative differences of bf16 layouts against the 1-rank bf16 run"

    @classmethod
    def setUpClass(cls):
        cls.make_folders()
        cls.refs = {id(MODEL): cls.train_reference("serial", MODEL),
                    id(LLAMA): cls.train_reference("serial_llama", LLAMA)}

    def check_layout(self, name):
        model, np, layout = LAYOUTS[name]
        got, ck, result = self.train_layout(name, model + layout, np)
        self.assertIn("bf16", result.stdout + result.stderr, "the run should say it is bf16\n" +
                      result.describe())
        type(self).runs[name] = {"metrics": got, "ck": ck}
        self.assert_like(got, ck, self.refs[id(model)], range(1, self.STEPS + 1), name)

    def test_resume_is_bit_exact(self):
        if "tp2_sp" not in self.runs:
            self.check_layout("tp2_sp")
        model, np, layout = LAYOUTS["tp2_sp"]
        straight = self.runs["tp2_sp"]
        metrics, ck = h.train_resumed(self, model + layout,
                                      h.checkpoint_file(straight["ck"], self.SAVE_AT),
                                      self.STEPS, np, self.RUN_TIMEOUT)
        steps = range(self.SAVE_AT + 1, self.STEPS + 1)
        for key in ("loss", "grad_norm"):
            got, want = h.by_step(metrics, key), h.by_step(straight["metrics"], key)
            self.assertEqual([got[s] for s in steps], [want[s] for s in steps], key)
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, self.STEPS),
                                       h.checkpoint_file(straight["ck"], self.STEPS))

    def test_learns_as_float32(self):
        """The built-in run (train's defaults: the 0.8M-parameter GPT-2 on the arithmetic
        corpus), shortened to LEARN_STEPS; at 300 steps the two runs were seen 1.9% apart, at
        600 0.1-0.6%, so the check runs 600."""
        def run(precision):  # one thread each: the two runs share the test's two processors
            metrics = self.path(precision + ".jsonl")
            h.train(["--precision", precision, "--threads", "1", "--steps", LEARN_STEPS,
                     "--eval-every", LEARN_STEPS, "--log-every", LEARN_STEPS,
                     "--checkpoint-dir", self.path(precision), "--metrics", metrics],
                    tiny=False, timeout=300)
            return h.val_lines(h.read_metrics(metrics))[-1]["val_loss"]

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            final = dict(zip(("fp32", "bf16"), pool.map(run, ("fp32", "bf16"))))
        ratio = final["bf16"] / final["fp32"]
        print(f"final validation loss after {LEARN_STEPS} steps: fp32 {final['fp32']:.4f}, "
              f"bf16 {final['bf16']:.4f} (ratio {ratio:.4f})", flush=True)
        self.assertLess(abs(ratio - 1), 0.02, final)


h.add_layout_tests(Bf16Test, {name: ((name,), f"bf16 {name} against the serial bf16 run")
                              for name in LAYOUTS})

if __name__ == "__main__":
    h.main()
