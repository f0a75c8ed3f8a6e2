"""The Llama family written directly in PyTorch with the semantics of transformers'
LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and Qwen3ForCausalLM (RMSNorm in float32,
rotate-half rotary embeddings, grouped-query attention by repeating kv heads, SwiGLU), independent
of the C++ code: the reference of the equivalence checks. Weights are a dict of tensors named as in
the checkpoint (Hugging Face's names without "model."); cfg is the checkpoint's config.
"""
import math

import torch
import torch.nn.functional as F


def rms_norm(x, weight, eps):
    variance = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def inverse_frequencies(cfg):
    """inv_freq as transformers computes it, Llama 3.1's rescaling included."""
    hs, theta = cfg["head_dim"], cfg["rope_theta"]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.int64).float() / hs))
    scaling = cfg.get("rope_scaling") or {"type": "none"}
    if scaling["type"] != "llama3":
        return inv_freq
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    low_wavelen, high_wavelen = original / low, original / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rotary_cos_sin(cfg, positions, dtype):
    freqs = positions.float()[:, None] * inverse_frequencies(cfg)[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def llama_logits(w, cfg, inputs):
    """Logits (B, T, V) of a batch of token ids (B, T)."""
    B, T = inputs.shape
    NH, NKV, HS, L = cfg["n_head"], cfg["n_kv_head"], cfg["head_dim"], cfg["n_layer"]
    eps = cfg["norm_eps"]
    x = w["embed_tokens.weight"][inputs]
    cos, sin = rotary_cos_sin(cfg, torch.arange(T), x.dtype)
    causal = torch.ones(T, T, dtype=torch.bool).tril()

    def project(h, name):
        y = h @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    for i in range(L):
        p = f"layers.{i}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = project(h, p + "self_attn.q_proj").view(B, T, NH, HS)
        k = project(h, p + "self_attn.k_proj").view(B, T, NKV, HS)
        v = project(h, p + "self_attn.v_proj").view(B, T, NKV, HS)
        if cfg.get("qk_norm"):
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(NH // NKV, dim=1)
        v = v.repeat_interleave(NH // NKV, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, NH * HS)
        x = x + y @ w[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (F.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["norm.weight"], eps)
    head = w["embed_tokens.weight"] if cfg.get("tie_embeddings") else w["lm_head.weight"]
    return x @ head.T


def llama_loss(w, cfg, inputs, targets):
    """Mean token cross-entropy over a batch."""
    logits = llama_logits(w, cfg, inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
