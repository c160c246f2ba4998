"""Oracle for the kernel tests: reads raw little-endian f32 inputs from a directory, computes
with torch, writes raw outputs next to them. Usage: oracle_kernels.py <op> <dir> [args]."""
import sys
from pathlib import Path

import numpy as np
import torch


def load(d, name, shape):
    return torch.from_numpy(np.fromfile(d / name, dtype="<f4").reshape(shape))


def save(d, name, t):
    t.contiguous().numpy().tofile(d / name)


def norm_softmax(d, rows, dim, eps):
    rows, dim, eps = int(rows), int(dim), float(eps)
    x, w = load(d, "x.bin", (rows, dim)), load(d, "w.bin", (dim,))
    # HF LlamaRMSNorm in float32.
    var = x.pow(2).mean(-1, keepdim=True)
    save(d, "rms.bin", w * (x * torch.rsqrt(var + eps)))
    save(d, "softmax.bin", torch.softmax(load(d, "logits.bin", (rows, dim)), dim=-1))


def casts(d):
    x = torch.from_numpy(np.fromfile(d / "x.bin", dtype="<f4"))
    save(d, "f16.bin", x.to(torch.float16).view(torch.int16))
    save(d, "bf16.bin", x.to(torch.bfloat16).view(torch.int16))


def attention(d, n_q, n_heads, n_kv, hd, kv_len, cap, q_pos0, window):
    n_q, n_heads, n_kv, hd, kv_len, cap, q_pos0, window = map(
        int, (n_q, n_heads, n_kv, hd, kv_len, cap, q_pos0, window))
    q = load(d, "q.bin", (n_q, n_heads, hd)).transpose(0, 1)  # [heads][n_q][hd]
    k = load(d, "k.bin", (n_kv, cap, hd))[:, :kv_len]
    v = load(d, "v.bin", (n_kv, cap, hd))[:, :kv_len]
    group = n_heads // n_kv
    k = k.repeat_interleave(group, dim=0)
    v = v.repeat_interleave(group, dim=0)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    if q_pos0 == 0 and n_q == kv_len and window == 0:
        out = sdpa(q, k, v, is_causal=True)
    else:
        qpos = torch.arange(q_pos0, q_pos0 + n_q)[:, None]
        kpos = torch.arange(kv_len)[None, :]
        allowed = kpos <= qpos
        if window > 0:
            allowed &= kpos > qpos - window
        out = sdpa(q, k, v, attn_mask=allowed)
    save(d, "out.bin", out.transpose(0, 1))


def rope_table(d, dim, max_pos, base):
    """cos/sin exactly as HF LlamaRotaryEmbedding (default rope type) builds them, float32."""
    dim, max_pos, base = int(dim), int(max_pos), float(base)
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float) / dim))
    pos = torch.arange(max_pos, dtype=torch.int64)[None, :].float()
    freqs = (inv_freq[None, :, None].float() @ pos[:, None, :]).transpose(1, 2)[0]
    save(d, "cos.bin", freqs.cos())
    save(d, "sin.bin", freqs.sin())


if __name__ == "__main__":
    op, d, args = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    {"norm_softmax": norm_softmax, "casts": casts, "attention": attention,
     "rope_table": rope_table}[op](d, *args)
