"""Helpers shared by the encoder and decoder."""
from __future__ import annotations


def first(value):
    """OpenNMT-py keeps some options as one-element lists (dropout schedules)."""
    return value[0] if isinstance(value, (list, tuple)) else value


def mixer_options(opt) -> dict:
    """The model options head kinds and mixers read (HeadGroup.build, HeadMixer.build).

    A checkpoint trained before an option existed lacks it: the default here is the
    option's default (headlab.engine.opts)."""
    return {"dhicm_dm": getattr(opt, "dhicm_dm", 0),
            "dhicm_dropout": first(getattr(opt, "dhicm_dropout", 0.0)),
            "lpea_k": getattr(opt, "lpea_k", 6),
            "lpea_outside": getattr(opt, "lpea_outside", "mask"),
            "rhe_fgate": getattr(opt, "rhe_fgate", 0.0),
            "relpos_k": getattr(opt, "relpos_k", 16)}


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
    hints = {"max_relative_positions": "for Shaw et al.'s relative positions use the head kind "
                                       "RelPos instead (e.g. -enc_heads 8RelPos -relpos_k 16), "
                                       "or the stock transformer"}
    for key, bad in unsupported.items():
        if bad:
            hint = hints.get(key, "no head kind for it; use the stock transformer")
            raise ConfigError(f"{what} does not support {key}={getattr(opt, key)!r} ({hint})", key=key)



class HeadSites:
    """What the headlab encoder and decoder share: head-module initialisation and the stock
    state-dict mapping (mixed into both)."""

    def reset_head_parameters(self) -> None:
        """Re-apply head modules' own initialisation (e.g. open gates) after OpenNMT-py's
        generic ``-param_init`` / ``-param_init_glorot`` pass over all parameters."""
        for module in self.modules():
            if module is not self and hasattr(module, "reset_head_parameters"):
                module.reset_head_parameters()

    @staticmethod
    def load_stock_state_dict(state_dict: dict) -> dict:
        """Rename a stock TransformerEncoder/Decoder state dict for headlab ``8L`` sites."""
        from headlab.heads.attention import stock_key_map
        return {stock_key_map(k): v for k, v in state_dict.items()}
