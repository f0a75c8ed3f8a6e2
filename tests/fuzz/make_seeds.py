#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/seed-*): small valid
files of each reader's format, and near-valid ones that fail one rule. Every file is made here
(tiny made-up models and vocabularies), a few KB at most. Regression inputs found by fuzzing are
committed beside them as regress-* and are not touched. Usage: tests/fuzz/make_seeds.py"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def files(*pairs):
    """One input of several files, as fuzz_common.h's split_files reads it."""
    out = b""
    for name, data in pairs:
        if isinstance(data, str):
            data = data.encode()
        out += b"==> " + name.encode() + b" <==\n" + data + b"\n"
    return out


def floats(n, scale=0.01):
    return struct.pack("<%df" % n, *[(i % 7 - 3) * scale for i in range(n)])


def safetensors(tensors, metadata=None, dtype="F32"):
    """tensors: [(name, shape)]; values made up."""
    header, data = {}, b""
    width = {"F32": 4, "F16": 2, "BF16": 2}[dtype]
    for name, shape in tensors:
        n = 1
        for s in shape:
            n *= s
        raw = floats(n) if dtype == "F32" else bytes((i * 37) % 251 for i in range(n * width))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + data


# ---- safetensors
put("fuzz_safetensors", "f32", safetensors([("a", [2, 3]), ("b", [4])], {"format": "pt"}))
put("fuzz_safetensors", "bf16", safetensors([("w", [3, 2])], dtype="BF16"))
put("fuzz_safetensors", "f16", safetensors([("w", [5]), ("s", [])], dtype="F16"))
bad = safetensors([("a", [2, 3])])
put("fuzz_safetensors", "short", bad[:-4])
nan = safetensors([("a", [2, 3])])  # a weight that is not a number: refused, naming the tensor
put("fuzz_safetensors", "nonfinite", nan[:-8] + struct.pack("<ff", 0.5, float("nan")))
put("fuzz_safetensors", "overlap", struct.pack("<Q", 120) + json.dumps(
    {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
     "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}).encode().ljust(120) + bytes(12))

# ---- GPT-2 models: llm.c's file and Hugging Face's directory
C, V, T, L = 4, 4, 4, 1


def gpt2_hf_tensors(prefix="transformer."):
    t = [(prefix + "wte.weight", [V, C]), (prefix + "wpe.weight", [T, C])]
    for l in range(L):
        h = prefix + "h.%d." % l
        t += [(h + "ln_1.weight", [C]), (h + "ln_1.bias", [C]),
              (h + "attn.c_attn.weight", [C, 3 * C]), (h + "attn.c_attn.bias", [3 * C]),
              (h + "attn.c_proj.weight", [C, C]), (h + "attn.c_proj.bias", [C]),
              (h + "ln_2.weight", [C]), (h + "ln_2.bias", [C]),
              (h + "mlp.c_fc.weight", [C, 4 * C]), (h + "mlp.c_fc.bias", [4 * C]),
              (h + "mlp.c_proj.weight", [4 * C, C]), (h + "mlp.c_proj.bias", [C])]
    return t + [(prefix + "ln_f.weight", [C]), (prefix + "ln_f.bias", [C])]


def llmc(version=3, magic=20240326, padded=128, cut=0):
    header = [magic, version, T, V, L, 1, C, padded] + [0] * 248
    n = padded * C + T * C + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C
                                   + 4 * C * C + C) + 2 * C
    data = struct.pack("<256i", *header) + floats(n)
    return data[:len(data) - cut]


put("fuzz_llmc", "valid", llmc())
put("fuzz_llmc", "truncated", llmc(cut=8))
put("fuzz_llmc", "version2", llmc(version=2))
put("fuzz_llmc", "padding", llmc(padded=4))

gpt2_config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": L, "n_head": 1,
               "n_embd": C, "n_positions": T, "n_ctx": T, "vocab_size": V,
               "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True}
put("fuzz_hf_model", "gpt2", files(("config.json", json.dumps(gpt2_config)),
                                   ("model.safetensors", safetensors(gpt2_hf_tensors()))))
put("fuzz_hf_model", "gpt2-missing", files(("config.json", json.dumps(gpt2_config)),
                                           ("model.safetensors", safetensors(gpt2_hf_tensors()[:-1]))))


def llama_tensors(kv=1, q=2, tie=False):
    hd = C // q
    t = [("model.embed_tokens.weight", [V, C]), ("model.norm.weight", [C])]
    if not tie:
        t.append(("lm_head.weight", [V, C]))
    F = 8
    for l in range(L):
        h = "model.layers.%d." % l
        t += [(h + "input_layernorm.weight", [C]), (h + "post_attention_layernorm.weight", [C]),
              (h + "self_attn.q_proj.weight", [q * hd, C]), (h + "self_attn.k_proj.weight", [kv * hd, C]),
              (h + "self_attn.v_proj.weight", [kv * hd, C]), (h + "self_attn.o_proj.weight", [C, q * hd]),
              (h + "mlp.gate_proj.weight", [F, C]), (h + "mlp.up_proj.weight", [F, C]),
              (h + "mlp.down_proj.weight", [C, F])]
    return t


llama_config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": C,
                "intermediate_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1,
                "num_hidden_layers": L, "vocab_size": V, "max_position_embeddings": 16,
                "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "hidden_act": "silu",
                "tie_word_embeddings": False, "torch_dtype": "float32",
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8}}
lt = llama_tensors()
index = {"metadata": {"total_size": 1}, "weight_map": {}}
for i, (name, _) in enumerate(lt):
    index["weight_map"][name] = "model-0000%d-of-00002.safetensors" % (1 + i % 2)
put("fuzz_hf_model", "llama-sharded", files(
    ("config.json", json.dumps(llama_config)),
    ("model.safetensors.index.json", json.dumps(index)),
    ("model-00001-of-00002.safetensors", safetensors(lt[0::2], {"format": "pt"})),
    ("model-00002-of-00002.safetensors", safetensors(lt[1::2], {"format": "pt"}))))
# What an import keeps beside the model: the context, bos and eos ids, generation_config.json.
put("fuzz_hf_model", "llama-extras", files(
    ("config.json", json.dumps(dict(llama_config, bos_token_id=1, eos_token_id=[2, 3]))),
    ("model.safetensors", safetensors(lt, {"format": "pt"})),
    ("generation_config.json", json.dumps({"bos_token_id": 1, "eos_token_id": [2, 3],
                                           "temperature": 0.6}))))
tied = dict(llama_config, tie_word_embeddings=True)
del tied["rope_scaling"]
put("fuzz_hf_model", "llama-tied", files(("config.json", json.dumps(tied)),
                                         ("model.safetensors", safetensors(llama_tensors(tie=True), dtype="BF16"))))

# ---- model configs as JSON (a checkpoint's config attribute, Hugging Face's config.json)
put("fuzz_config_json", "checkpoint-gpt2", json.dumps(
    {"n_layer": 2, "n_head": 2, "d_model": 16, "seq_len": 8, "vocab_size": 50}))
ckpt_llama = {"n_layer": 2, "n_head": 4, "d_model": 32, "seq_len": 16, "vocab_size": 100, "arch": "llama",
              "n_kv_head": 2, "head_dim": 8, "ffn_hidden_size": 64, "rope_theta": 10000.0,
              "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8},
              "norm_eps": 1e-5, "tie_embeddings": True, "qkv_bias": False, "qk_norm": True}
put("fuzz_config_json", "checkpoint-llama", json.dumps(ckpt_llama))
put("fuzz_config_json", "hf-gpt2", json.dumps(gpt2_config))
put("fuzz_config_json", "hf-llama", json.dumps(llama_config))
put("fuzz_config_json", "hf-qwen2", json.dumps(dict(llama_config, architectures=["Qwen2ForCausalLM"],
                                                    model_type="qwen2", use_sliding_window=False,
                                                    sliding_window=4096, max_window_layers=1)))
put("fuzz_config_json", "hf-mistral", json.dumps(dict(llama_config, architectures=["MistralForCausalLM"],
                                                      model_type="mistral", sliding_window=None, head_dim=2)))

# ---- token files: llm.c's .bin shard, HDF5 shards (recipes, h5_recipe.h)
tokens = [i * 7 % 50257 for i in range(200)]
put("fuzz_bin_tokens", "llmc", struct.pack("<256i", *([20240520, 1, 200] + [0] * 253)) +
    struct.pack("<200H", *tokens))
put("fuzz_bin_tokens", "llmc-count", struct.pack("<256i", *([20240520, 1, 300] + [0] * 253)) +
    struct.pack("<200H", *tokens))
put("fuzz_bin_tokens", "nanogpt", struct.pack("<300H", *[i * 13 % 50257 for i in range(300)]))
put("fuzz_bin_tokens", "nanogpt-odd", struct.pack("<30H", *range(30)) + b"x")

shard = """dset /tokens u16 100 fill 3
attr / vocab_size i64 512
attr / tokenizer vstr bytes
attr / eot i64 0
attr / max_token i64 297
"""
put("fuzz_token_shards", "max-token", shard)
put("fuzz_token_shards", "scan", "dset /tokens u32 64 fill 5\nattr / vocab_size i64 400\n"
    "attr / tokenizer str gpt2\n")
put("fuzz_token_shards", "two", files(("first", shard), ("second", shard.replace("u16 100", "u16 10"))))
put("fuzz_token_shards", "disagree", files(("first", shard), ("second", shard.replace("bytes", "gpt2"))))
put("fuzz_token_shards", "declared", "dset /tokens u16 1000000000 empty\nattr / vocab_size i64 512\n"
    "attr / tokenizer vstr bytes\n")


def checkpoint(version=1, extra="", config=None):
    cfg = config or {"n_layer": 1, "n_head": 1, "d_model": 4, "seq_len": 4, "vocab_size": 4}
    r = ("attr / format vstr gpt-train-checkpoint\nattr / complete i64 1\n"
         "attr / format_version i64 %d\nattr / step i64 10\nattr / consumed_samples i64 40\n"
         "attr / seed i64 1234\nattr / config vstr %s\nattr / tokenizer vstr bytes\n"
         "attr / layout vstr {\"tp\": 1}\n" % (version, json.dumps(cfg)))
    shapes = [("wte", "4,4"), ("wpe", "4,4"), ("ln_f.weight", "4"), ("ln_f.bias", "4")]
    for name, shape in gpt2_hf_tensors(""):
        if name.startswith("h."):
            shapes.append((name, ",".join(str(d) for d in (shape[::-1] if len(shape) == 2 else shape))))
    for name, shape in shapes:
        r += "dset /model/%s f32 %s fill 1\nattr /model/%s crc32 u32 0\n" % (name, shape, name)
    return r + extra


put("fuzz_checkpoint", "v1", checkpoint())
put("fuzz_checkpoint", "v2", checkpoint(2, "attr / metadata_crc32 i64 12345\n"))
put("fuzz_checkpoint", "optimizer", checkpoint(1, "group /optimizer\nattr /optimizer type vstr adamw\n"
                                                  "attr /optimizer step i64 10\nattr /optimizer lr f64 0.001\n"
                                                  "dset /optimizer/wte/m f32 4,4 fill 2\n"
                                                  "attr /optimizer/wte/m crc32 u32 7\n"))
put("fuzz_checkpoint", "sparse", checkpoint(1, "dset /model/big f32 1048576,1048576 empty\n"
                                               "attr /model/big crc32 u32 0\n"))
put("fuzz_checkpoint", "llama", checkpoint(1, "", ckpt_llama))
put("fuzz_checkpoint", "type", checkpoint(1, "attr / complete vstr 1\n").replace("attr / complete i64 1\n", ""))

# ---- tokenizers


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


b2u = bytes_to_unicode()
vocab = {b2u[b]: b for b in range(256)}
merges = ["Ġ w", "h e", "l l", "he ll", "hell o", "Ġw o", "Ġwo r"]
for m in merges:
    vocab[m.replace(" ", "")] = len(vocab)
vocab["<|endoftext|>"] = len(vocab)
put("fuzz_gpt2_tokenizer", "small", files(("encoder.json", json.dumps(vocab, ensure_ascii=False)),
                                          ("vocab.bpe", "#version: 0.2\n" + "\n".join(merges) + "\n")))
put("fuzz_gpt2_tokenizer", "unknown-merge", files(("encoder.json", json.dumps(vocab)),
                                                  ("vocab.bpe", "#version: 0.2\nx y\n")))

byte_level = {
    "version": "1.0",
    "added_tokens": [{"id": len(vocab), "content": "<|endoftext|>", "special": True, "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": False}],
    "normalizer": {"type": "NFC"},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
              "vocab": {k: v for k, v in vocab.items() if k != "<|endoftext|>"}, "merges": merges}}
put("fuzz_hf_tokenizer", "byte-level", files(
    ("tokenizer.json", json.dumps(byte_level, ensure_ascii=False)),
    ("tokenizer_config.json", json.dumps({"bos_token": None, "eos_token": "<|endoftext|>"}))))

sp_vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
for b in range(256):
    sp_vocab["<0x%02X>" % b] = len(sp_vocab)
for t in ["▁", "h", "e", "l", "o", "w", "r", "d", "▁h", "he", "ll", "▁he", "▁hell", "▁hello"]:
    sp_vocab[t] = len(sp_vocab)
sentencepiece = {
    "version": "1.0",
    "added_tokens": [{"id": 0, "content": "<unk>", "special": True}, {"id": 1, "content": "<s>", "special": True},
                     {"id": 2, "content": "</s>", "special": True}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                                                      {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": None,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                               {"Sequence": {"id": "A", "type_id": 0}}],
                       "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
        {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
              "vocab": sp_vocab, "merges": ["▁ h", "h e", "l l", "▁h e", "▁he ll", "▁hell o"]}}
put("fuzz_hf_tokenizer", "sentencepiece", files(
    ("tokenizer.json", json.dumps(sentencepiece, ensure_ascii=False)),
    ("tokenizer_config.json", json.dumps({"add_bos_token": True, "bos_token": {"content": "<s>"},
                                          "eos_token": "</s>"}))))
meta = dict(sentencepiece, normalizer=None, pre_tokenizer={"type": "Metaspace", "replacement": "▁",
                                                           "prepend_scheme": "first", "split": True})
put("fuzz_hf_tokenizer", "metaspace", files(("tokenizer.json", json.dumps(meta, ensure_ascii=False))))

# ---- INI files: --config and plan's cluster file
put("fuzz_ini_config", "train", """# a run
n-layer = 2
n-head = 2
d-model = 64
seq-len = 32
steps = 10
lr = 3e-4
optimizer = adamw
data-order = sequential
device = cpu
precision = fp32
schedule = 1f1b
recompute = none
tp = 1
pp = 1
micro-batch-size = 4
global-batch-size = 8
seed = 7
overwrite-checkpoints = true
layers-per-stage = 1,1
""")
put("fuzz_ini_config", "unknown", "n-layer = 2\nno-such-option = 1\n[section]\nx = y\n")
put("fuzz_ini_config", "bad-value", "steps = ten\noptimizer = adam\n")
for name in ["netns-1gbit.ini", "netns-100mbit.ini"]:
    with open(os.path.join(HERE, "..", "..", "scripts", "netns", name)) as f:
        put("fuzz_cluster_file", name.replace(".ini", ""), f.read())
with open(os.path.join(HERE, "..", "..", "docs", "clusters", "h100x4.ini")) as f:
    put("fuzz_cluster_file", "h100x4", f.read())
put("fuzz_cluster_file", "bad-key", "name = x\ngpus_per_node = 8\n[gpu]\nname = g\npeak = 1\n")

# ---- serve's completion request bodies (fuzz_completion_request: a model "tiny" of 64 positions
# and 300 token ids, one token per byte)
put("fuzz_completion_request", "minimal", json.dumps({"prompt": "Hello"}))
put("fuzz_completion_request", "every-field", json.dumps(
    {"model": "tiny", "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0.7, "top_p": 0.9,
     "top_k": -1, "seed": 42, "stop": ["\n", "The end"], "stream": True,
     "stream_options": {"include_usage": True}}))
put("fuzz_completion_request", "token-ids", json.dumps({"prompt": [1, 2, 299], "max_tokens": 4,
                                                        "stop": "x", "stream": False}))
put("fuzz_completion_request", "neutral", json.dumps(
    {"prompt": "a", "n": 1, "best_of": 1, "echo": False, "logprobs": None, "presence_penalty": 0,
     "frequency_penalty": 0.0, "logit_bias": {}, "suffix": "", "user": "u"}))
put("fuzz_completion_request", "unsupported", json.dumps({"prompt": "a", "n": 2, "logit_bias": {"5": 1}}))
put("fuzz_completion_request", "context", json.dumps({"prompt": "x" * 60, "max_tokens": 5}))
put("fuzz_completion_request", "unknown-model", json.dumps({"model": "gpt-4", "prompt": "é€😀"},
                                                           ensure_ascii=False))
put("fuzz_completion_request", "unknown-field", json.dumps({"prompt": "a", "max_token": 5,
                                                            "stream_options": {"x": 1}}))

# ---- chat templates (fuzz_chat_template: the template's text, rendered over a fixed
# conversation): a ChatML-like template with tool calls written here, and the hand-written
# templates of tests/text/chat_template_cases.py, those that render and those that must fail
put("fuzz_chat_template", "chatml-tools", """{%- if tools %}
{{- '<|system|>\\n# Tools\\n' }}
    {%- for tool in tools %}
{{- tool | tojson }}
    {%- endfor %}
{%- endif %}
{%- set ns = namespace(last_user=-1) %}
{%- for m in messages %}{% if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}
    {%- elif message.content is iterable %}
        {%- set content = message.content | selectattr('type', 'equalto', 'text') | map(attribute='text') | join(' ') %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
{{- '<|' + message.role + '|>\\n' + content | trim }}
    {%- for call in message.tool_calls or [] %}
{{- '\\n<call>' + call.function.name + ' ' + call.function.arguments | tojson + '</call>' }}
    {%- endfor %}
{{- '<|end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}""")
import sys  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "text"))
from chat_template_cases import CONSTRUCTS, ERRORS  # noqa: E402
for name, text in CONSTRUCTS.items():
    if name != "strftime":  # its text is the day's date
        put("fuzz_chat_template", name.replace("_", "-"), text)
for name, text in ERRORS.items():
    put("fuzz_chat_template", "error-" + name.replace("_", "-"), text)
