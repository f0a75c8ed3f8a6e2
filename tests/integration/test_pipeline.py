"""Pipeline parallelism end to end (docs/DESIGN.md "Pipeline schedules are data", "Testing").

1. Equivalence: every schedule (1f1b, gpipe, interleaved with --virtual-stages 2, zb-h1) at
   --pp 2 and --pp 4, and tp 2 x pp 2 x dp 2 with 1f1b and with zb-h1 --sequence-parallel,
   give the 1-rank run's per-step losses and gradient norms within 1e-5 relative, and its final
   weights and optimizer state (every /model and /optimizer dataset) within 1e-4 relative by
   tensor norm, ||a - b|| / ||b||, as test_layouts.py does (the key third of c_attn.bias has a
   gradient that is zero in exact arithmetic: its values are rounding noise, so elements are
   not compared one by one). Interleaved at pp 4 needs 8 layers (n_layer a multiple of
   pp * v): it is compared with a serial 8-layer run.
2. peak_caches in the metrics (global rank 0, so stage 0) is the schedule's statement for
   stage 0 (parallel/pipeline_schedule.cpp): 1f1b min(pp, m), gpipe m, zb-h1 pp (m >= pp),
   interleaved min(2(pp-1) + (v-1)pp + 1, v m); m = global batch / (dp x micro batch).
3. Resume across pipelined layouts: the step-3 checkpoint of the tp 2 x pp 2 run continued at
   tp 1 x pp 4 and at 1 rank gives the straight serial run's steps 4..6.
4. eval of the serial run's final checkpoint at --pp 2 and --pp 2 --tp 2 gives the 1-rank
   loss within 1e-6 relative; the val_loss lines of --pp 2 training runs (--eval-every 3,
   1f1b and interleaved) equal the serial run's within 1e-5 (their weights differ from the
   serial ones by float32 rounding).
5. Invalid pipeline settings: exit code != 0 and one "error:" line naming the option.

Every training run uses --steps 6 --save-every 3, so the lr schedule is the same in all.

Run: /usr/bin/python3 test_pipeline.py --bin BUILD/bin [--mpiexec PATH --mpiexec-flags "..."]
"""

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

MODEL = h.with_options(h.EQUIVALENCE_MODEL, n_layer=4)
GLOBAL_BATCH, MICRO_BATCH = 16, 2
STEPS = h.EQUIVALENCE_STEPS
SAVE_AT = h.EQUIVALENCE_SAVE_AT
EVAL_EVERY = ["--eval-every", "3", "--eval-windows", "16"]
CURVE_REL = h.CURVE_REL
EVAL_REL = 1e-6    # eval of one checkpoint in another layout
RUN_TIMEOUT = 60
SP = "--sequence-parallel"


def merged(model, options):
    """model's options, less those that options gives itself, then options."""
    options = [str(o) for o in options]
    given = {o for o in options if o.startswith("--")}
    out, i = [], 0
    while i < len(model):
        if model[i] in given:
            i += 2
            continue
        out.append(model[i])
        i += 1
    return out + options


def pipe(pp, schedule, v=1, tp=1, extra=()):
    args = ["--pp", pp, "--schedule", schedule]
    if v > 1:
        args += ["--virtual-stages", v]
    if tp > 1:
        args += ["--tp", tp]
    return [str(a) for a in args] + list(extra)


# name: (ranks, n_layer, options, (pp, dp, schedule, v) for the cache statement)
LAYOUTS = {
    "pp2_1f1b": (2, 4, pipe(2, "1f1b", extra=EVAL_EVERY), (2, 1, "1f1b", 1)),
    "pp2_gpipe": (2, 4, pipe(2, "gpipe"), (2, 1, "gpipe", 1)),
    "pp2_uneven_1_3": (2, 4, pipe(2, "1f1b", extra=["--pipeline-layers", "1,3"]),
                       (2, 1, "1f1b", 1)),
    "pp2_interleaved_uneven_L8": (2, 8, pipe(2, "interleaved", v=2,
                                             extra=["--pipeline-layers", "1,3,3,1"]),
                                  (2, 1, "interleaved", 2)),
    "pp2_interleaved": (2, 4, pipe(2, "interleaved", v=2, extra=EVAL_EVERY),
                        (2, 1, "interleaved", 2)),
    "pp2_zbh1": (2, 4, pipe(2, "zb-h1"), (2, 1, "zb-h1", 1)),
    "pp4_1f1b": (4, 4, pipe(4, "1f1b"), (4, 1, "1f1b", 1)),
    # stages of no blocks beside the embedding and the head
    "pp4_gpipe_0_2_2_0": (4, 4, pipe(4, "gpipe", extra=["--pipeline-layers", "0,2,2,0"]),
                          (4, 1, "gpipe", 1)),
    "pp4_zbh1_1_2_1_0": (4, 4, pipe(4, "zb-h1", extra=["--pipeline-layers", "1,2,1,0"]),
                         (4, 1, "zb-h1", 1)),
    "pp4_interleaved_L8": (4, 8, pipe(4, "interleaved", v=2), (4, 1, "interleaved", 2)),
    "tp2_pp2_1f1b": (4, 4, pipe(2, "1f1b", tp=2), (2, 1, "1f1b", 1)),
    "tp2_pp2_dp2_1f1b": (8, 4, pipe(2, "1f1b", tp=2), (2, 2, "1f1b", 1)),
    "tp2_pp2_dp2_zbh1_sp": (8, 4, pipe(2, "zb-h1", tp=2, extra=[SP]), (2, 2, "zb-h1", 1)),
    # beyond the brief's list: dp with the schedules, sp with interleaving, 4 chunks a stage
    "pp2_dp2_gpipe": (4, 4, pipe(2, "gpipe"), (2, 2, "gpipe", 1)),
    "pp2_dp2_interleaved": (4, 4, pipe(2, "interleaved", v=2), (2, 2, "interleaved", 2)),
    "tp2_pp2_interleaved_sp": (4, 4, pipe(2, "interleaved", v=2, tp=2, extra=[SP]),
                               (2, 1, "interleaved", 2)),
    "pp2_interleaved_v4_L8": (2, 8, pipe(2, "interleaved", v=4,
                                         extra=["--pipeline-layers", "0,2,1,1,1,1,2,0"]),
                              (2, 1, "interleaved", 4)),
}


def stated_stage0_caches(pp, dp, schedule, v):
    m = GLOBAL_BATCH // (dp * MICRO_BATCH)
    if schedule == "1f1b":
        return min(pp, m)
    if schedule == "gpipe":
        return m
    if schedule == "zb-h1":
        return pp
    if schedule == "interleaved":
        return min(min(2 * (pp - 1) + (v - 1) * pp, v * m) + 1, v * m)
    raise ValueError(schedule)


EVAL_LINE = re.compile(r": loss ([0-9.eE+-]+) \| perplexity")


class PipelineTest(h.EquivalenceTest):
    """The serial references (4 and 8 layers, 6 steps, checkpoints at 3 and 6) are made once;
    the layout runs are kept for the peak-cache, val-loss and resume tests."""

    worst = {}  # what -> (relative difference, where)
    RUN_TIMEOUT = RUN_TIMEOUT
    PREFIX = "gpt-pipeline"
    WORST_TITLE = "worst relative differences against the 1-rank runs"

    @classmethod
    def setUpClass(cls):
        cls.make_folders()  # runs: name -> (metrics, checkpoint dir)
        cls.refs = {}
        for layers, extra in ((4, EVAL_EVERY), (8, [])):
            cls.refs[layers] = cls.train_reference(
                f"L{layers}", merged(h.with_options(MODEL, n_layer=layers), extra))

    # ---- helpers

    def run_layout(self, name):
        """Trains a LAYOUTS entry to STEPS (once per class); returns (metrics, checkpoint dir)."""
        if name not in self.runs:
            np, layers, options, _ = LAYOUTS[name]
            metrics, ck, _ = self.train_layout(
                name, merged(h.with_options(MODEL, n_layer=layers), options), np)
            type(self).runs[name] = (metrics, ck)
        return self.runs[name]

    def check_layout(self, name):
        metrics, ck = self.run_layout(name)
        self.assert_like(metrics, ck, self.refs[LAYOUTS[name][1]], range(1, STEPS + 1), name)

    def expect_error(self, np, args, option):
        ck = self.path("ck")
        result = h.train(args + ["--steps", "1", "--checkpoint-dir", ck], np=np,
                         timeout=RUN_TIMEOUT, check=False)
        self.assertNotEqual(result.returncode, 0, result.describe())
        errors = [l for l in (result.stdout + result.stderr).splitlines()
                  if l.startswith("error:")]
        self.assertEqual(len(errors), 1, "expected one error line\n" + result.describe())
        self.assertIn(option, errors[0], result.describe())
        self.assertLess(result.seconds, 40, "the error should come within seconds")
        self.assertFalse(os.path.exists(ck) and h.step_files(ck),
                         "no checkpoint after an option error")

    def eval_loss(self, np, extra, ck=None, log=None):
        """The eval loss of `ck` (the serial run's last checkpoint); `log` (a list) gets the
        output."""
        ck = ck or h.checkpoint_file(self.refs[4]["ck"], STEPS)
        result = h.run("eval", ["--checkpoint", ck, "--eval-windows", "16",
                                "--micro-batch-size", "4", "--threads", "1"] + list(extra),
                       np=np, timeout=RUN_TIMEOUT, check=True)
        found = EVAL_LINE.findall(result.stdout + result.stderr)
        self.assertEqual(len(found), 1, "expected one loss line\n" + result.describe())
        if log is not None:
            log.append(result.stdout + result.stderr)
        return float(found[0])

    def generated(self, np, extra):
        ck = h.checkpoint_file(self.refs[4]["ck"], STEPS)
        result = h.run("generate", ["--checkpoint", ck, "--prompt", "123+4", "--max-new-tokens",
                                    "12", "--threads", "1"] + list(extra),
                       np=np, timeout=RUN_TIMEOUT, check=True)
        return result.stdout

    def test_d_generate_in_pipelined_layouts(self):
        """generate at --pp 2 (and tp 2 x pp 2) gives the serial text, greedy and sampled."""
        for sampling in (["--temperature", "0"], ["--temperature", "1", "--seed", "5"]):
            want = self.generated(1, sampling)
            self.assertTrue(want.startswith("123+4"), want)
            for np, layout in ((2, ["--pp", "2"]), (4, ["--pp", "2"]), (4, ["--pp", "4"]),
                               (2, ["--pp", "2", "--pipeline-layers", "3,1"])):
                self.assertEqual(self.generated(np, sampling + layout), want,
                                 f"generate {layout} at {np} ranks, {sampling}")

    # ---- 1. equivalence (test_a_*, added below) and 2. peak caches

    def test_b_peak_caches(self):
        """peak_caches of every step line of every layout run equals stage 0's statement."""
        wrong = []
        for name, (_, _, _, shape) in LAYOUTS.items():
            metrics, _ = self.run_layout(name)
            want = stated_stage0_caches(*shape)
            got = sorted({m.get("peak_caches") for m in h.step_lines(metrics)})
            if got != [want]:
                wrong.append(f"{name}: peak_caches {got}, stated {want} "
                             f"(pp, dp, schedule, v = {shape})")
        self.assertEqual(wrong, [], "peak_caches differ from the schedules' statements")

    def test_b_pp_bytes(self):
        """Each boundary transfer happens once: stage 0 moves (sends plus receives) per
        microbatch an activation and a gradient for each of its v chunks, less the first
        chunk's input gradient, which has nowhere to go: 2 m (2v - 1) boundary tensors of
        b s d floats (b s/tp d under --sequence-parallel), plus a few scalars (the gradient
        norm's all-reduce over the stages)."""
        arg = lambda name: int(MODEL[MODEL.index(name) + 1])  # noqa: E731
        wrong = []
        for name, (_, _, options, (pp, dp, schedule, v)) in LAYOUTS.items():
            metrics, _ = self.run_layout(name)
            tp = int(options[options.index("--tp") + 1]) if "--tp" in options else 1
            seq = arg("--seq-len") // (tp if SP in options else 1)
            boundary = 4 * MICRO_BATCH * seq * arg("--d-model")
            m = GLOBAL_BATCH // (dp * MICRO_BATCH)
            for line in h.step_lines(metrics):
                self.assertIn("pp_wait_s", line, f"{name}: step line without pp_wait_s")
                moved = line["pp_bytes"]
                if moved // boundary != 2 * m * (2 * v - 1) or moved % boundary >= 64:
                    wrong.append(f"{name} step {line['step']}: pp_bytes {moved} = "
                                 f"{moved / boundary:.3f} boundary tensors of {boundary} B, "
                                 f"expected {2 * m * (2 * v - 1)} (+ a few scalars)")
        self.assertEqual(wrong, [], "pp_bytes of stage 0")

    # ---- 3. resume across pipelined layouts

    def resume(self, name, np, layout):
        _, src_dir = self.run_layout("tp2_pp2_1f1b")
        self.resume_like(h.checkpoint_file(src_dir, SAVE_AT), MODEL + layout, np, self.refs[4],
                         f"tp2_pp2->{name}")

    def test_c_resume_tp2_pp2_at_pp4(self):
        self.resume("pp4", 4, pipe(4, "1f1b"))

    def test_c_resume_tp2_pp2_at_serial(self):
        self.resume("serial", 1, [])

    def test_c_resume_across_splits(self):
        """A checkpoint written at 0,2,2,0 (pp 4) continues at pp 2's 1,3 and at the split
        --pipeline-layers auto chooses at pp 4, both as the serial run does."""
        _, src_dir = self.run_layout("pp4_gpipe_0_2_2_0")
        for name, np, layout in (
                ("pp2 1,3", 2, pipe(2, "1f1b", extra=["--pipeline-layers", "1,3"])),
                ("pp4 auto", 4, pipe(4, "1f1b", extra=["--pipeline-layers", "auto",
                                                       "--cluster", "dgx-h100"]))):
            self.resume_like(h.checkpoint_file(src_dir, SAVE_AT), MODEL + layout, np,
                             self.refs[4], f"0,2,2,0->{name}")

    def test_c_resume_across_splits_bit_for_bit(self):
        """Without clipping (its norm sums the stages' partial norms, grouped by the split) an
        update does not depend on where the blocks are: a checkpoint written at 0,2,2,0 (pp 4)
        continues at pp 2's 1,3 and at pp 2's even split to the final weights and optimizer
        state of the run that stayed at 0,2,2,0, bit for bit."""
        options = MODEL + ["--grad-clip", "0"]
        src = self.path("src")
        h.train(options + pipe(4, "gpipe", extra=["--pipeline-layers", "0,2,2,0"]) +
                ["--steps", STEPS, "--save-every", SAVE_AT, "--checkpoint-dir", src], np=4,
                timeout=RUN_TIMEOUT)
        for split in ("1,3", "even"):
            _, ck = h.train_resumed(self, options + pipe(2, "gpipe", extra=[
                "--pipeline-layers", split]), h.checkpoint_file(src, SAVE_AT), STEPS, 2,
                RUN_TIMEOUT)
            h.assert_checkpoints_identical(self, h.checkpoint_file(ck, STEPS),
                                           h.checkpoint_file(src, STEPS))

    def resume_same(self, name):
        """Resuming in the run's own layout gives its steps 4..6 and final file bit for bit."""
        np, layers, options, _ = LAYOUTS[name]
        metrics_full, src_dir = self.run_layout(name)
        got, ck = h.train_resumed(self, merged(h.with_options(MODEL, n_layer=layers), options),
                                  h.checkpoint_file(src_dir, SAVE_AT), STEPS, np, RUN_TIMEOUT)
        for key in ("loss", "grad_norm"):
            want = {s: v for s, v in h.by_step(metrics_full, key).items() if s > SAVE_AT}
            self.assertEqual(h.by_step(got, key), want, f"{name} resumed: {key} bit for bit")
        h.assert_checkpoints_identical(self, h.checkpoint_file(ck, STEPS),
                                       h.checkpoint_file(src_dir, STEPS))

    def test_c_resume_same_layout_tp2_pp2(self):
        self.resume_same("tp2_pp2_1f1b")

    def test_c_resume_same_layout_pp2_zbh1(self):
        self.resume_same("pp2_zbh1")

    def test_c_resume_same_layout_pp4_interleaved(self):
        self.resume_same("pp4_interleaved_L8")

    # ---- 4. evaluation through the pipeline

    def test_d_eval_pp2(self):
        serial = self.eval_loss(1, [])
        got = self.eval_loss(2, ["--pp", "2"])
        h.assert_close(self, got, serial, EVAL_REL, "eval loss at --pp 2 vs 1 rank")
        got = self.eval_loss(2, ["--pp", "2", "--pipeline-layers", "1,3"])
        h.assert_close(self, got, serial, EVAL_REL, "eval loss at --pp 2 split 1,3 vs 1 rank")

    def test_d_eval_auto_takes_the_trained_split(self):
        """eval --pipeline-layers auto runs a checkpoint trained at 0,2,2,0 (pp 4) at that split,
        and at even for --pp 2 (not a split of its 4 chunks); the losses are the 1-rank eval's."""
        _, src_dir = self.run_layout("pp4_gpipe_0_2_2_0")
        ck = h.checkpoint_file(src_dir, STEPS)
        serial = self.eval_loss(1, [], ck)
        for np, says in ((4, "pipeline layers: 0,2,2,0 (auto: the split the checkpoint was "
                              "trained with)"),
                         (2, "pipeline layers: even (auto: the checkpoint was trained at "
                             "0,2,2,0")):
            log = []
            got = self.eval_loss(np, ["--pp", str(np), "--pipeline-layers", "auto"], ck, log)
            self.assertIn(says, log[0])
            h.assert_close(self, got, serial, EVAL_REL, f"eval loss at --pp {np} auto vs 1 rank")

    def test_d_eval_pp2_tp2(self):
        serial = self.eval_loss(1, [])
        got = self.eval_loss(4, ["--pp", "2", "--tp", "2"])
        h.assert_close(self, got, serial, EVAL_REL, "eval loss at --pp 2 --tp 2 vs 1 rank")

    def test_d_val_loss_in_training(self):
        want = {m["step"]: m["val_loss"] for m in h.val_lines(self.refs[4]["metrics"])}
        self.assertEqual(sorted(want), [3, 6], "the serial run's val_loss steps")
        for name in ("pp2_1f1b", "pp2_interleaved"):
            metrics, _ = self.run_layout(name)
            got = {m["step"]: m["val_loss"] for m in h.val_lines(metrics)}
            self.assertEqual(sorted(got), [3, 6], f"{name}: val_loss steps")
            for step in want:
                h.assert_close(self, got[step], want[step], CURVE_REL,
                               f"{name}: val_loss at step {step}")

    # ---- 5. invalid pipeline settings

    def test_e_n_layer_not_multiple_of_pp(self):
        self.expect_error(2, h.with_options(MODEL, n_layer=3) + pipe(2, "1f1b"), "--n-layer")

    def test_e_interleaved_one_virtual_stage(self):
        self.expect_error(2, MODEL + pipe(2, "interleaved") + ["--virtual-stages", "1"],
                          "--virtual-stages")

    def test_e_interleaved_microbatches_not_multiple_of_pp(self):
        # 6 / (1 x 2) = 3 microbatches at pp 2
        self.expect_error(2, h.with_options(MODEL, global_batch_size=6) +
                          pipe(2, "interleaved", v=2), "--schedule")

    def test_e_zbh1_fewer_microbatches_than_pp(self):
        # 2 / (1 x 2) = 1 microbatch at pp 2
        self.expect_error(2, h.with_options(MODEL, global_batch_size=2) + pipe(2, "zb-h1"),
                          "--schedule")

    def test_e_virtual_stages_without_interleaved(self):
        self.expect_error(2, MODEL + pipe(2, "1f1b", v=2), "--virtual-stages")

    def test_e_pipeline_layers_that_do_not_fit(self):
        for counts, why in (("1,3", "names 2 model chunks but --pp 2 x --virtual-stages 2 is 4"),
                            ("2,0,1,1", "model chunk 1 holds neither the embedding nor the head"),
                            ("1,1,1,2", "adds up to 5 layers, not --n-layer 4"),
                            ("auto", "--pipeline-layers auto on the CPU needs --cluster FILE")):
            self.expect_error(2, MODEL + pipe(2, "interleaved", v=2,
                                              extra=["--pipeline-layers", counts]), why)

    def test_e_n_layer_not_multiple_of_pp_times_v(self):
        self.expect_error(2, h.with_options(MODEL, n_layer=6) + pipe(2, "interleaved", v=2),
                          "--n-layer")


h.add_layout_tests(PipelineTest, {
    name: ((name,), f"{name} against the 1-rank run") for name in LAYOUTS})

if __name__ == "__main__":
    h.main()
