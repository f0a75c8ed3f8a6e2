"""GPT-2 written directly in PyTorch, independent of the C++ code: the reference of the
equivalence check (check_against_torch.py) and the baseline of the throughput benchmark
(tests/benchmarks/bench_torch.py). Weights are a dict of tensors named as in the checkpoint.
"""
import math

import torch
import torch.nn.functional as F


def gpt2_loss(w, cfg, inputs, targets):
    """Mean token cross-entropy of GPT-2 (pre-LN, tied head, tanh GELU) over a batch."""
    B, T = inputs.shape
    D, NH, L = cfg["d_model"], cfg["n_head"], cfg["n_layer"]
    HS = D // NH
    x = w["wte"][inputs] + w["wpe"][:T]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(L):
        p = f"h.{i}."
        h = F.layer_norm(x, (D,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
        qkv = h @ w[p + "attn.c_attn.weight"].T + w[p + "attn.c_attn.bias"]
        q, k, v = (t.view(B, T, NH, HS).transpose(1, 2) for t in qkv.split(D, dim=2))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + y @ w[p + "attn.c_proj.weight"].T + w[p + "attn.c_proj.bias"]
        h = F.layer_norm(x, (D,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
        h = F.gelu(h @ w[p + "mlp.c_fc.weight"].T + w[p + "mlp.c_fc.bias"], approximate="tanh")
        x = x + h @ w[p + "mlp.c_proj.weight"].T + w[p + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (D,), w["ln_f.weight"], w["ln_f.bias"], 1e-5)
    logits = x @ w["wte"].T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
