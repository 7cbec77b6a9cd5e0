"""The two interfaces every head kind and every head mixer implements.

``HeadGroup``: ``count`` heads of one kind (one spec term, e.g. ``7Ftoken``), each of
width ``d_head``. It receives the layer input ``x`` (for its own query/key projections,
if any), its slice of the shared value projection and the :class:`HeadContext`, and
returns one output per head. Head tensors are token-major, (B, N, count, d_head): the
layout of the value projection's output and of the output projection's input, so fixed
heads never transpose. ``HeadMixer``: a layer-level module acting on the stacked
head outputs of all groups before the output projection (hard-concrete gates, DHICM).
Both may contribute an auxiliary loss, collected by ``HeadlabEncoder.aux_loss()``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from torch import Tensor, nn


@dataclass
class HeadContext:
    """Everything a head may need besides its input, built once per encoder forward.

    pad_mask:  (B, N) bool, True at padding (OpenNMT-py's ``sequence_mask`` convention).
    lengths:   (B,) long, number of real source tokens.
    token_ids: (B, N) long source vocabulary ids, or None.
    word_ids:  (B, N) long 0-based word index of each piece (BPE ``@@`` joined), or None
               when no word-based head needs it.
    side:      optional per-sentence side inputs for later kinds, e.g.
               ``{"dep_mask": (B, N, N) bool}`` (paper C DEA) or a phrase bias (LPEA).
    """

    pad_mask: Tensor
    lengths: Tensor
    token_ids: Tensor | None = None
    word_ids: Tensor | None = None
    side: dict[str, Tensor] = field(default_factory=dict)

    @property
    def key_mask(self) -> Tensor:
        """(B, 1, 1, N) bool, True where a key may be attended (SDPA convention)."""
        return (~self.pad_mask).view(self.pad_mask.size(0), 1, 1, -1)


class HeadGroup(nn.Module):
    """``count`` heads of one registered kind.

    Subclasses set ``needs_words`` if they read ``ctx.word_ids`` and implement
    :meth:`forward` and :meth:`attention`. Learned kinds with an additive score bias
    (localness, DEA/LPEA masks from ``ctx.side``) subclass
    :class:`headlab.heads.kinds.LearnedHeads` and override ``score_bias``.
    """

    kind_name = "?"
    needs_words = False

    def __init__(self, count: int, d_model: int, d_head: int, *, add_qkvbias: bool = False,
                 attention_dropout: float = 0.0):
        super().__init__()
        self.count, self.d_model, self.d_head = count, d_model, d_head

    @classmethod
    def check_count(cls, count: int, bad: Callable[[str], Exception]) -> None:
        """Raise ``bad(why)`` if this kind cannot have ``count`` heads."""

    @classmethod
    def head_width(cls, d_model: int, default: int) -> int:
        """Width of one head; ``default`` is d_model / opt.heads."""
        return default

    def forward(self, x: Tensor, values: Tensor, ctx: HeadContext) -> Tensor:
        """x: (B, N, d_model) layer input; values: (B, N, count, d_head) -> same shape."""
        raise NotImplementedError

    def attention(self, x: Tensor, ctx: HeadContext) -> Tensor:
        """Dense (B, count, N, N) attention probabilities (analysis/export only)."""
        raise NotImplementedError

    def aux_loss(self) -> Tensor | None:
        return None

    def update_dropout(self, attention_dropout: float) -> None:
        pass


class HeadMixer(nn.Module):
    """Acts on all head outputs of a layer before the output projection.

    ``forward(heads, ctx)`` gets and returns a list with one (B, N, count, d_head) tensor
    per group (widths may differ between groups). Decoder-side and cross-attention use
    can reuse the same class: it only sees stacked head outputs.
    """

    mixer_name = "?"

    def __init__(self, num_heads: int, d_model: int):
        super().__init__()
        self.num_heads, self.d_model = num_heads, d_model

    def forward(self, heads: list[Tensor], ctx: HeadContext) -> list[Tensor]:
        raise NotImplementedError

    def aux_loss(self) -> Tensor | None:
        return None


def scale_heads(heads: list[Tensor], scale: Tensor) -> list[Tensor]:
    """Multiply head k (numbered across groups) by scale[k]; scale: (H,) or (B, H)."""
    out, start = [], 0
    for group in heads:
        count = group.size(2)
        s = scale[..., start:start + count]
        s = s.view(1, 1, count, 1) if s.dim() == 1 else s.view(s.size(0), 1, count, 1)
        out.append(group * s.to(group.dtype))
        start += count
    return out


__all__ = ["HeadContext", "HeadGroup", "HeadMixer", "scale_heads"]
