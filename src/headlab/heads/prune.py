"""Fixed head masks: pruned heads for paper D §3.5-3.6 (pruned and inverse-pruned fine-tuning).

``-enc_head_mask`` (a model option, so it is stored in the checkpoint and applies in every
forward of training *and* translation) says which encoder self-attention heads are kept:

    mask  := row (("." | ",") row)*       one row per encoder layer, first layer first
    row   := ("0" | "1")+                 one digit per head, in spec order: 1 kept, 0 pruned

``11000000.00010000`` keeps heads 1-2 of layer 1 and head 4 of layer 2 of an 8-head 2-layer
encoder. A single row applies to every layer; ``""`` (the default) keeps every head.

A pruned head's output is multiplied by 0 before the output projection (the same place as
paper A's test-time ablation, ``-disable_enc_heads``). Its parameters are **kept and
frozen, not removed**: the zeroed output gives its query/key/value columns and its
``final_linear`` columns an exactly zero gradient, so Adam (no weight decay) never moves
them (tests/test_paper_D.py checks that a training step leaves them unchanged). Keeping
them keeps the checkpoint's architecture, so a pruned fine-tune loads its parent's
weights with OpenNMT-py's strict loader and its path differs only by the mask.
"""
from __future__ import annotations

import re

from headlab.errors import ConfigError

KEY = "enc_head_mask"


def parse_head_mask(text: str | None, layer_heads: list[int], key: str = KEY) -> list[list[int]] | None:
    """The mask as one list of 0/1 per layer (None: every head kept); ConfigError naming
    ``key`` for a bad string or one that does not fit ``layer_heads`` (heads per layer)."""
    text = (text or "").strip()
    if not text:
        return None
    rows = re.split(r"[.,]", text)
    if len(rows) == 1:
        rows = rows * len(layer_heads)
    if len(rows) != len(layer_heads):
        raise ConfigError(f"head mask {text!r} has {len(rows)} layer rows, the encoder has {len(layer_heads)} "
                          f"layers (one row of 0/1 per layer, separated by '.')", key=key)
    out = []
    for number, (row, heads) in enumerate(zip(rows, layer_heads), 1):
        if not re.fullmatch(r"[01]+", row):
            raise ConfigError(f"head mask {text!r}: layer {number} row {row!r} must be digits 0 (pruned) "
                              f"or 1 (kept)", key=key)
        if len(row) != heads:
            raise ConfigError(f"head mask {text!r}: layer {number} has {heads} heads, the row has {len(row)} "
                              f"digits", key=key)
        out.append([int(c) for c in row])
    return out


def mask_string(rows: list[list[int]]) -> str:
    """``parse_head_mask`` backwards (rows of 0/1 -> ``1100.0010``)."""
    return ".".join("".join(str(int(bool(v))) for v in row) for row in rows)


def invert(rows: list[list[int]]) -> list[list[int]]:
    """Keep exactly the heads the mask prunes (paper D §3.6, inverse pruning)."""
    return [[1 - int(v) for v in row] for row in rows]
