"""Converged hard-concrete gate values of a checkpoint (paper D Table 2).

``headlab gates --model model.pt --out gates.csv`` writes one row per gated head: site,
layer, head (1-based), ``log_alpha``, ``gate`` (the deterministic test-time gate
``clamp(sigmoid(log_alpha)(r - l) + l, 0, 1)``, what translation uses), ``p_open`` (the
head's term of L_C, ``sigmoid(log_alpha - tau log(-l/r))``: the probability that the
stochastic gate is non-zero) and ``kept``.

``kept`` is the paper's 0/1 (Table 2): 1 where the test-time gate is >= 0.5. Paper D says
the gates "converged to approximately 0 or 1" without a threshold; with tau = 0.33 and
stretch (-0.1, 1.1) the test-time gate is exactly 0 for log_alpha < -2.4 and exactly 1
above 2.4, and 0.5 is the midpoint between. ``saturated`` says whether it is exactly 0 or 1.
"""
from __future__ import annotations

import argparse
import math
import re

import pandas as pd

from headlab.heads.mixers import HardConcreteGate

_KEY = re.compile(r"^(encoder\.transformer|decoder\.transformer_layers)\.(\d+)\.(self_attn|context_attn)\."
                  r"mixers\.(\d+)\.log_alpha$")
_SITE = {("encoder.transformer", "self_attn"): "enc", ("decoder.transformer_layers", "self_attn"): "dec",
         ("decoder.transformer_layers", "context_attn"): "cross"}
COLUMNS = ["site", "layer", "head", "log_alpha", "gate", "p_open", "kept", "saturated"]


def gate_rows(state: dict) -> pd.DataFrame:
    """The gate table of a model state dict (no gates: an empty table)."""
    low, high = HardConcreteGate.stretch
    shift = HardConcreteGate.temperature * math.log(-low / high)
    rows = []
    for key, value in state.items():
        match = _KEY.match(key)
        if not match:
            continue
        site = _SITE[(match[1], match[3])]
        for head, la in enumerate(value.detach().float().tolist(), 1):
            s = 1.0 / (1.0 + math.exp(-la))
            gate = min(1.0, max(0.0, s * (high - low) + low))
            rows.append(dict(site=site, layer=int(match[2]) + 1, head=head, log_alpha=la, gate=gate,
                             p_open=1.0 / (1.0 + math.exp(-(la - shift))), kept=int(gate >= 0.5),
                             saturated=gate in (0.0, 1.0)))
    return pd.DataFrame(rows, columns=COLUMNS).sort_values(["site", "layer", "head"], kind="stable",
                                                          ignore_index=True)


def read_gates(path: str) -> pd.DataFrame:
    from headlab.checkpoints import read_checkpoint
    return gate_rows(read_checkpoint(path, needs=("model",))["model"])


def encoder_mask(gates: pd.DataFrame) -> list[list[int]]:
    """Rows of kept (1) / pruned (0) encoder heads per layer, from ``kept``."""
    enc = gates[gates["site"] == "enc"]
    return [list(g.sort_values("head")["kept"].astype(int)) for _, g in enc.groupby("layer", sort=True)]


def main(argv: list[str]) -> int:
    from headlab.errors import DataError
    from headlab.io import atomic_write

    parser = argparse.ArgumentParser(prog="headlab gates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a gated model's checkpoint (.pt)")
    parser.add_argument("--out", required=True, help="gate values CSV")
    args = parser.parse_args(argv)
    table = read_gates(args.model)
    if table.empty:
        raise DataError("the checkpoint has no head gates (train it with a '|gate' head spec)", path=args.model)
    with atomic_write(args.out) as handle:
        table.to_csv(handle, index=False)
    return 0
