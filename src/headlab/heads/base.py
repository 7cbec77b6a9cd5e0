"""The two interfaces every head kind and every head mixer implements.

``HeadGroup``: ``count`` heads of one kind (one spec term, e.g. ``7Ftoken``), each of
width ``d_head``. It receives the queries' layer input ``x`` (for its own query
projection, if any), its slice of the shared value projection, its keys (projected by
:meth:`HeadGroup.project_keys` from the key/value input: ``x`` itself for self-attention,
the encoder output for cross-attention, the cached past for incremental decoding) and the
:class:`HeadContext`, and returns one output per head. Head tensors are token-major,
(B, N, count, d_head): the layout of the value projection's output and of the output
projection's input, so fixed heads never transpose. ``HeadMixer``: a layer-level module
acting on the stacked head outputs of all groups before the output projection
(hard-concrete gates), or replacing it (DHICM). Both may contribute named auxiliary
terms (:meth:`aux_terms`), weighed by the training loss (:mod:`headlab.engine.aux_loss`).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Callable, Iterable

import torch
from torch import Tensor, nn


@dataclass
class HeadContext:
    """Everything a head may need besides its input, built once per encoder forward.

    pad_mask:  (B, N) bool, True at padding (OpenNMT-py's ``sequence_mask`` convention).
    lengths:   (B,) long, number of real source tokens.
    token_ids: (B, N) long source vocabulary ids, or None.
    word_ids:  (B, N) long 0-based word index of each piece (BPE ``@@`` joined), or None
               when no word-based head needs it.
    side:      optional per-sentence side inputs: paper C's parse columns
               (:data:`headlab.syntax.trees.FEATURES`), each (B, N) long, word-level
               values copied onto every piece, for kinds with ``needs_syntax``.
    allowed:   (B, 1, Nq or 1, Nk) bool, True where query i may attend key j, for sites
               whose keys are not the queries' own unpadded sequence (decoder: causal
               mask; cross-attention: source padding). None: derived from ``pad_mask``.

    In the encoder every field describes the one sequence. In the decoder ``pad_mask``
    and ``lengths`` describe the queries (target tokens), ``allowed`` the keys.

    ``constants``: what kinds derive from the batch alone (pattern matrices, dependency and
    phrase relations, relative-depth indices), built once by :meth:`constant` and shared by
    every layer that gets this context (the encoder builds one per forward).
    """

    pad_mask: Tensor
    lengths: Tensor
    token_ids: Tensor | None = None
    word_ids: Tensor | None = None
    side: dict[str, Tensor] = field(default_factory=dict)
    allowed: Tensor | None = None
    constants: dict = field(default_factory=dict, repr=False)

    def constant(self, key, build: Callable[[], object], size=None):
        """The per-batch constant ``key`` (a hashable naming it and whatever besides this
        context it depends on), built by ``build()`` the first time it is asked for.
        ``size``: the length it is built for, kept beside it (a constant asked for at another
        length is built anew) and never in the key: under ``torch.compile`` a length is
        symbolic, and hashing it would fix the compiled graph to this batch's length."""
        entry = self.constants.get(key)
        if entry is None or (size is not None and entry[0] != size):
            entry = self.constants[key] = (size, build())
        return entry[1]

    @property
    def key_mask(self) -> Tensor:
        """(B, 1, 1 or Nq, Nk) bool, True where a key may be attended (SDPA convention)."""
        if self.allowed is not None:
            return self.allowed
        return (~self.pad_mask).view(self.pad_mask.size(0), 1, 1, -1)


class HeadGroup(nn.Module):
    """``count`` heads of one registered kind.

    Subclasses implement :meth:`forward` and :meth:`attention`; a built-in kind gets
    ``sites``, ``needs_words`` and ``needs_syntax`` from its declaration
    (:mod:`headlab.heads.builtin`), a kind registered elsewhere sets them in its class. Learned kinds with an additive score bias
    (localness, DEA/LPEA masks from ``ctx.side``) subclass
    :class:`headlab.heads.kinds.LearnedHeads` and override ``score_bias``.
    """

    kind_name = "?"
    needs_words = False
    #: True: reads the source parse from ``ctx.side`` (paper C; headlab.syntax.trees.FEATURES)
    needs_syntax = False
    #: attention sites this kind can serve (see headlab.heads.spec.SITES)
    sites: tuple[str, ...] = ("enc", "dec", "cross")
    #: width of this group's keys per token (0: no keys, e.g. fixed patterns)
    key_width = 0

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

    @classmethod
    def build(cls, count: int, d_model: int, d_head: int, options: dict, *, add_qkvbias: bool = False,
              attention_dropout: float = 0.0) -> "HeadGroup":
        """The group for one spec term; ``options`` are the model options kinds and mixers
        read (:func:`headlab.engine.common.mixer_options`: ``lpea_k``, ``relpos_k``, ...).
        Default: ``cls(count, d_model, d_head, ...)``."""
        return cls(count, d_model, d_head, add_qkvbias=add_qkvbias, attention_dropout=attention_dropout)

    def project_keys(self, kv: Tensor) -> Tensor | None:
        """(B, Nk, key_width) keys of the key/value input ``kv``; None for key-less kinds."""
        return None

    def forward(self, x: Tensor, values: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        """x: (B, Nq, d_model) queries' input; values: (B, Nk, count, d_head); keys: from
        :meth:`project_keys` (None: project ``x``) -> (B, Nq, count, d_head)."""
        raise NotImplementedError

    def attention(self, x: Tensor, ctx: HeadContext, keys: Tensor | None = None) -> Tensor:
        """Dense (B, count, Nq, Nk) attention probabilities (analysis/export only)."""
        raise NotImplementedError

    def aux_terms(self) -> dict[str, Tensor]:
        """Named auxiliary terms of the last forward (see headlab.engine.aux_loss)."""
        return {}

    def update_dropout(self, attention_dropout: float) -> None:
        pass


class HeadMixer(nn.Module):
    """Acts on all head outputs of a layer before the output projection.

    ``forward(heads, ctx)`` gets and returns a list with one (B, N, count, d_head) tensor
    per group (widths may differ between groups). Decoder-side and cross-attention use
    can reuse the same class: it only sees stacked head outputs.
    """

    mixer_name = "?"
    #: attention sites this mixer can serve
    sites: tuple[str, ...] = ("enc", "dec", "cross")
    #: True: :meth:`project` replaces the layer's output projection (it must be the last
    #: mixer of a layer, and the layer has no ``final_linear``)
    replaces_output = False

    def __init__(self, num_heads: int, d_model: int):
        super().__init__()
        self.num_heads, self.d_model = num_heads, d_model

    @classmethod
    def check_layer(cls, layer, bad: Callable[[str], Exception]) -> None:
        """Raise ``bad(why)`` if this mixer cannot act on ``layer`` (a LayerSpec)."""

    @classmethod
    def build(cls, num_heads: int, d_model: int, widths: list[int], options: dict, add_bias: bool):
        """The mixer for a layer whose groups have head ``widths``; ``options`` are the
        model options (``dhicm_dm``, ``dhicm_dropout``, ...). Default: ``cls(H, d)``."""
        return cls(num_heads, d_model)

    def forward(self, heads: list[Tensor], ctx: HeadContext, x: Tensor) -> list[Tensor]:
        """heads: one (B, N, count, d_head) tensor per group; x: the layer's query input."""
        raise NotImplementedError

    def project(self, heads: list[Tensor], ctx: HeadContext, x: Tensor) -> Tensor:
        """(B, N, d_model) layer output, for mixers that ``replaces_output``."""
        raise NotImplementedError

    def aux_terms(self) -> dict[str, Tensor]:
        """Named auxiliary terms of the last forward (see headlab.engine.aux_loss)."""
        return {}


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


#: device types torch's autocast serves in every build (no_autocast asks torch of others)
AUTOCAST_DEVICES = frozenset({"cpu", "cuda"})


def no_autocast(like: Tensor):
    """A region where autocast is off on ``like``'s device: inside, every op runs in its
    inputs' dtype, so a kind keeps a computation in float32 by casting its inputs (and the
    weights it uses: translation with ``-precision fp16`` makes them float16) to float32.
    Mixed precision (autocast) would otherwise run linear layers and matmuls in
    fp16/bf16 whatever their inputs."""
    kind = like.device.type
    # the devices autocast always serves first: torch 2.11's dynamo (a GPU sitting's) cannot
    # trace is_autocast_available, and a compiled model would break its graph at every call
    if kind in AUTOCAST_DEVICES or torch.amp.is_autocast_available(kind):
        return torch.autocast(kind, enabled=False)
    return contextlib.nullcontext()


def sum_terms(terms: Iterable[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Add dicts of named auxiliary terms key by key."""
    total: dict[str, Tensor] = {}
    for part in terms:
        for name, value in part.items():
            total[name] = total[name] + value if name in total else value
    return total


__all__ = ["HeadContext", "HeadGroup", "HeadMixer", "no_autocast", "scale_heads", "sum_terms"]
