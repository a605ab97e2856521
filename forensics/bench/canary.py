"""The canary's model: a tensor-parallel stack of decoder layers (imports torch; workers only).

One rank holds ``heads / tp`` attention heads and ``ffn / tp`` MLP columns of
every layer (Megatron split: QKV and gate/up are column-parallel, the output
projection and the down projection row-parallel), so each layer does two
all-reduces of ``batch x (k+1) x hidden`` elements. Weights are random
(std 0.02, fixed seed): the canary measures the machine, not a model.
Positional encoding is left out (it is elementwise and small).
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from forensics.bench.config import CanaryConfig


def _rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


class VerifyModel:
    """The target model's layers for one tensor-parallel rank.

    Args:
        cfg: the canary configuration (shapes, tp).
        device: torch device of this rank.
        reduce: called on each row-parallel output ``[batch, k+1, hidden]``
            in place (``dist.all_reduce`` in the full step, a no-op when
            only the compute is timed).
    """

    def __init__(
        self, cfg: CanaryConfig, device: torch.device, reduce: Callable[[torch.Tensor], None]
    ):
        self.cfg = cfg
        self.reduce = reduce
        dtype = torch.bfloat16 if cfg.device == "cuda" else torch.float32
        self.dtype = dtype
        h, tp = cfg.hidden, cfg.tp
        self.head_dim = h // cfg.heads
        self.local_heads = cfg.heads // tp
        local_ffn = cfg.ffn // tp
        t = cfg.tokens
        gen = torch.Generator(device=device).manual_seed(1234)

        def rnd(*shape: int) -> torch.Tensor:
            return (
                torch.randn(*shape, generator=gen, device=device, dtype=torch.float32) * 0.02
            ).to(dtype)

        self.layers = []
        for _ in range(cfg.layers):
            self.layers.append(
                {
                    "ln1": torch.ones(h, device=device, dtype=dtype),
                    "wqkv": rnd(h, 3 * self.local_heads * self.head_dim),
                    "wo": rnd(self.local_heads * self.head_dim, h),
                    "ln2": torch.ones(h, device=device, dtype=dtype),
                    "wgu": rnd(h, 2 * local_ffn),
                    "wdown": rnd(local_ffn, h),
                    "k": rnd(cfg.batch, self.local_heads, cfg.kv_len + t, self.head_dim),
                    "v": rnd(cfg.batch, self.local_heads, cfg.kv_len + t, self.head_dim),
                }
            )
        pos = torch.arange(cfg.kv_len + t, device=device)
        # new token i sees the cache and new tokens up to itself: position <= kv_len + i
        self.mask = pos[None, :] <= (cfg.kv_len + torch.arange(t, device=device))[:, None]
        self.x = rnd(cfg.batch, t, h) * 50

    def step(self) -> torch.Tensor:
        """One verify step over the static input ``self.x``; returns ``[batch, k+1, hidden]``."""
        cfg, b, t = self.cfg, self.cfg.batch, self.cfg.tokens
        x = self.x
        for ly in self.layers:
            hh = _rmsnorm(x, ly["ln1"])
            qkv = (hh @ ly["wqkv"]).view(b, t, 3, self.local_heads, self.head_dim)
            q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
            ly["k"][:, :, cfg.kv_len :].copy_(k)
            ly["v"][:, :, cfg.kv_len :].copy_(v)
            a = F.scaled_dot_product_attention(q, ly["k"], ly["v"], attn_mask=self.mask)
            o = a.transpose(1, 2).reshape(b, t, self.local_heads * self.head_dim) @ ly["wo"]
            self.reduce(o)
            x = x + o
            hh = _rmsnorm(x, ly["ln2"])
            g, u = (hh @ ly["wgu"]).chunk(2, dim=-1)
            m = (F.silu(g) * u) @ ly["wdown"]
            self.reduce(m)
            x = x + m
        return x
