"""convert with Hugging Face's Llama family (docs/CONVERT.md "The Llama family"), end to end: a
tiny Llama (grouped-query attention, untied head, Llama 3.1 rope scaling; BF16 in two shards
with an index), a Qwen2 (q, k, v biases, tied) and a Qwen3 (q and k norms, head_dim other than
hidden / heads), each written here under Hugging Face's names and config.json with this file's
own safetensors writer, import; eval gives the loss tests/reference/torch_llama.py computes on
the same windows at 1 rank and at tp 2 x pp 2; --to-hf and back is bit for bit (F32, and BF16
for a BF16 source, sharded too); bad directories are one error line each and write nothing.
"""

import copy
import json
import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
import gpt_harness as h  # noqa: E402

try:
    import h5py
    import numpy as np
    import torch
    import torch_llama
    from test_convert import assert_import_refused, model_datasets
except ImportError as missing:  # pragma: no cover
    print(f"skipped: {missing}")
    sys.exit(77)

VOCAB, T, WINDOWS = 96, 16, 8

BASE = {"hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": VOCAB,
        "max_position_embeddings": T, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "hidden_act": "silu"}
LLAMA = dict(BASE, architectures=["LlamaForCausalLM"], model_type="llama",
             tie_word_embeddings=False, attention_bias=False,
             rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
QWEN2 = dict(BASE, architectures=["Qwen2ForCausalLM"], model_type="qwen2",
             tie_word_embeddings=True, use_sliding_window=False, sliding_window=4096,
             rope_scaling=None)
QWEN3 = dict(BASE, architectures=["Qwen3ForCausalLM"], model_type="qwen3", head_dim=16,
             max_position_embeddings=64, tie_word_embeddings=False, attention_bias=False,
             use_sliding_window=False)


def head_dim(cfg):
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def hf_weights(cfg, seed):
    """Random weights under Hugging Face's names (model. prefix, nn.Linear [out, in])."""
    g = torch.Generator().manual_seed(seed)
    C, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    Q = cfg["num_attention_heads"] * head_dim(cfg)
    KV = cfg["num_key_value_heads"] * head_dim(cfg)

    def rand(*shape, scale=0.2):
        return torch.randn(*shape, generator=g) * scale

    w = {"model.embed_tokens.weight": rand(V, C), "model.norm.weight": 1 + rand(C)}
    if not cfg["tie_word_embeddings"]:
        w["lm_head.weight"] = rand(V, C)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        w.update({p + "input_layernorm.weight": 1 + rand(C),
                  p + "self_attn.q_proj.weight": rand(Q, C),
                  p + "self_attn.k_proj.weight": rand(KV, C),
                  p + "self_attn.v_proj.weight": rand(KV, C),
                  p + "self_attn.o_proj.weight": rand(C, Q),
                  p + "post_attention_layernorm.weight": 1 + rand(C),
                  p + "mlp.gate_proj.weight": rand(F, C),
                  p + "mlp.up_proj.weight": rand(F, C),
                  p + "mlp.down_proj.weight": rand(C, F)})
        if cfg["model_type"] == "qwen2":
            w.update({p + "self_attn.q_proj.bias": rand(Q), p + "self_attn.k_proj.bias": rand(KV),
                      p + "self_attn.v_proj.bias": rand(KV)})
        if cfg["model_type"] == "qwen3":
            w.update({p + "self_attn.q_norm.weight": 1 + rand(head_dim(cfg)),
                      p + "self_attn.k_norm.weight": 1 + rand(head_dim(cfg))})
    return w


def tensor_bytes(t, dtype):
    if dtype == "BF16":
        return t.to(torch.bfloat16).contiguous().view(torch.int16).numpy().astype("<i2").tobytes()
    return t.to(torch.float32).contiguous().numpy().astype("<f4").tobytes()


def write_safetensors(path, tensors, dtype):
    """The format from its description: u64 header length, JSON header, raw tensors."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t, dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_safetensors_raw(path):
    """{name: (dtype, shape, raw bytes)} of a safetensors file."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}


def read_hf_dir_raw(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    files = ["model.safetensors"]
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    out = {}
    for name in files:
        out.update(read_safetensors_raw(os.path.join(directory, name)))
    return out


def write_hf_dir(directory, cfg, weights, dtype="F32", shards=1, index_fix=None):
    """config.json and the weights: model.safetensors, or `shards` files and their index."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(cfg, f)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), weights, dtype)
        return directory
    names = list(weights)
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: weights[n] for n in names[s::shards]}
        write_safetensors(os.path.join(directory, file), part, dtype)
        weight_map.update({n: file for n in part})
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    if index_fix:
        index_fix(index)
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    return directory


def reference_config(cfg):
    """torch_llama's config from config.json, mapped by this test."""
    scaling = cfg.get("rope_scaling")
    return {"n_head": cfg["num_attention_heads"], "n_kv_head": cfg["num_key_value_heads"],
            "head_dim": head_dim(cfg), "n_layer": cfg["num_hidden_layers"],
            "norm_eps": cfg["rms_norm_eps"], "rope_theta": cfg["rope_theta"],
            "rope_scaling": dict(scaling, type=scaling["rope_type"]) if scaling else None,
            "tie_embeddings": cfg["tie_word_embeddings"],
            "qk_norm": cfg["model_type"] == "qwen3"}


def reference_loss(cfg, weights, dtype, inputs, targets):
    """The mean loss in float64 of the weights as stored (BF16 rounded)."""
    w = {}
    for name, t in weights.items():
        stored = t.to(torch.bfloat16) if dtype == "BF16" else t.to(torch.float32)
        w[name[len("model."):] if name.startswith("model.") else name] = stored.double()
    return torch_llama.llama_loss(w, reference_config(cfg), inputs, targets).item()


class LlamaHfTest(h.TempDirTest):

    def convert(self, args, check=True):
        return h.run("convert", args, check=check)

    def make_data(self):
        tokens = np.random.default_rng(3).integers(0, VOCAB, WINDOWS * T + 1)
        path = self.path("data.h5")
        with h5py.File(path, "w") as f:
            f.create_dataset("tokens", data=tokens.astype("uint16"))
            f.attrs["vocab_size"] = np.int64(VOCAB)
            f.attrs["tokenizer"] = "bytes"
        inputs = torch.tensor(tokens[:-1].reshape(WINDOWS, T), dtype=torch.long)
        targets = torch.tensor(tokens[1:].reshape(WINDOWS, T), dtype=torch.long)
        return path, inputs, targets

    def assert_same_models(self, a, b):
        a, b = model_datasets(a), model_datasets(b)
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            self.assertTrue(np.array_equal(a[name], b[name]), name)

    def test_imports_evaluate_like_the_reference_and_round_trip(self):
        data, inputs, targets = self.make_data()
        cases = {"llama": (LLAMA, "BF16", 2, []),
                 "qwen2": (QWEN2, "F32", 1, []),
                 "qwen3": (QWEN3, "F32", 1, ["--seq-len", str(T)])}
        for seed, (name, (cfg, dtype, shards, extra)) in enumerate(cases.items()):
            with self.subTest(model=name):
                weights = hf_weights(cfg, seed)
                source = write_hf_dir(self.path(name), cfg, weights, dtype, shards)
                model = self.path(name + ".h5")
                self.convert(["--from-hf", source, "--output", model] + extra)
                ck = h.config_of(model)
                self.assertEqual((ck["arch"], ck["seq_len"], ck["n_kv_head"], ck["head_dim"]),
                                 ("llama", T, 2, head_dim(cfg)))
                self.assertEqual((ck["qkv_bias"], ck["qk_norm"]),
                                 (name == "qwen2", name == "qwen3"))
                self.assertEqual(h.load_checkpoint_attrs(model)["tokenizer"], "hf:" + name)
                expected = reference_loss(cfg, weights, dtype, inputs, targets)
                for np_, layout in ((1, []), (4, ["--tp", "2", "--pp", "2"])):
                    r = h.run("eval", ["--checkpoint", model, "--data", data, "--eval-windows",
                                       WINDOWS, "--micro-batch-size", 4] + layout,
                              np=np_, check=True)
                    got = float(re.search(r"loss ([0-9.]+)", r.stdout).group(1))
                    print(f"{name} at {np_} ranks: eval {got:.6f}, torch {expected:.6f}, "
                          f"relative {abs(got - expected) / expected:.1e}")
                    h.assert_close(self, got, expected, 1e-5, f"{name} eval loss at {np_} ranks")

                # Out at the source's precision (Qwen3 in shards of at most 20 KB) and back.
                out = self.path(name + "-out")
                export = ["--checkpoint", model, "--to-hf", out]
                export += ["--dtype", "bf16"] if dtype == "BF16" else []
                export += ["--max-shard-size", "20000"] if name == "qwen3" else []
                self.convert(export)
                with open(os.path.join(out, "config.json")) as f:
                    config = json.load(f)
                self.assertEqual(config["architectures"], cfg["architectures"])
                for key in ("hidden_size", "intermediate_size", "num_attention_heads",
                            "num_key_value_heads", "num_hidden_layers", "vocab_size",
                            "rms_norm_eps", "rope_theta", "tie_word_embeddings"):
                    self.assertEqual(config[key], cfg[key], key)
                self.assertEqual(config["head_dim"], head_dim(cfg))
                self.assertEqual(config["torch_dtype"],
                                 "bfloat16" if dtype == "BF16" else "float32")
                self.assertEqual(config["rope_scaling"], cfg.get("rope_scaling"))
                self.assertEqual(os.path.exists(os.path.join(out, "model.safetensors.index.json")),
                                 name == "qwen3")
                written, original = read_hf_dir_raw(out), read_hf_dir_raw(source)
                self.assertEqual(sorted(written), sorted(original))
                for tensor, (stored_dtype, shape, raw) in original.items():
                    self.assertEqual(written[tensor], (stored_dtype, shape, raw), tensor)
                back = self.path(name + "-back.h5")
                self.convert(["--from-hf", out, "--output", back] + extra)
                self.assert_same_models(model, back)

        # F32 weights exported at BF16 round to nearest even, as torch rounds them.
        self.convert(["--checkpoint", self.path("qwen2.h5"), "--to-hf", self.path("bf16"),
                      "--dtype", "bf16"])
        weights, written = hf_weights(QWEN2, 1), read_hf_dir_raw(self.path("bf16"))
        for tensor, t in weights.items():
            self.assertEqual(written[tensor][2], tensor_bytes(t, "BF16"), tensor)

    def test_bad_directories_are_one_error_each(self):
        good = hf_weights(LLAMA, 0)
        missing = dict(good)
        del missing["model.layers.1.mlp.up_proj.weight"]
        misshaped = dict(good, **{"model.layers.0.self_attn.k_proj.weight": torch.zeros(8, 32)})
        nan = dict(good)  # refused while the checkpoint is written: no folder may stay behind
        nan["model.layers.1.mlp.down_proj.weight"] = good["model.layers.1.mlp.down_proj.weight"] * 1
        nan["model.layers.1.mlp.down_proj.weight"][0, 2] = float("nan")

        def lost_shard(index):
            index["weight_map"]["model.norm.weight"] = "model-00003-of-00003.safetensors"

        def with_cfg(**changes):
            out = copy.deepcopy(LLAMA)
            out.update(changes)
            return out

        mistral = with_cfg(architectures=["MistralForCausalLM"], model_type="mistral",
                           sliding_window=8)
        cases = {
            "architecture": (with_cfg(architectures=["FalconForCausalLM"]), good, 1, None,
                             'architectures "FalconForCausalLM"'),
            "missing": (LLAMA, missing, 1, None,
                        "has no tensor model.layers.1.mlp.up_proj.weight"),
            "misshaped": (LLAMA, misshaped, 1, None,
                          "tensor model.layers.0.self_attn.k_proj.weight has shape [8, 32]"),
            "lost_shard": (LLAMA, good, 2, lost_shard, "model-00003-of-00003.safetensors"),
            "disagreeing": (with_cfg(num_key_value_heads=4), good, 1, None,
                            "has shape [16, 32] but"),
            "sliding_window": (mistral, good, 1, None, "sliding_window 8 is shorter"),
            "use_sliding_window": (dict(QWEN2, use_sliding_window=True), hf_weights(QWEN2, 1), 1,
                                   None, "use_sliding_window true"),
            "rope": (with_cfg(rope_scaling={"rope_type": "yarn", "factor": 4.0}), good, 1, None,
                     "rope_scaling: type \"yarn\""),
            "experts": (with_cfg(num_local_experts=8), good, 1, None, "num_local_experts > 0"),
            "activation": (with_cfg(hidden_act="gelu"), good, 1, None, "hidden_act \"gelu\""),
            "nan": (LLAMA, nan, 2, None,
                    'tensor "model.layers.1.mlp.down_proj.weight" holds NaN at element 2'),
        }
        for name, (cfg, weights, shards, fix, expected) in cases.items():
            with self.subTest(case=name):
                directory = write_hf_dir(self.path(name), cfg, weights, "F32", shards, fix)
                assert_import_refused(self, directory, expected)

    def test_fine_tunes_an_imported_model_at_tp2(self):
        """train --init-from an imported Llama at tp 2, the optimizer fresh, at a --seq-len below
        its context: the validation loss on a learnable data set (a repeating pattern, tokenizer
        hf:llama as the model's) falls, and --to-hf of the fine-tune writes back the imported
        model's context (max_position_embeddings 64, not the fine-tune's 16: serve then reported
        a context of 16), rope scaling, bos and eos ids and generation_config.json."""
        cfg = dict(LLAMA, max_position_embeddings=4 * T, bos_token_id=1, eos_token_id=[2, 3])
        source = write_hf_dir(self.path("llama"), cfg, hf_weights(LLAMA, 0), "F32", 1)
        generation = {"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": True,
                      "temperature": 0.6, "top_p": 0.9}
        with open(os.path.join(source, "generation_config.json"), "w") as f:
            json.dump(generation, f)
        model = self.path("llama.h5")
        self.convert(["--from-hf", source, "--output", model])
        pattern = (np.arange(4096) * 7 % 23).astype("uint16")
        for name in ("train", "val"):
            with h5py.File(self.path(name + ".h5"), "w") as f:
                f.create_dataset("tokens", data=pattern)
                f.attrs["vocab_size"] = np.int64(VOCAB)
                f.attrs["tokenizer"] = "hf:llama"
        metrics = self.path("metrics.jsonl")
        h.train(["--init-from", model, "--data", self.path("train.h5"), "--val-data",
                 self.path("val.h5"), "--tp", 2, "--steps", 12, "--eval-every", 6,
                 "--eval-windows", 4, "--global-batch-size", 8, "--micro-batch-size", 4,
                 "--lr", 1e-2, "--warmup-steps", 2, "--threads", 1, "--seq-len", T,
                 "--checkpoint-dir", self.path("ck"), "--metrics", metrics], np=2, tiny=False,
                timeout=120)
        before = h.run("eval", ["--checkpoint", model, "--data", self.path("val.h5"),
                                "--eval-windows", 4, "--seq-len", T, "--threads", 1], check=True)
        vals = [float(re.search(r"loss ([0-9.]+)", before.stdout).group(1))]
        vals += [v["val_loss"] for v in h.val_lines(h.read_metrics(metrics))]
        self.assertEqual(len(vals), 3, vals)
        self.assertTrue(vals[0] > vals[1] > vals[2] and vals[2] < vals[0] - 1.0,
                        f"the validation loss should fall: {vals}")
        out = self.path("fine-tuned-hf")
        self.convert(["--checkpoint", self.path("ck"), "--to-hf", out])
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
        self.assertEqual({k: config.get(k) for k in ("max_position_embeddings", "rope_scaling",
                                                     "bos_token_id", "eos_token_id")},
                         {k: cfg[k] for k in ("max_position_embeddings", "rope_scaling",
                                              "bos_token_id", "eos_token_id")})
        with open(os.path.join(out, "generation_config.json")) as f:
            self.assertEqual(json.load(f), generation)


if __name__ == "__main__":
    h.main()
