#!/usr/bin/python3
"""PyTorch baseline for bench_train: the same GPT-2 (vocab 8192, seq 256, 4 layers, 8 heads,
d_model 512, batch 8), or the same Llama (4 key/value heads, MLP width 1408, untied head),
trained with torch.optim.AdamW on the CPU, best step time of N steps at the given thread count.
Prints one line and a JSON line, like bench_train.
Usage: OPENBLAS_NUM_THREADS=N bench_torch.py [steps] [threads N] [gpt2|llama]
OpenBLAS keeps its own thread pool that torch.set_num_threads does not reach, so the caller
sets OPENBLAS_NUM_THREADS to the same N before Python starts (run_serial_benchmark.sh does).
"""
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
from torch_gpt2 import gpt2_loss  # noqa: E402
from torch_llama import llama_loss  # noqa: E402

V, T, L, NH, C, B = 8192, 256, 4, 8, 512, 8


def make_weights():
    g = torch.Generator().manual_seed(1)
    w = {"wte": torch.randn(V, C, generator=g) * 0.02, "wpe": torch.randn(T, C, generator=g) * 0.02,
         "ln_f.weight": torch.ones(C), "ln_f.bias": torch.zeros(C)}
    for i in range(L):
        p = f"h.{i}."
        for name, shape in [("attn.c_attn", (3 * C, C)), ("attn.c_proj", (C, C)),
                            ("mlp.c_fc", (4 * C, C)), ("mlp.c_proj", (C, 4 * C))]:
            w[p + name + ".weight"] = torch.randn(*shape, generator=g) * 0.02
            w[p + name + ".bias"] = torch.zeros(shape[0])
        for ln in ("ln_1", "ln_2"):
            w[p + ln + ".weight"], w[p + ln + ".bias"] = torch.ones(C), torch.zeros(C)
    return {k: v.requires_grad_(True) for k, v in w.items()}


NKV, F = 4, 1408  # the Llama's key/value heads and MLP width
LLAMA_CFG = {"n_head": NH, "n_kv_head": NKV, "head_dim": C // NH, "n_layer": L,
             "norm_eps": 1e-5, "rope_theta": 10000.0, "rope_scaling": {"type": "none"}}


def make_llama_weights():
    g = torch.Generator().manual_seed(1)
    hs = C // NH
    w = {"embed_tokens.weight": torch.randn(V, C, generator=g) * 0.02,
         "lm_head.weight": torch.randn(V, C, generator=g) * 0.02, "norm.weight": torch.ones(C)}
    for i in range(L):
        p = f"layers.{i}."
        for name, shape in [("self_attn.q_proj", (C, C)), ("self_attn.k_proj", (NKV * hs, C)),
                            ("self_attn.v_proj", (NKV * hs, C)), ("self_attn.o_proj", (C, C)),
                            ("mlp.gate_proj", (F, C)), ("mlp.up_proj", (F, C)),
                            ("mlp.down_proj", (C, F))]:
            w[p + name + ".weight"] = torch.randn(*shape, generator=g) * 0.02
        for norm in ("input_layernorm", "post_attention_layernorm"):
            w[p + norm + ".weight"] = torch.ones(C)
    return {k: v.requires_grad_(True) for k, v in w.items()}


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    llama = len(sys.argv) > 3 and sys.argv[3] == "llama"
    if os.environ.get("OPENBLAS_NUM_THREADS") != str(threads):
        sys.exit(f"set OPENBLAS_NUM_THREADS={threads}: OpenBLAS ignores torch.set_num_threads")
    if llama:  # the matrices of the products: lm_head and per block q, k, v, o, gate, up, down
        cfg, loss_of, w = LLAMA_CFG, llama_loss, make_llama_weights()
        n_params = V * C + L * (2 * C * C + 2 * C * (NKV * (C // NH)) + 3 * C * F)
    else:
        cfg, loss_of, w = {"d_model": C, "n_head": NH, "n_layer": L}, gpt2_loss, make_weights()
        n_params = V * C + L * (12 * C * C + 13 * C) + 2 * C
    flops_per_token = 6 * n_params + 12 * L * T * C
    print(f"bench_torch: torch {torch.__version__}; {'llama' if llama else 'gpt2'}, V {V}, "
          f"T {T}, L {L}, NH {NH}, C {C}, B {B}")
    torch.set_num_threads(threads)
    opt = torch.optim.AdamW(list(w.values()), lr=1e-4)
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, V, (B, T), generator=g)
    y = torch.randint(0, V, (B, T), generator=g)
    best = float("inf")
    for s in range(steps + 1):  # the first is a warm-up
        t0 = time.perf_counter()
        opt.zero_grad()
        loss_of(w, cfg, x, y).backward()
        opt.step()
        if s > 0:
            best = min(best, time.perf_counter() - t0)
    tps = B * T / best
    gflops = flops_per_token * tps / 1e9
    print(f"threads {threads}: {tps:.0f} tokens/s | {gflops:.1f} GFLOP/s")
    print(json.dumps({"threads": threads, "tokens_per_s": round(tps, 1),
                      "gflops": round(gflops, 2)}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
