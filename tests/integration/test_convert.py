"""convert (docs/CONVERT.md), end to end: a checkpoint through Hugging Face's layout and back is
bit for bit the same; a GPT-2 written in Hugging Face's names and Conv1D layout by an independent
PyTorch model here (random weights, this file's own safetensors writer) imports, and eval gives
that model's mean loss on the same windows at 1 rank and at tp 2 x pp 2; the llm.c file has
llm.c's header and tensor order; fine-tuning from an import takes a new seed and a shorter
sequence length; damaged files are one error line each and write nothing.
"""

import json
import math
import os
import re
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cli"))
import gpt_harness as h  # noqa: E402

try:
    import h5py
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as missing:  # pragma: no cover
    print(f"skipped: {missing}")
    sys.exit(77)

CFG = {"n_layer": 2, "n_head": 4, "n_embd": 32, "n_positions": 16, "vocab_size": 96}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def hf_random_weights(seed=7):
    """GPT-2 weights under Hugging Face's names, Conv1D weights as [in, out]."""
    g = torch.Generator().manual_seed(seed)
    D, L, V, T = CFG["n_embd"], CFG["n_layer"], CFG["vocab_size"], CFG["n_positions"]

    def rand(*shape, scale=0.1):
        return torch.randn(*shape, generator=g) * scale

    w = {"wte.weight": rand(V, D), "wpe.weight": rand(T, D),
         "ln_f.weight": 1 + rand(D), "ln_f.bias": rand(D)}
    for i in range(L):
        p = f"h.{i}."
        w.update({p + "ln_1.weight": 1 + rand(D), p + "ln_1.bias": rand(D),
                  p + "attn.c_attn.weight": rand(D, 3 * D), p + "attn.c_attn.bias": rand(3 * D),
                  p + "attn.c_proj.weight": rand(D, D), p + "attn.c_proj.bias": rand(D),
                  p + "ln_2.weight": 1 + rand(D), p + "ln_2.bias": rand(D),
                  p + "mlp.c_fc.weight": rand(D, 4 * D), p + "mlp.c_fc.bias": rand(4 * D),
                  p + "mlp.c_proj.weight": rand(4 * D, D), p + "mlp.c_proj.bias": rand(D)})
    return w


def hf_loss(w, inputs, targets):
    """Mean cross-entropy of a GPT-2 computed the way Hugging Face's Conv1D does: x @ W + b."""
    B, T = inputs.shape
    D, NH = CFG["n_embd"], CFG["n_head"]
    x = w["wte.weight"][inputs] + w["wpe.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(CFG["n_layer"]):
        p = f"h.{i}."
        a = F.layer_norm(x, (D,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        q, k, v = (a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]).split(D, dim=2)
        q, k, v = (t.view(B, T, NH, D // NH).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1) / math.sqrt(D // NH)).masked_fill(~mask, float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D)
        x = x + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
        m = F.layer_norm(x, (D,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        m = F.gelu(m @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + m @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (D,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    logits = x @ w["wte.weight"].T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)).item()


def write_safetensors(path, tensors, header_fix=None):
    """The format from its description: u64 header length, JSON header, raw float32 tensors."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if header_fix:
        header_fix(header)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def write_hf_dir(directory, weights, config=CFG, header_fix=None):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(dict(config, model_type="gpt2", activation_function="gelu_new",
                       layer_norm_epsilon=1e-5), f)
    write_safetensors(os.path.join(directory, "model.safetensors"), weights, header_fix)
    return directory


def model_datasets(path):
    with h5py.File(path, "r") as f:
        return {name: np.array(f["model"][name]) for name in f["model"]}


def assert_import_refused(test, directory, expected):
    """convert --from-hf DIR fails with one error line naming DIR and saying `expected`, and
    leaves no output file and no temporary folder."""
    output = test.path(os.path.basename(directory) + ".h5")
    r = h.run("convert", ["--from-hf", directory, "--output", output])
    test.assertEqual(r.returncode, 1, r.describe())
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    test.assertEqual(len(errors), 1, r.describe())
    test.assertIn(expected, errors[0])
    test.assertIn(directory, errors[0])
    test.assertFalse(os.path.exists(output))
    test.assertEqual([f for f in os.listdir(test.tmp) if "convert-tmp" in f], [])


class ConvertTest(h.TempDirTest):

    def convert(self, args, check=True):
        return h.run("convert", args, check=check)

    def test_round_trip_through_hf_is_bit_identical(self):
        ck = self.path("ck")
        h.train(["--steps", "2", "--checkpoint-dir", ck])
        original = h.checkpoint_file(ck, 2)
        self.convert(["--checkpoint", original, "--to-hf", self.path("hf")])
        with open(self.path("hf", "config.json")) as f:
            config = json.load(f)
        self.assertEqual((config["n_layer"], config["n_embd"], config["vocab_size"]), (2, 32, 256))
        self.convert(["--from-hf", self.path("hf"), "--output", self.path("back.h5")])
        a, b = model_datasets(original), model_datasets(self.path("back.h5"))
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertTrue(np.array_equal(a[name], b[name]), name)
        with h5py.File(self.path("back.h5"), "r") as f:
            self.assertEqual(f.attrs["tokenizer"], "bytes")  # carried in the metadata
            self.assertEqual(int(f.attrs["complete"]), 1)
        # Shards and their index come back the same way (Conv1D's transposes included).
        self.convert(["--checkpoint", original, "--to-hf", self.path("shards"),
                      "--max-shard-size", "20000"])
        self.assertTrue(os.path.exists(self.path("shards", "model.safetensors.index.json")))
        self.convert(["--from-hf", self.path("shards"), "--output", self.path("sharded.h5")])
        c = model_datasets(self.path("sharded.h5"))
        for name in a:
            self.assertTrue(np.array_equal(a[name], c[name]), name)
        # The bytes tokenizer has no Hugging Face files; a directory that is not empty is kept
        # unless --force.
        self.assertFalse(os.path.exists(self.path("hf", "vocab.json")))
        self.assertNotIn("eos_token_id", config)
        r = self.convert(["--checkpoint", original, "--to-hf", self.path("hf")], check=False)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("exists and is not an empty directory", r.stderr)
        # --force replaces the directory whole: a file of the old one does not stay, and the work
        # folders are gone.
        with open(self.path("hf", "stale.safetensors"), "w") as f:
            f.write("old")
        self.convert(["--checkpoint", original, "--to-hf", self.path("hf"), "--force"])
        self.assertFalse(os.path.exists(self.path("hf", "stale.safetensors")))
        self.assertTrue(os.path.exists(self.path("hf", "config.json")))
        self.assertEqual([f for f in os.listdir(self.tmp) if "convert-" in f], [])

    def test_independent_hf_model_evaluates_alike(self):
        weights = hf_random_weights()
        write_hf_dir(self.path("hf"), weights)
        self.convert(["--from-hf", self.path("hf"), "--output", self.path("model.h5")])
        with h5py.File(self.path("model.h5"), "r") as f:
            self.assertEqual(f.attrs["tokenizer"], "gpt2")
        # Exported again, a gpt2 checkpoint carries GPT-2's tokenizer files (stand-ins here).
        vocab, merges = self.path("encoder.json"), self.path("vocab.bpe")
        for path, text in ((vocab, '{"!": 0}'), (merges, "#version: 0.2\n")):
            with open(path, "w") as f:
                f.write(text)
        self.convert(["--checkpoint", self.path("model.h5"), "--to-hf", self.path("out"),
                      "--vocab", vocab, "--merges", merges])
        for name, text in (("vocab.json", '{"!": 0}'), ("merges.txt", "#version: 0.2\n")):
            with open(self.path("out", name)) as f:
                self.assertEqual(f.read(), text, name)
        with open(self.path("out", "tokenizer_config.json")) as f:
            self.assertEqual(json.load(f)["eos_token"], "<|endoftext|>")
        T, windows = CFG["n_positions"], 12
        tokens = np.random.default_rng(3).integers(0, CFG["vocab_size"], windows * T + 1)
        data = self.path("data.h5")
        with h5py.File(data, "w") as f:
            f.create_dataset("tokens", data=tokens.astype("uint16"))
            f.attrs["vocab_size"] = np.int64(CFG["vocab_size"])
            f.attrs["tokenizer"] = "gpt2"
        inputs = torch.tensor(tokens[:-1].reshape(windows, T), dtype=torch.long)
        targets = torch.tensor(tokens[1:].reshape(windows, T), dtype=torch.long)
        expected = hf_loss(weights, inputs, targets)
        for np_, layout in ((1, []), (4, ["--tp", "2", "--pp", "2"])):
            r = h.run("eval", ["--checkpoint", self.path("model.h5"), "--data", data,
                               "--eval-windows", windows, "--micro-batch-size", 4] + layout,
                      np=np_, check=True)
            got = float(re.search(r"loss ([0-9.]+)", r.stdout).group(1))
            h.assert_close(self, got, expected, 1e-5, f"eval loss at {np_} ranks {layout}")

    def test_llmc_file_has_llmcs_layout(self):
        ck = self.path("ck")
        h.train(["--steps", "1", "--checkpoint-dir", ck])
        path = h.checkpoint_file(ck, 1)
        self.convert(["--checkpoint", path, "--to-llmc", self.path("model.bin")])
        w = model_datasets(path)
        raw = np.fromfile(self.path("model.bin"), dtype="<f4")
        header = np.fromfile(self.path("model.bin"), dtype="<i4")[:256]
        self.assertEqual(list(header[:8]), [20240326, 3, 16, 256, 2, 4, 32, 256])
        self.assertTrue(np.all(header[8:] == 0))
        C, L, Vp, T = 32, 2, 256, 16
        order = [("wte", None), ("wpe", None)] + [
            (f"h.{i}.{kind}", None) for kind in (
                "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")
            for i in range(L)] + [("ln_f.weight", None), ("ln_f.bias", None)]
        at = 256
        for name, _ in order:
            n = w[name].size
            self.assertTrue(np.array_equal(raw[at:at + n], w[name].reshape(-1)), name)
            at += n
        self.assertEqual(at, raw.size)
        self.assertEqual(w["wte"].shape, (Vp, C))  # 256 is already a multiple of 128
        self.assertEqual(w["wpe"].shape, (T, C))

    def test_llmc_pads_the_vocabulary_with_zero_rows(self):
        write_hf_dir(self.path("hf"), hf_random_weights())
        self.convert(["--from-hf", self.path("hf"), "--output", self.path("m.h5")])
        self.convert(["--checkpoint", self.path("m.h5"), "--to-llmc", self.path("m.bin")])
        raw = np.fromfile(self.path("m.bin"), dtype="<f4")
        header = raw[:256].view("<i4")
        self.assertEqual(list(header[2:8]), [16, 96, 2, 4, 32, 128])
        wte = raw[256:256 + 128 * 32].reshape(128, 32)
        self.assertTrue(np.array_equal(wte[:96], model_datasets(self.path("m.h5"))["wte"]))
        self.assertTrue(np.all(wte[96:] == 0))

    def test_round_trip_through_llmc_is_bit_identical(self):
        write_hf_dir(self.path("hf"), hf_random_weights())  # vocab 96: padded to 128 and back
        self.convert(["--from-hf", self.path("hf"), "--output", self.path("m.h5")])
        self.convert(["--checkpoint", self.path("m.h5"), "--to-llmc", self.path("m.bin")])
        self.convert(["--from-llmc", self.path("m.bin"), "--output", self.path("back.h5")])
        a, b = model_datasets(self.path("m.h5")), model_datasets(self.path("back.h5"))
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertTrue(np.array_equal(a[name], b[name]), name)
        # Damaged: another magic, a file cut short.
        raw = open(self.path("m.bin"), "rb").read()
        cases = {"magic": (b"\0\0\0\0" + raw[4:], "not an llm.c model file"),
                 "short": (raw[:-8], "bytes, but its header's model needs")}
        for name, (data, expected) in cases.items():
            with self.subTest(case=name):
                path = self.path(name + ".bin")
                with open(path, "wb") as f:
                    f.write(data)
                r = self.convert(["--from-llmc", path, "--output", self.path(name + ".h5")],
                                 check=False)
                self.assertEqual(r.returncode, 1, r.describe())
                self.assertIn(expected, r.stderr)
                self.assertIn(path, r.stderr)
                self.assertFalse(os.path.exists(self.path(name + ".h5")))

    def test_fine_tuning_takes_a_new_seed_and_a_shorter_sequence(self):
        write_hf_dir(self.path("hf"), hf_random_weights())
        self.convert(["--from-hf", self.path("hf"), "--output", self.path("m.h5")])
        data = self.path("data.h5")
        tokens = np.random.default_rng(5).integers(0, CFG["vocab_size"], 4000)
        with h5py.File(data, "w") as f:
            f.create_dataset("tokens", data=tokens.astype("uint16"))
            f.attrs["vocab_size"] = np.int64(CFG["vocab_size"])
            f.attrs["tokenizer"] = "gpt2"
        ck = self.path("ck")
        r = h.train(["--init-from", self.path("m.h5"), "--data", data, "--seq-len", "8",
                     "--seed", "99", "--steps", "2", "--checkpoint-dir", ck])
        self.assertIn("positions truncated to the first 8", r.stdout, r.describe())
        out = h.checkpoint_file(ck, 2)
        self.assertEqual(int(h.load_checkpoint_attrs(out)["seed"]), 99)
        self.assertEqual(model_datasets(out)["wpe"].shape, (8, 32))
        r = h.train(["--init-from", self.path("m.h5"), "--data", data, "--seq-len", "32",
                     "--steps", "1", "--checkpoint-dir", self.path("ck2")],
                    check=False)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--seq-len 32 is longer than the 16 positions", r.stderr, r.describe())

    def test_damaged_hf_files_are_one_error_each(self):
        good = hf_random_weights()
        missing = dict(good)
        del missing["h.1.mlp.c_fc.bias"]
        misshaped = dict(good, **{"h.0.attn.c_attn.weight": torch.zeros(32, 64)})
        infinite = dict(good, **{"h.1.attn.c_proj.weight": good["h.1.attn.c_proj.weight"].clone()})
        infinite["h.1.attn.c_proj.weight"][3, 5] = float("inf")

        def lie_about_size(header):
            header["wpe.weight"]["data_offsets"][1] += 4

        def out_of_range(header):
            header["ln_f.bias"]["data_offsets"] = [10 ** 9, 10 ** 9 + 128]

        def bytes_tokenizer(header):  # as --to-hf of a bytes checkpoint records it
            header["__metadata__"] = {"format": "pt", "gpt_train.tokenizer": "bytes"}

        cases = {
            "missing": (missing, CFG, None, "has no tensor h.1.mlp.c_fc.bias"),
            "misshaped": (misshaped, CFG, None, "tensor h.0.attn.c_attn.weight has shape"),
            "lying": (good, CFG, lie_about_size, 'tensor "wpe.weight": data_offsets span'),
            "out_of_range": (good, CFG, out_of_range, 'tensor "ln_f.bias": data_offsets'),
            "config": (good, dict(CFG, n_embd=48), None, "needs"),
            # imported silently, then generate printed garbage with exit 0
            "infinite": (infinite, CFG, None,
                         'tensor "h.1.attn.c_proj.weight" holds +inf at element 101'),
            # 96 embedding rows for the 256 bytes: generate read past the embedding
            "bytes_rows": (good, CFG, bytes_tokenizer,
                           "records the tokenizer bytes (token b is byte b: 256 tokens) but its "
                           "model has 96 embedding rows"),
        }
        for name, (weights, config, fix, expected) in cases.items():
            with self.subTest(case=name):
                directory = write_hf_dir(self.path(name), weights, config, fix)
                assert_import_refused(self, directory, expected)

        header_too_long = self.path("header.safetensors")
        with open(header_too_long, "wb") as f:
            f.write(struct.pack("<Q", 1 << 40) + b"{}")
        os.makedirs(self.path("long"))
        os.replace(header_too_long, self.path("long", "model.safetensors"))
        with open(self.path("long", "config.json"), "w") as f:
            json.dump(CFG, f)
        r = self.convert(["--from-hf", self.path("long"), "--output", self.path("x.h5")],
                         check=False)
        self.assertEqual(r.returncode, 1, r.describe())
        self.assertIn("the header claims", r.stderr)


if __name__ == "__main__":
    h.main()
