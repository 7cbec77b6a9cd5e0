"""Helpers shared by the encoder and decoder."""
from __future__ import annotations

from typing import Iterable

from torch import Tensor


def first(value):
    """OpenNMT-py keeps some options as one-element lists (dropout schedules)."""
    return value[0] if isinstance(value, (list, tuple)) else value


def mixer_options(opt) -> dict:
    """The model options head mixers read (see HeadMixer.build)."""
    return {"dhicm_dm": getattr(opt, "dhicm_dm", 0),
            "dhicm_dropout": first(getattr(opt, "dhicm_dropout", 0.0))}


def check_supported(opt, what: str, extra: dict[str, bool] | None = None) -> None:
    """ConfigError for OpenNMT-py options headlab's attention does not implement (yet)."""
    from headlab.errors import ConfigError

    unsupported = {
        "max_relative_positions": getattr(opt, "max_relative_positions", 0) != 0,
        "relative_positions_buckets": getattr(opt, "relative_positions_buckets", 0) != 0,
        "num_kv": getattr(opt, "num_kv", 0) != 0,
        "parallel_mode": (getattr(opt, "parallel_mode", "data_parallel") == "tensor_parallel"
                          and getattr(opt, "world_size", 1) > 1),
        "use_ckpting": "mha" in (getattr(opt, "use_ckpting", None) or []),
        **(extra or {}),
    }
    for key, bad in unsupported.items():
        if bad:
            raise ConfigError(f"{what} does not support {key}={getattr(opt, key)!r} yet (no head "
                              f"kind for it); use the stock transformer", key=key)


def sum_terms(terms: Iterable[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Add dicts of named auxiliary terms key by key."""
    total: dict[str, Tensor] = {}
    for part in terms:
        for name, value in part.items():
            total[name] = total[name] + value if name in total else value
    return total
