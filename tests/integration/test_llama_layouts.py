"""The Llama family in every kind of layout (docs/MODEL.md): a tiny Llama with grouped-query
attention (4 query heads, 2 key/value heads), Qwen2's q/k/v biases, Qwen3's q/k norms and an
untied head, trained 6 steps in layouts that split, share and replicate its key/value heads, with
sequence parallelism, pipeline schedules, the distributed optimizer and recomputation, each gives
the 1-rank run's per-step losses and gradient norms within 1e-5 relative and its final weights
and optimizer state within 1e-4 by tensor norm (the GPT-2 suites' tolerances and harness). A
second model (one key/value head, tied embeddings, Llama 3.1's rope scaling) runs at tp 2, where
both ranks share its one key/value head. A tp 2 x pp 2 checkpoint resumes at 1 rank. Every run
also proves the memory model to the byte (gpt_harness.train). Generation over the key/value cache
(which holds the key/value heads only) gives the tokens of re-running the window, also past
seq_len, and the same sampled tokens at tp 2, tp 4 (shared key/value heads) and tp 2 x pp 2,
also over a window (--seq-len) twice the trained one;
eval gives the same loss at 1 rank and tp 2 x pp 2.

Run: /usr/bin/python3 test_llama_layouts.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

LLAMA = ["--arch", "llama", "--n-kv-head", "2", "--ffn-hidden-size", "48", "--qkv-bias",
         "--qk-norm"]
MODEL = h.with_options(h.EQUIVALENCE_MODEL, n_layer=4, global_batch_size=8) + LLAMA
SHARED_KV = h.with_options(h.EQUIVALENCE_MODEL, global_batch_size=8) + [
    "--arch", "llama", "--n-kv-head", "1", "--ffn-hidden-size", "48", "--tie-embeddings",
    "--rope-scaling", "llama3"]

# name: (model, ranks, layout options)
LAYOUTS = {
    "tp2": (MODEL, 2, ["--tp", "2"]),
    "tp4_sp_shared_kv": (MODEL, 4, ["--tp", "4", "--sequence-parallel"]),
    "tp2_pp2_1f1b_sp": (MODEL, 4, ["--tp", "2", "--pp", "2", "--schedule", "1f1b",
                                   "--sequence-parallel"]),
    "pp2_interleaved_zb": (MODEL, 2, ["--pp", "2", "--virtual-stages", "2",
                                      "--schedule", "interleaved"]),
    "pp2_zbh1_recompute": (MODEL, 2, ["--pp", "2", "--schedule", "zb-h1",
                                      "--recompute", "full"]),
    "dp2_zero_selective": (MODEL, 2, ["--distributed-optimizer", "--recompute", "selective"]),
    "one_kv_head_tp2": (SHARED_KV, 2, ["--tp", "2"]),
}


class LlamaLayoutTest(h.EquivalenceTest):
    worst = {}
    PREFIX = "llama-layouts"

    @classmethod
    def setUpClass(cls):
        cls.make_folders()
        cls.refs = {"model": cls.train_reference("serial", MODEL),
                    "shared": cls.train_reference("serial-shared", SHARED_KV)}

    def check_layout(self, name):
        model, np, layout = LAYOUTS[name]
        ref = self.refs["model" if model is MODEL else "shared"]
        got, ck, _ = self.train_layout(name, model + layout, np)
        type(self).runs[name] = ck
        self.assert_like(got, ck, ref, range(1, self.STEPS + 1), name)

    def test_b_resume_tp2_pp2_at_one_rank(self):
        if "tp2_pp2_1f1b_sp" not in self.runs:
            self.check_layout("tp2_pp2_1f1b_sp")
        source = h.checkpoint_file(self.runs["tp2_pp2_1f1b_sp"], self.SAVE_AT)
        self.resume_like(source, MODEL, 1, self.refs["model"], "tp2_pp2->serial")

    def generate(self, args, np=1):
        return h.run("generate", ["--checkpoint", h.checkpoint_file(self.refs["model"]["ck"],
                                                                    self.STEPS),
                                  "--threads", 1] + args, np=np, check=True).stdout

    def test_c_generate_kv_cache_in_every_layout(self):
        args = ["--prompt-tokens", "5,17,99", "--temperature", 1.0, "--seed", 3,
                "--max-new-tokens", 24]  # past seq_len 16: the window re-prefills
        want = self.generate(args)
        self.assertEqual(self.generate(args + ["--no-kv-cache"]), want, "cache vs window")
        for np, layout in ((2, []), (4, []), (4, ["--pp", 2])):
            with self.subTest(np=np, layout=layout):
                self.assertEqual(self.generate(args + layout, np=np), want)
        # Rotary positions take a longer window than training's 16: cache and window agree.
        longer = args + ["--seq-len", 32, "--max-new-tokens", 40]
        self.assertEqual(self.generate(longer), self.generate(longer + ["--no-kv-cache"]))

    def test_c_eval_alike_at_tp2_pp2(self):
        final = h.checkpoint_file(self.refs["model"]["ck"], self.STEPS)
        losses = []
        for np, layout in ((1, []), (4, ["--tp", 2, "--pp", 2])):
            result = h.run("eval", ["--checkpoint", final, "--eval-windows", 8, "--threads", 1] +
                           layout, np=np, check=True)
            losses.append(float(re.search(r"loss ([0-9.]+)", result.stdout).group(1)))
        h.assert_close(self, losses[1], losses[0], 1e-5, "eval at tp 2 x pp 2")


h.add_layout_tests(LlamaLayoutTest, {
    name: ((name,), f"{name} against the 1-rank run") for name in LAYOUTS})

if __name__ == "__main__":
    h.main()
