"""Shared helpers for the CLI and end-to-end tests of the programs (train, eval, generate,
prepare-data): locating the binaries, running them (directly for one rank, through mpiexec for
more) with a timeout on every call, reading metrics files and checkpoints.

The test scripts are run by CTest as
    /usr/bin/python3 SCRIPT --bin DIR [--mpiexec PATH] [--mpiexec-flags "FLAGS"] [unittest args]
and exit non-zero when a test fails. tests/integration/*.py import this module from tests/cli/.
"""

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import unittest

# Filled in by init() from the command line.
BIN_DIR = None
MPIEXEC = "mpiexec"
MPIEXEC_FLAGS = ["--oversubscribe", "--bind-to", "none"]

# The environment CTest gives the tests (GPT_TEST_ENV); set here too so a script run by hand works.
_DEFAULT_ENV = {
    "OMP_NUM_THREADS": "1",
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "OMPI_MCA_odls_base_sigkill_timeout": "1",
}

# A tiny model and batch so that each run takes a second or two on one core.
TINY = ["--model", "tiny", "--global-batch-size", "8", "--micro-batch-size", "4",
        "--threads", "1", "--eval-every", "0", "--log-every", "1"]

DEFAULT_TIMEOUT = 60

# The equivalence tests' model and data (test_layouts.py, test_pipeline.py,
# test_distributed_optimizer.py): a batch every layout there splits (dp 4 x micro-batch 2 divides
# 16), and the random data order, which checks that every layout takes the same samples; with
# their tolerances against the serial run (EquivalenceTest below).
EQUIVALENCE_MODEL = [
    "--n-layer", "2", "--n-head", "4", "--d-model", "32", "--seq-len", "16",
    "--global-batch-size", "16", "--micro-batch-size", "2", "--threads", "1",
    "--eval-every", "0", "--data-order", "random", "--seed", "2024",
    "--lr", "0.01", "--min-lr", "0.001", "--warmup-steps", "2"]
CURVE_REL = 1e-5   # losses and gradient norms, relative
STATE_REL = 1e-4   # checkpoint tensors, relative by tensor norm
# Every equivalence run trains to step 6 with checkpoints at 3 and 6, so the lr schedule is the
# same in all of them and the step-3 files can be resumed.
EQUIVALENCE_STEPS = 6
EQUIVALENCE_SAVE_AT = 3


def with_options(model, **replace):
    """An option list with some values replaced: with_options(MODEL, n_layer=8)."""
    out = list(model)
    for key, value in replace.items():
        name = "--" + key.replace("_", "-")
        out[out.index(name) + 1] = str(value)
    return out


def init():
    """Parses --bin/--mpiexec/--mpiexec-flags and leaves the rest for unittest."""
    global BIN_DIR, MPIEXEC, MPIEXEC_FLAGS
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--bin", required=True, help="folder holding train, eval, ...")
    parser.add_argument("--mpiexec", default="mpiexec")
    parser.add_argument("--mpiexec-flags", default=None)
    args, rest = parser.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin)
    MPIEXEC = args.mpiexec
    if args.mpiexec_flags is not None:
        MPIEXEC_FLAGS = shlex.split(args.mpiexec_flags)
    for key, value in _DEFAULT_ENV.items():
        os.environ.setdefault(key, value)
    for program in ("train", "eval", "generate", "prepare-data"):
        path = os.path.join(BIN_DIR, program)
        if not os.access(path, os.X_OK):
            print(f"missing program {path}", file=sys.stderr)
            sys.exit(2)
    return [sys.argv[0]] + rest


class _TimedResult(unittest.TextTestResult):
    """Records each test's wall time, printed as a table at the end."""

    def startTest(self, test):
        self._started = time.monotonic()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        self.timings = getattr(self, "timings", [])
        self.timings.append((time.monotonic() - self._started, test.id().split(".", 1)[-1]))


def main():
    """Runs the unittest cases of __main__ with timings per test; exits 1 on any failure."""
    argv = init()
    runner = unittest.TextTestRunner(verbosity=2, stream=sys.stdout, resultclass=_TimedResult)
    program = unittest.main(module="__main__", argv=argv, testRunner=runner, exit=False)
    timings = getattr(program.result, "timings", [])
    if timings:
        print("\ntimings:")
        for seconds, name in timings:
            print(f"  {seconds:7.2f} s  {name}")
    sys.stdout.flush()
    sys.exit(0 if program.result.wasSuccessful() else 1)


def binary(program):
    return os.path.join(BIN_DIR, program)


class Result:
    """What one run left: exit code, stdout, stderr, wall seconds, the command line."""

    def __init__(self, cmd, returncode, stdout, stderr, seconds):
        self.cmd, self.returncode = cmd, returncode
        self.stdout, self.stderr, self.seconds = stdout, stderr, seconds

    def describe(self):
        return (f"command: {' '.join(shlex.quote(c) for c in self.cmd)}\n"
                f"exit code: {self.returncode} after {self.seconds:.1f} s\n"
                f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}")


class Timeout(AssertionError):
    pass


# Programs with --device: a run that does not name one is a CPU run, also on a machine with a
# GPU, where --device auto would take it (the gpu tests name their device).
DEVICE_PROGRAMS = ("train", "eval", "generate", "serve")


def on_cpu_unless_named(program, args):
    """args as strings, with --device cpu added where the program takes a device and args name
    none (and do not ask for --help)."""
    args = [str(a) for a in args]
    names_device = any(a == "--device" or a.startswith("--device=") for a in args)
    if program in DEVICE_PROGRAMS and not names_device and "--help" not in args:
        args += ["--device", "cpu"]
    return args


def command(program, args, np=1):
    """The command line: the program alone at np=1 (an MPI singleton), mpiexec -n np otherwise."""
    cmd = [binary(program)] + on_cpu_unless_named(program, args)
    if np and np > 1:
        cmd = [MPIEXEC] + MPIEXEC_FLAGS + ["-n", str(np)] + cmd
    return cmd


def run(program, args, np=1, timeout=DEFAULT_TIMEOUT, cwd=None, check=False):
    """Runs a program to its end, killing its whole process group after `timeout` seconds
    (a hang becomes a test failure, never a blocked suite)."""
    cmd = command(program, args, np)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                            start_new_session=True, text=True, errors="replace")
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        stdout, stderr = proc.communicate()
        result = Result(cmd, None, stdout, stderr, time.monotonic() - start)
        raise Timeout(f"timed out after {timeout} s (a hang?)\n" + result.describe())
    result = Result(cmd, proc.returncode, stdout, stderr, time.monotonic() - start)
    if check and result.returncode != 0:
        raise AssertionError("expected exit code 0\n" + result.describe())
    return result


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def with_tiny(args):
    """TINY's options, less those that args gives itself (an option may appear only once),
    then args."""
    args = [str(a) for a in args]
    given = {a for a in args if a.startswith("--")}
    base = []
    for name, value in zip(TINY[::2], TINY[1::2]):
        if name not in given:
            base += [name, value]
    return base + args


def train(args, np=1, timeout=DEFAULT_TIMEOUT, tiny=True, check=True, cwd=None):
    """Runs train (with the TINY options unless tiny=False); by default a non-zero exit fails.
    A run that finishes also proves the memory model (docs/MEMORY.md): no rank may report its
    measured peaks differing from the prediction, and the metrics file's measured memory events
    must equal the predicted ones, category by category."""
    args = with_tiny(args) if tiny else list(args)
    result = run("train", args, np=np, timeout=timeout, check=check, cwd=cwd)
    if result.returncode == 0:
        check_memory_prediction(args, result, cwd)
    return result


def check_memory_prediction(args, result, cwd=None):
    text = result.stdout + result.stderr
    if "differs from the prediction" in text:
        raise AssertionError("measured memory differs from the memory model:\n" + text[-4000:])
    if "--metrics" not in args:
        return
    path = str(args[args.index("--metrics") + 1])
    path = path if os.path.isabs(path) or cwd is None else os.path.join(cwd, path)
    if not os.path.exists(path):
        return
    predicted = {}
    for event in read_metrics(path):
        if event.get("event") != "memory":
            continue
        if event["kind"] == "predicted":
            predicted[event["rank"]] = event["bytes"]
        elif event["bytes"] != predicted.get(event["rank"]):
            raise AssertionError(f"{path}: rank {event['rank']} measured {event['bytes']}, "
                                 f"predicted {predicted.get(event['rank'])}")


def train_resumed(test, options, checkpoint, steps, np=1, timeout=DEFAULT_TIMEOUT):
    """Continues `checkpoint` with `options` to --steps `steps`, checkpoints in a fresh folder of
    `test`'s temporary directory, and checks that the run says it resumed. Returns its metrics
    lines and the folder of its checkpoints."""
    ck, metrics = test.path("ck"), test.path("m.jsonl")
    result = train(options + ["--steps", steps, "--resume", checkpoint, "--checkpoint-dir", ck,
                              "--metrics", metrics], np=np, timeout=timeout)
    test.assertIn("resumed from", result.stdout + result.stderr, result.describe())
    return read_metrics(metrics), ck


def read_metrics(path):
    """The JSON objects of a metrics file, one per line (a broken line fails the test)."""
    lines = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    lines.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise AssertionError(f"{path}:{number}: not JSON ({e}): {line!r}")
    return lines


def step_lines(metrics):
    return [m for m in metrics if "loss" in m]


def val_lines(metrics):
    return [m for m in metrics if "val_loss" in m]


def by_step(metrics, key):
    """{step: value} for the step lines; a step logged twice must carry the same value."""
    out = {}
    for m in step_lines(metrics):
        if m["step"] in out and out[m["step"]] != m[key]:
            raise AssertionError(f"step {m['step']} logged twice with different {key}: "
                                 f"{out[m['step']]!r} vs {m[key]!r}")
        out[m["step"]] = m[key]
    return out


def checkpoint_file(directory, step):
    return os.path.join(directory, f"step-{step:08d}.h5")


def step_files(directory):
    return sorted(f for f in os.listdir(directory) if f.startswith("step-") and f.endswith(".h5"))


def read_latest(directory):
    with open(os.path.join(directory, "latest")) as f:
        return f.read().strip()


def load_checkpoint(path):
    """{'attrs': root attributes, 'optimizer_attrs': ..., 'data': {dataset path: array}}."""
    import h5py
    import numpy as np
    out = {"attrs": {}, "optimizer_attrs": {}, "data": {}}
    with h5py.File(path, "r") as f:
        for k, v in f.attrs.items():
            out["attrs"][k] = v.decode() if isinstance(v, bytes) else v
        if "optimizer" in f:
            for k, v in f["optimizer"].attrs.items():
                out["optimizer_attrs"][k] = v.decode() if isinstance(v, bytes) else v

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                out["data"]["/" + name] = np.array(obj[()])
        f.visititems(visit)
    return out


def config_of(path):
    """The checkpoint's config attribute, parsed."""
    attrs = load_checkpoint_attrs(path)
    return json.loads(attrs["config"])


def load_checkpoint_attrs(path):
    import h5py
    with h5py.File(path, "r") as f:
        return {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}


def metadata_crc32(f):
    """The metadata_crc32 of an open h5py checkpoint, computed from its attributes and datasets
    as docs/FORMATS.md describes it: what a test that edits a checkpoint on purpose (past the
    checksum) writes back, and a check that the format's description is the implementation."""
    import struct
    import zlib

    def text(value):
        return value.decode() if isinstance(value, bytes) else str(value)

    def put(key, value):
        data = text(value).encode()
        return key.encode() + b" " + str(len(data)).encode() + b":" + data + b"\n"

    a = f.attrs
    out = b"".join(put(k, a[k]) for k in ("format", "format_version", "step", "consumed_samples"))
    out += put("seed", int(a["seed"]) % 2 ** 64)
    out += b"".join(put(k, a[k]) for k in ("config", "tokenizer", "layout"))
    datasets = []
    f.visititems(lambda name, obj: datasets.append("/" + name) if hasattr(obj, "shape") else None)
    if "optimizer" in f:
        g = f["optimizer"].attrs
        out += put("optimizer.type", g["type"]) + put("optimizer.step", int(g["step"]))
        for name in sorted(k for k in g if k not in ("type", "step")):
            bits = struct.unpack("<Q", struct.pack("<d", float(g[name])))[0]
            out += put("optimizer." + name, bits)
    for name in sorted(datasets):
        d = f[name]
        shape = "".join(f"{n}," for n in d.shape)
        out += put(name, f"{shape} crc32 {int(d.attrs['crc32']) % 2 ** 32}")
    return zlib.crc32(out)


def assert_checkpoints_identical(test, path_a, path_b):
    """Every /model/* and /optimizer/* dataset byte-identical, and the counters equal."""
    import numpy as np
    a, b = load_checkpoint(path_a), load_checkpoint(path_b)
    names_a = sorted(n for n in a["data"] if n.startswith(("/model/", "/optimizer/")))
    names_b = sorted(n for n in b["data"] if n.startswith(("/model/", "/optimizer/")))
    test.assertEqual(names_a, names_b, f"datasets of {path_a} and {path_b} differ")
    test.assertTrue(any(n.startswith("/optimizer/") for n in names_a),
                    f"{path_a} has no /optimizer datasets")
    different = [n for n in names_a if a["data"][n].dtype != b["data"][n].dtype
                 or not np.array_equal(a["data"][n], b["data"][n])]
    test.assertEqual(different, [], f"datasets that differ between {path_a} and {path_b}")
    for key in ("step", "consumed_samples", "seed", "complete"):
        test.assertEqual(int(a["attrs"][key]), int(b["attrs"][key]), f"root attribute {key}")
    test.assertEqual(int(a["optimizer_attrs"]["step"]), int(b["optimizer_attrs"]["step"]),
                     "/optimizer step attribute")


def assert_close(test, a, b, rel, what):
    denom = max(abs(a), abs(b), 1e-30)
    test.assertLessEqual(abs(a - b) / denom, rel, f"{what}: {a!r} vs {b!r} (relative {rel})")


class TempDirTest(unittest.TestCase):
    """A fresh temporary folder per test, removed afterwards (kept when GPT_KEEP_TEST_DIRS=1)."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="gpt-test-")
        self.tmp = self._tmp.name

    def tearDown(self):
        if os.environ.get("GPT_KEEP_TEST_DIRS") == "1":
            print(f"kept {self.tmp}")
            self._tmp._finalizer.detach()
        else:
            self._tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)


class WorstDifferences:
    """For test classes that compare runs: note() keeps the worst relative difference seen per
    quantity (each class sets its own `worst = {}`), report_worst() prints them, from
    tearDownClass, so a log shows how close each comparison came to its tolerance."""

    worst = {}  # what -> (relative difference, where)

    @classmethod
    def note(cls, what, rel, where):
        if what not in cls.worst or rel > cls.worst[what][0]:
            cls.worst[what] = (rel, where)

    @classmethod
    def report_worst(cls, title):
        if not cls.worst:
            return
        print(f"\n{title}:")
        for what in sorted(cls.worst):
            rel, where = cls.worst[what]
            print(f"  {what:<28} {rel:.3e}  ({where})")
        sys.stdout.flush()


def rel_norm_diff(a, b):
    """||a - b|| / ||b|| in float64 (0 when both are zero)."""
    import numpy as np
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    diff, ref = np.linalg.norm(a - b), np.linalg.norm(b)
    if ref == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return float(diff / ref)


def assert_curve_close(test, got, ref, steps, rel_tol, name, note=None):
    """Per-step loss and grad norm of metrics `got` within rel_tol of `ref` at `steps`."""
    for key in ("loss", "grad_norm"):
        values, want = by_step(got, key), by_step(ref, key)
        test.assertEqual(sorted(values), list(steps), f"{name}: steps logged ({key})")
        for s in steps:
            assert_close(test, values[s], want[s], rel_tol, f"{name}: {key} at step {s}")
            if note:
                note(key, abs(values[s] - want[s]) / max(abs(values[s]), abs(want[s]), 1e-30),
                     f"{name} step {s}")


def assert_state_close(test, path, ref, rel_tol, name, note=None):
    """Every /model and /optimizer dataset of the checkpoint at path within rel_tol (by tensor
    norm: rounding noise in gradients that are zero in exact arithmetic rules out element-wise
    comparisons) of `ref` (a load_checkpoint result), with the same counters."""
    got = load_checkpoint(path)
    for key in ("step", "consumed_samples", "complete"):
        test.assertEqual(int(got["attrs"][key]), int(ref["attrs"][key]),
                         f"{name}: root attribute {key}")
    test.assertEqual(int(got["optimizer_attrs"]["step"]), int(ref["optimizer_attrs"]["step"]),
                     f"{name}: /optimizer step")
    for group in ("/model/", "/optimizer/"):
        names = sorted(n for n in ref["data"] if n.startswith(group))
        test.assertTrue(names, f"the reference has no {group} datasets")
        test.assertEqual(sorted(n for n in got["data"] if n.startswith(group)), names,
                         f"{name}: {group} datasets")
        worst, worst_name = 0.0, None
        for n in names:
            test.assertEqual(got["data"][n].shape, ref["data"][n].shape, f"{name}: {n} shape")
            rel = rel_norm_diff(got["data"][n], ref["data"][n])
            if rel >= worst:
                worst, worst_name = rel, n
        if note:
            note(group.strip("/") + " (by norm)", worst, f"{name} {worst_name}")
        test.assertLessEqual(worst, rel_tol,
                             f"{name}: {worst_name} differs from the 1-rank run by "
                             f"{worst:.3e} relative (norm)")


def train_to(folder, options, steps, save_every, np=1, timeout=DEFAULT_TIMEOUT):
    """Trains `options` to --steps `steps` with a checkpoint every `save_every` steps: the
    checkpoints in folder/ck, the metrics in folder/m.jsonl (folder made if missing). Returns
    (metrics lines, checkpoint folder, Result)."""
    ck, metrics = os.path.join(folder, "ck"), os.path.join(folder, "m.jsonl")
    os.makedirs(folder, exist_ok=True)
    result = train(list(options) + ["--steps", steps, "--save-every", save_every,
                                    "--checkpoint-dir", ck, "--metrics", metrics],
                   np=np, timeout=timeout)
    return read_metrics(metrics), ck, result


class EquivalenceTest(TempDirTest, WorstDifferences):
    """Base of the suites that train layouts and compare them with 1-rank runs
    (tests/integration/test_layouts.py, test_pipeline.py, test_distributed_optimizer.py). Each
    run trains to STEPS with a checkpoint every SAVE_AT steps, in a folder of one of two
    class-wide temporary directories: the references' (train_reference) and the layout runs'
    (train_layout, kept in `runs` for the tests that reuse them). Both are removed at the end,
    after the worst relative differences seen are printed. A subclass sets its own `worst = {}`
    and PREFIX and calls make_folders() first in its setUpClass."""

    STEPS = EQUIVALENCE_STEPS
    SAVE_AT = EQUIVALENCE_SAVE_AT
    CURVE_REL = CURVE_REL  # a suite whose runs round more (bf16) states its own bounds
    STATE_REL = STATE_REL
    RUN_TIMEOUT = 60
    PREFIX = "gpt-equivalence"
    WORST_TITLE = "worst relative differences against the 1-rank run"

    @classmethod
    def make_folders(cls):
        cls._ref = tempfile.TemporaryDirectory(prefix=cls.PREFIX + "-ref-")
        cls._runs = tempfile.TemporaryDirectory(prefix=cls.PREFIX + "-runs-")
        cls.runs = {}

    @classmethod
    def tearDownClass(cls):
        cls._ref.cleanup()
        cls._runs.cleanup()
        cls.report_worst(cls.WORST_TITLE)

    @classmethod
    def train_reference(cls, name, options):
        """A 1-rank run of `options` in the references' folder `name`: {"metrics": its lines,
        "ck": its checkpoint folder, "final": its step-STEPS checkpoint, loaded}."""
        metrics, ck, _ = train_to(os.path.join(cls._ref.name, name), options, cls.STEPS,
                                  cls.SAVE_AT, timeout=cls.RUN_TIMEOUT)
        return {"metrics": metrics, "ck": ck,
                "final": load_checkpoint(checkpoint_file(ck, cls.STEPS))}

    @classmethod
    def train_layout(cls, name, options, np):
        """A run of `options` on `np` ranks in the layout runs' folder `name`: (metrics lines,
        checkpoint folder, Result)."""
        return train_to(os.path.join(cls._runs.name, name), options, cls.STEPS, cls.SAVE_AT,
                        np=np, timeout=cls.RUN_TIMEOUT)

    def assert_like(self, metrics, ck, ref, steps, name):
        """The run's per-step loss and gradient norm at `steps` within CURVE_REL of reference
        `ref`'s, and every /model and /optimizer dataset of its step-STEPS checkpoint (in folder
        `ck`) within STATE_REL of ref's final one by tensor norm; the worst differences noted."""
        assert_curve_close(self, metrics, ref["metrics"], steps, self.CURVE_REL, name, self.note)
        assert_state_close(self, checkpoint_file(ck, self.STEPS), ref["final"], self.STATE_REL,
                           name, self.note)

    def resume_like(self, checkpoint, options, np, ref, name):
        """Continues `checkpoint` with `options` on `np` ranks to STEPS; its steps after SAVE_AT
        and its final checkpoint as assert_like checks them against `ref`."""
        metrics, ck = train_resumed(self, options, checkpoint, self.STEPS, np, self.RUN_TIMEOUT)
        self.assert_like(metrics, ck, ref, range(self.SAVE_AT + 1, self.STEPS + 1), name)

    def assert_same_run(self, metrics, ck, ref):
        """Bit for bit the reference `ref`: the loss and gradient norm of every step, and the
        final checkpoint."""
        for key in ("loss", "grad_norm"):
            self.assertEqual(by_step(metrics, key), by_step(ref["metrics"], key), key)
        assert_checkpoints_identical(self, checkpoint_file(ck, self.STEPS),
                                     checkpoint_file(ref["ck"], self.STEPS))


def add_layout_tests(cls, cases):
    """For each `name: (arguments, docstring)` of `cases`, a test test_a_<name> of `cls` calling
    cls.check_layout(*arguments). "test_a_..." sorts the layouts before the tests that reuse
    their runs."""
    for name, (arguments, doc) in cases.items():
        def test(self, arguments=arguments):
            self.check_layout(*arguments)
        test.__name__ = f"test_a_{name}"
        test.__doc__ = doc
        setattr(cls, test.__name__, test)
