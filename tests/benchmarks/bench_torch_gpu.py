#!/usr/bin/env python3
"""PyTorch baseline for bench_gpu: the same GPT-2 124M training step (12 layers, 12 heads, d_model
768, seq 1024, vocab 50304, tied head, tanh GELU; AdamW) on the GPU with bf16 autocast, fused
AdamW and PyTorch's fused causal attention (scaled_dot_product_attention); prints tokens/s and
a JSON line. Prints "PyTorch with CUDA not available" and exits 0 where torch or a GPU is missing.
Usage: bench_torch_gpu.py [--micro-batch 16] [--steps 10] [--warmup 3] [--peak-tflops 989]
                          [--compile]
(tests/reference/torch_gpt2.py, the equivalence reference, builds its causal mask on the CPU and
materialises the T x T scores: not what a fair GPU baseline runs, hence this model.)
"""
import argparse
import json
import math
import sys
import time

V, T, L, NH, C = 50304, 1024, 12, 12, 768


def build_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            B = x.shape[0]
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class Gpt2(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
            self.h = nn.ModuleList(Block() for _ in range(L))
            self.ln_f = nn.LayerNorm(C)
            for name, p in self.named_parameters():
                if name.endswith("proj.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
                elif p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
            for block in self.h:
                x = block(x)
            logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
            return F.cross_entropy(logits.float().view(-1, V), targets.view(-1))

    return Gpt2()


def run(torch, args, B):
    device = torch.device("cuda")
    model = build_model(torch).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8, fused=True)
    step_model = torch.compile(model) if args.compile else model
    g = torch.Generator(device=device).manual_seed(1)
    x = torch.randint(0, 50257, (B, T), device=device, generator=g)
    y = torch.randint(0, 50257, (B, T), device=device, generator=g)

    def step():
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = step_model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    first = step().item()
    for _ in range(args.warmup - 1):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        last = step()
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - t0) / args.steps
    return seconds, first, last.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    args = parser.parse_args()
    args.warmup, args.steps = max(args.warmup, 1), max(args.steps, 1)
    try:
        import torch
    except ImportError:
        print("PyTorch with CUDA not available (no torch module)")
        return 0
    if not torch.cuda.is_available():
        print(f"PyTorch with CUDA not available (torch {torch.__version__} sees no GPU)")
        return 0
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    n_params = V * C + L * (12 * C * C + 13 * C) + 2 * C  # without wpe
    flops_per_token = 6 * n_params + 12 * L * T * C
    name = torch.cuda.get_device_name(0)
    print(f"bench_torch_gpu: torch {torch.__version__} on {name}; GPT-2 124M (V {V}, T {T}, "
          f"L {L}, NH {NH}, C {C}), bf16 autocast, fused AdamW, SDPA"
          f"{', torch.compile' if args.compile else ', eager'}", flush=True)
    B = args.micro_batch
    while True:
        try:
            seconds, first, last = run(torch, args, B)
            break
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            if B == 1:
                raise
            print(f"micro-batch {B} does not fit; halving it", flush=True)
            B //= 2
    tps = B * T / seconds
    tflops = flops_per_token * tps / 1e12
    print(f"micro-batch {B}: step {seconds * 1e3:.2f} ms | {tps:.0f} tokens/s | {tflops:.1f} "
          f"TFLOP/s | MFU {100 * tflops / args.peak_tflops:.1f}% of {args.peak_tflops:.0f} | "
          f"loss {first:.4f} -> {last:.4f}")
    print(json.dumps({"framework": "pytorch", "torch": torch.__version__, "device": name,
                      "compiled": args.compile, "micro_batch": B,
                      "tokens_per_s": round(tps, 1), "step_time_s": round(seconds, 6),
                      "tflops": round(tflops, 2),
                      "mfu_theoretical": round(tflops / args.peak_tflops, 4)}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
