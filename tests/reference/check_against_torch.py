#!/usr/bin/python3
"""Checks train against an independent GPT-2 or Llama written here in PyTorch (docs/MODEL.md).

Both start from the same initial checkpoint (train --steps 0) and the same sequential data, and
run the same optimizer steps: forward, backward, clip_grad_norm_, torch.optim.AdamW (or SGD) with
the warm-up + cosine schedule. The per-step losses and gradient norms from train's --metrics and
the final weights from its checkpoint must agree with PyTorch's to float32 rounding.
Exit code 0 = agree, 1 = disagree, 77 = PyTorch or h5py missing (CTest reports it skipped).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
except ImportError as missing:  # pragma: no cover
    print(f"skipped: {missing}")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_gpt2 import gpt2_loss  # noqa: E402
from torch_llama import llama_loss  # noqa: E402


def load_model(path):
    with h5py.File(path, "r") as f:
        weights = {name: torch.tensor(np.array(f["model"][name]), dtype=torch.float32)
                   for name in f["model"]}
        config = json.loads(f.attrs["config"])
    return weights, config


def lr_at(step, cfg):
    lr, min_lr, warmup, steps = cfg["lr"], cfg["min_lr"], cfg["warmup_steps"], cfg["steps"]
    s = min(step, steps)
    if s <= warmup:
        return lr * s / warmup
    return min_lr + (lr - min_lr) * (1 + math.cos(math.pi * (s - warmup) / (steps - warmup))) / 2


def torch_run(weights, cfg, tokens, steps, dtype=torch.float32):
    params = {n: t.to(dtype).requires_grad_(True) for n, t in weights.items()}
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": cfg["weight_decay"]},
              {"params": no_decay, "weight_decay": 0.0}]
    if cfg["optimizer"] == "adamw":
        opt = torch.optim.AdamW(groups, lr=cfg["lr"], betas=(cfg["beta1"], cfg["beta2"]),
                                eps=cfg["eps"])
    else:
        opt = torch.optim.SGD(groups, lr=cfg["lr"], momentum=cfg["momentum"])
    T, G = cfg["seq_len"], cfg["global_batch_size"]
    windows = (len(tokens) - 1) // T
    history = []
    for step in range(1, steps + 1):
        idx = [((step - 1) * G + j) % windows for j in range(G)]
        batch = torch.tensor(np.stack([tokens[k * T:k * T + T + 1] for k in idx]), dtype=torch.long)
        loss_of = llama_loss if cfg.get("arch") == "llama" else gpt2_loss
        loss = loss_of(params, cfg, batch[:, :-1], batch[:, 1:])
        opt.zero_grad()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()),
                                              cfg["grad_clip"] if cfg["grad_clip"] > 0 else 1e30)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, cfg)
        opt.step()
        history.append((loss.item(), norm.item()))
    return {n: p.detach() for n, p in params.items()}, history


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", required=True, help="the train program")
    ap.add_argument("--mpiexec", default="", help="run train through this launcher")
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--train-args", default="", help="extra train options (layout)")
    ap.add_argument("--model-args", default="--n-layer 2 --n-head 4 --d-model 32 --seq-len 16",
                    help="the model's options")
    ap.add_argument("--optimizer", default="adamw")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--float64", action="store_true",
                    help="replay in float64 (from the same float32 start): train's float32 run "
                         "must agree with the exact one to float32 rounding")
    args = ap.parse_args()
    torch.manual_seed(0)
    work = tempfile.mkdtemp(prefix="torch_ref_")
    # Random tokens with a vocabulary that is not a multiple of 64: the padding is exercised.
    vocab = 97
    rng = np.random.default_rng(5)
    tokens = rng.integers(0, vocab, size=4000).astype(np.uint16)
    data = os.path.join(work, "data.h5")
    with h5py.File(data, "w") as f:
        f.create_dataset("tokens", data=tokens)
        f.attrs["vocab_size"] = vocab
        f.attrs["tokenizer"] = "ids"
    common = ["--data", data, "--data-order", "sequential"] + args.model_args.split() + [
              "--global-batch-size", "8",
              "--micro-batch-size", "4", "--optimizer", args.optimizer, "--lr", "1e-2",
              "--min-lr", "1e-3", "--warmup-steps", "2", "--grad-clip", "1.0", "--eval-every",
              "0", "--seed", "7", "--threads", "1", "--device", "cpu"]
    launcher = args.mpiexec.split() + ["-n", str(args.np)] if args.mpiexec else []
    init_dir, run_dir = os.path.join(work, "init"), os.path.join(work, "run")
    metrics = os.path.join(work, "metrics.jsonl")
    subprocess.run([args.train] + common + ["--checkpoint-dir", init_dir, "--steps", "0"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(launcher + [args.train] + common + args.train_args.split() +
                   ["--checkpoint-dir", run_dir, "--metrics", metrics, "--steps", str(args.steps)],
                   check=True, stdout=subprocess.DEVNULL)
    init_weights, _ = load_model(os.path.join(init_dir, "step-00000000.h5"))
    final_ours, cfg = load_model(os.path.join(run_dir, f"step-{args.steps:08d}.h5"))
    ours = [json.loads(line) for line in open(metrics) if '"loss"' in line]
    final_torch, history = torch_run(init_weights, cfg, tokens.astype(np.int64), args.steps,
                                     torch.float64 if args.float64 else torch.float32)
    final_ours = {n: t.to(torch.float64) for n, t in final_ours.items()}
    final_torch = {n: t.to(torch.float64) for n, t in final_torch.items()}

    ok = True
    for (t_loss, t_norm), m in zip(history, ours):
        rel_loss = abs(m["loss"] - t_loss) / abs(t_loss)
        rel_norm = abs(m["grad_norm"] - t_norm) / abs(t_norm)
        print(f"step {m['step']}: loss ours {m['loss']:.7f} torch {t_loss:.7f} (rel {rel_loss:.1e})"
              f" | grad norm ours {m['grad_norm']:.6f} torch {t_norm:.6f} (rel {rel_norm:.1e})")
        ok &= rel_loss < 2e-5 and rel_norm < 1e-4
    ok &= len(ours) == len(history) == args.steps
    diff = sum(float((final_ours[n] - final_torch[n]).pow(2).sum()) for n in final_torch)
    norm = sum(float(final_torch[n].pow(2).sum()) for n in final_torch)
    worst = max(((final_ours[n] - final_torch[n]).norm() / final_torch[n].norm()).item()
                for n in final_torch)
    rel = math.sqrt(diff / norm)
    print(f"final weights: relative difference {rel:.2e} (worst tensor {worst:.2e})")
    ok &= rel < 1e-4
    print("agree" if ok else "DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
