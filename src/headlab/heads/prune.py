"""Fixed head masks: pruned heads for paper D §3.5-3.6 (pruned and inverse-pruned fine-tuning).

``-enc_head_mask`` (a model option, so it is stored in the checkpoint and applies in every
forward of training *and* translation) says which encoder self-attention heads are kept:

    mask  := row (("." | ",") row)*       one row per encoder layer, first layer first
    row   := ("0" | "1")+                 one digit per head, in spec order: 1 kept, 0 pruned

``11000000.00010000`` keeps heads 1-2 of layer 1 and head 4 of layer 2 of an 8-head 2-layer
encoder. A single row applies to every layer; ``""`` (the default) keeps every head.

A pruned head's output is multiplied by 0 before the output projection (the same place as
paper A's test-time ablation, ``-disable_enc_heads``). Its parameters are **kept and
frozen, not removed**. The zeroed output gives them an exactly zero gradient, but a zero
gradient freezes nothing under weight decay (OpenNMT-py's ``adamw8bit`` and paged
optimizers) or with moments from steps before the mask (Adam, Adafactor): every
optimizer step restores them (:class:`FrozenHeads`, applied around OpenNMT-py's
``Optimizer.step`` by :mod:`headlab.engine.compat`; tests/test_paper_D.py checks every
optimizer OpenNMT-py builds here). Keeping them keeps the checkpoint's architecture, so a
pruned fine-tune loads its parent's weights with OpenNMT-py's strict loader and its path
differs only by the mask.
"""
from __future__ import annotations

import re

from headlab.errors import ConfigError

KEY = "enc_head_mask"


def parse_head_mask(text: str | None, layer_heads: list[int], key: str = KEY) -> list[list[int]] | None:
    """The mask as one list of 0/1 per layer (None: every head kept); ConfigError naming
    ``key`` for a bad string or one that does not fit ``layer_heads`` (heads per layer)."""
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)        # YAML's reading of an unquoted all-ones mask (11111111)
    elif text is not None and not isinstance(text, str):
        raise ConfigError(f"head mask {text!r} is a {type(text).__name__}: write it as a quoted string "
                          f"of 0/1 per head, one row per layer ('01001100.00000000')", key=key)
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


def layer_pruned_elements(attn) -> list[tuple[object, object]]:
    """(parameter, boolean mask of its elements) for the pruned heads of one attention layer
    (none without a head mask): their rows of each head group's query/key projections and
    of ``linear_values``, their columns of ``final_linear``. A group's projection rows are
    split evenly over its heads (its ``out_features`` / ``count``)."""
    import torch

    mask = getattr(attn, "head_mask", None)
    if mask is None or not hasattr(attn, "linear_values") or bool(mask.all()):
        return []
    found = []
    pruned = (mask == 0).tolist()
    value_rows = torch.zeros(attn.linear_values.out_features, dtype=torch.bool)
    head = offset = 0
    for group in attn.heads:
        for name in ("linear_query", "linear_keys"):
            linear = getattr(group, name, None)
            if isinstance(linear, torch.nn.Linear):
                width = linear.out_features // group.count
                rows = torch.tensor([pruned[head + k] for k in range(group.count) for _ in range(width)])
                found += _rows(linear, rows)
        for k in range(group.count):
            value_rows[offset + k * group.d_head: offset + (k + 1) * group.d_head] = pruned[head + k]
        head, offset = head + group.count, offset + group.count * group.d_head
    found += _rows(attn.linear_values, value_rows)
    final = getattr(attn, "final_linear", None)
    if isinstance(final, torch.nn.Linear):
        found.append((final.weight, value_rows.unsqueeze(0).expand_as(final.weight).to(final.weight.device)))
    return found


def _rows(linear, rows):
    rows = rows.to(linear.weight.device)
    out = [(linear.weight, rows.unsqueeze(1).expand_as(linear.weight))]
    if linear.bias is not None:
        out.append((linear.bias, rows))
    return out


class FrozenHeads:
    """The pruned heads' parameters of ``model`` (:func:`layer_pruned_elements`) and their values
    when first seen, put back by :meth:`restore` after each optimizer step.

    Found once and kept as flat indices, so that a step reads nothing back from the device:
    indexing by a boolean mask is a host sync on a GPU (``nonzero``), and the masks' rows are
    built on the host (a blocking copy each), 114 waits a step for a 6-layer encoder pruned
    in every layer. Found again (:meth:`refresh`) only where a layer's mask was replaced or
    changed, or something other than the step changed a parameter: written in place (its
    version moved: ``copy_``, a checkpoint loaded into it) or given new storage (``.data =``,
    a move to another device or dtype), so the values put back are always those before the
    step, as if saved at every step."""

    def __init__(self, model):
        self.layers = [module for module in model.modules()
                       if hasattr(module, "head_mask") and hasattr(module, "linear_values")]
        self.masks: list | None = None          # each layer's mask object when last found, and its version
        self.frozen: list[tuple[object, object, object]] = []     # (parameter, flat indices, values)
        self.versions: list[tuple] = []          # each frozen parameter's :meth:`_state` after the last restore

    def _masks(self) -> list:
        return [(layer.head_mask, None if layer.head_mask is None else layer.head_mask._version)
                for layer in self.layers]

    @staticmethod
    def _state(param) -> tuple:
        """What changes when anything but the step writes ``param`` (no tensor value read)."""
        return param._version, param.data_ptr(), param.dtype, param.device

    def _unchanged(self, masks: list) -> bool:
        return (self.masks is not None
                and all(mask is seen and version == seen_version
                        for (mask, version), (seen, seen_version) in zip(masks, self.masks))
                and [self._state(param) for param, *_ in self.frozen] == self.versions)

    def refresh(self) -> None:
        """Before a step: the pruned elements and their values, found again only where a
        mask or a parameter changed since the last :meth:`restore`."""
        masks = self._masks()
        if self._unchanged(masks):
            return
        self.frozen = []
        for param, mask in (found for layer in self.layers for found in layer_pruned_elements(layer)):
            index = mask.reshape(-1).nonzero().squeeze(1)        # one read back, here only
            self.frozen.append((param, index, param.detach().reshape(-1)[index].clone()))
        self.masks = masks
        self.versions = [self._state(param) for param, *_ in self.frozen]

    def restore(self) -> None:
        """After a step: every pruned element back to its value before it."""
        import torch

        with torch.no_grad():
            for param, index, values in self.frozen:
                param.detach().view(-1).index_copy_(0, index, values)
        self.versions = [self._state(param) for param, *_ in self.frozen]
