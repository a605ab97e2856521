"""The canary's configuration: sizes, variant, and the derived shapes (no torch here).

The canary is a speculative-decoding **verify step**: the target model's
forward pass over ``draft_tokens + 1`` positions for ``batch`` sequences, as
``layers`` transformer decoder layers (RMSNorm, attention over a KV cache of
``kv_len`` positions, SwiGLU MLP), tensor parallel over ``tp`` ranks
(Megatron column/row split: two all-reduces per layer).

The GPU defaults are half the layers of a Llama-3-8B-shaped target (16 layers,
hidden 4096, 32 heads, MLP 14336), batch 4, 4 draft tokens, 2048 cached positions: one
step takes a few ms on a data-centre GPU (docs/bench.md, 'Results'). The CPU defaults are tiny, so a CPU run
(gloo) finishes in seconds.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, fields
from typing import Any

from forensics.errors import BadInputError


class Variant(str, enum.Enum):
    """How the step is executed and timed.

    - ``split`` (default): the compute of one step (all layers, no
      collectives) is timed on its own -- replayed from a per-rank CUDA graph
      on GPU, eager on CPU -- and the all-reduce at the step's message size is
      timed as a separate back-to-back loop; the verify step is composed as
      ``compute + 2 * layers * allreduce``. Stable: no launch/host jitter.
    - ``graph``: the whole step, all-reduces included, captured in one CUDA
      graph (``--cuda-graph``; guarded by a timeout because capturing
      torch.distributed collectives hung on torch 2.11 / NCCL 2.28.9).
    - ``eager``: the whole step launched eagerly (includes launch overhead
      and host jitter: docs/bench.md, 'Variants').
    """

    SPLIT = "split"
    GRAPH = "graph"
    EAGER = "eager"


@dataclass
class CanaryConfig:
    """Sizes and options of one canary run (every field is a CLI option).

    Attributes:
        device: ``cuda`` or ``cpu``.
        tp: tensor-parallel ranks (one process per GPU; gloo processes on CPU).
        layers, hidden, heads, ffn: model shape; ``ffn`` is the MLP width.
        draft_tokens: k; the verify step runs k + 1 positions per sequence.
        batch: sequences per step.
        kv_len: cached positions each sequence attends over (plus the k + 1 new ones).
        variant: see :class:`Variant`.
        blocks: timed blocks per metric per process.
        block_ms: target length of one timed block (never below 1 ms).
        warmup_s: minimum warm-up per metric before the convergence check.
        matmul_n: square matmul size of the TFLOP/s probe.
        busbw_bytes: all-reduce size of the bus-bandwidth probe (256 MiB on GPU).
        copy_bytes: pinned host<->device copy size of the PCIe probe (GPU only).
        p2p_bytes: GPU-to-GPU copy size of the P2P probe (each rank to the next GPU; GPU, tp >= 2 only).
        graph_timeout_s: guard for capturing/replaying collectives (``graph`` variant).
    """

    device: str = "cuda"
    tp: int = 1
    layers: int = 16
    hidden: int = 4096
    heads: int = 32
    ffn: int = 14336
    draft_tokens: int = 4
    batch: int = 4
    kv_len: int = 2048
    variant: str = Variant.SPLIT.value
    blocks: int = 30
    block_ms: float = 5.0
    warmup_s: float = 0.2
    matmul_n: int = 8192
    busbw_bytes: int = 256 * 1024 * 1024
    copy_bytes: int = 64 * 1024 * 1024
    p2p_bytes: int = 64 * 1024 * 1024
    graph_timeout_s: float = 60.0

    @classmethod
    def defaults(cls, device: str, tp: int) -> "CanaryConfig":
        """Defaults for ``device`` (``cuda``: the H200-sized step; ``cpu``: tiny)."""
        if device == "cpu":
            return cls(
                device="cpu",
                tp=tp,
                layers=2,
                hidden=128,
                heads=4,
                ffn=256,
                draft_tokens=4,
                batch=1,
                kv_len=64,
                blocks=10,
                block_ms=2.0,
                warmup_s=0.05,
                matmul_n=128,
                busbw_bytes=1024 * 1024,
                copy_bytes=0,
                p2p_bytes=0,
            )
        return cls(device="cuda", tp=tp)

    @property
    def tokens(self) -> int:
        """Positions verified per sequence: k + 1."""
        return self.draft_tokens + 1

    @property
    def dtype(self) -> str:
        """bf16 on GPU, fp32 on CPU."""
        return "bfloat16" if self.device == "cuda" else "float32"

    @property
    def dtype_bytes(self) -> int:
        """Bytes per element: 2 (bf16) on GPU, 4 (fp32) on CPU."""
        return 2 if self.device == "cuda" else 4

    @property
    def message_bytes(self) -> int:
        """Bytes of one all-reduce in the step: batch x (k+1) x hidden x dtype size."""
        return self.batch * self.tokens * self.hidden * self.dtype_bytes

    @property
    def allreduces_per_step(self) -> int:
        """Two per layer (after attention's output projection, after the MLP) when tp > 1."""
        return 2 * self.layers if self.tp > 1 else 0

    def validate(self) -> "CanaryConfig":
        """Check sizes; returns self.

        Raises:
            BadInputError: a size is not positive, heads or ffn do not split
                over tp, hidden is not a multiple of heads, or an unknown variant.
        """
        for name in (
            "tp",
            "layers",
            "hidden",
            "heads",
            "ffn",
            "batch",
            "kv_len",
            "blocks",
            "matmul_n",
        ):
            if int(getattr(self, name)) < 1:
                raise BadInputError(
                    f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}"
                )
        if self.draft_tokens < 0:
            raise BadInputError(f"--draft-tokens must be 0 or more, got {self.draft_tokens}")
        if self.device not in ("cuda", "cpu"):
            raise BadInputError(f"--device must be cuda or cpu, got {self.device!r}")
        if self.hidden % self.heads:
            raise BadInputError(f"--hidden {self.hidden} is not a multiple of --heads {self.heads}")
        if self.heads % self.tp or self.ffn % self.tp:
            raise BadInputError(
                f"--heads {self.heads} and --ffn {self.ffn} must both divide by --tp {self.tp}"
            )
        if self.variant not in {v.value for v in Variant}:
            raise BadInputError(
                f"variant {self.variant!r} unknown; use one of {[v.value for v in Variant]}"
            )
        if self.variant == Variant.GRAPH.value and self.device != "cuda":
            raise BadInputError("--cuda-graph needs a GPU (device cuda)")
        if self.block_ms < 1.0:
            raise BadInputError(
                f"--block-ms must be at least 1 ms (timer resolution), got {self.block_ms:g}"
            )
        return self

    def to_json(self) -> dict[str, Any]:
        """Every field plus the derived shapes (tokens, dtype, message bytes, all-reduces per step)."""
        d = asdict(self)
        d.update(
            {
                "tokens_per_sequence": self.tokens,
                "dtype": self.dtype,
                "message_bytes": self.message_bytes,
                "allreduces_per_step": self.allreduces_per_step,
            }
        )
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "CanaryConfig":
        """Rebuild from :meth:`to_json` output (derived keys are ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    # Fields that must match for two canary runs to be comparable.
    SHAPE_FIELDS = (
        "device",
        "tp",
        "layers",
        "hidden",
        "heads",
        "ffn",
        "draft_tokens",
        "batch",
        "kv_len",
        "variant",
        "matmul_n",
        "busbw_bytes",
        "copy_bytes",
    )
