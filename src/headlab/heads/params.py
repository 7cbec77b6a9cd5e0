"""``headlab params``: parameter count of a real OpenNMT-py model for a preset and head spec.

    headlab params --preset base --layers 6+6 --heads 7Ftoken+1L [--src-vocab N]
                   [--tgt-vocab N] [--share-embeddings] [--encoder-type transformer]

The model is built by OpenNMT-py's own ``build_base_model`` (headlab plugin loaded) on
torch's ``meta`` device: exact shapes, no memory, well under a second. Paper A Table 5
(EN-DE, 6+6): 8L 91.7M, 7Ftoken+1L 88.9M, 8Ftoken 88.5M.
"""
from __future__ import annotations

import argparse

from headlab.errors import ConfigError


def _presets() -> dict:
    try:  # the lead's preset table, when it exists
        from headlab import onmt_config
        table = getattr(onmt_config, "PRESETS", None)
        if table:
            return table
    except ImportError:
        pass
    from headlab.heads.onmt_model import PRESETS
    return PRESETS


def count(preset: str = "base", layers: str = "6+6", heads: str = "8L", *, src_vocab: int = 32000,
          tgt_vocab: int | None = None, share_embeddings: bool = False,
          encoder_type: str = "headlab") -> int:
    from headlab.heads.onmt_model import build_model, count_parameters, model_opt, toy_vocabs

    presets = _presets()
    if preset not in presets:
        raise ConfigError(f"unknown preset {preset!r}; known: {', '.join(sorted(presets))}", key="preset")
    try:
        enc_layers, dec_layers = (int(x) for x in layers.split("+"))
    except ValueError:
        raise ConfigError(f"--layers {layers!r}: expected ENC+DEC, e.g. 6+6 or 6+1", key="layers") from None
    hp = {k: v for k, v in presets[preset].items()
          if k in ("hidden_size", "heads", "transformer_ff", "add_qkvbias")}
    opt = model_opt(encoder_type=encoder_type, enc_heads=heads, enc_layers=enc_layers,
                    dec_layers=dec_layers, share_embeddings=share_embeddings, **hp)
    vocabs = toy_vocabs(src_vocab, tgt_vocab or src_vocab, share=share_embeddings)
    return count_parameters(build_model(opt, vocabs, device="meta"))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab params", description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="base")
    parser.add_argument("--layers", default="6+6", help="ENC+DEC layers, e.g. 6+6 or 6+1")
    parser.add_argument("--heads", default="8L", help="encoder head spec, e.g. 7Ftoken+1L")
    parser.add_argument("--src-vocab", type=int, default=32000)
    parser.add_argument("--tgt-vocab", type=int, default=None)
    parser.add_argument("--share-embeddings", action="store_true")
    parser.add_argument("--encoder-type", default="headlab", help="headlab or transformer (stock)")
    args = parser.parse_args(argv)
    n = count(args.preset, args.layers, args.heads, src_vocab=args.src_vocab,
              tgt_vocab=args.tgt_vocab, share_embeddings=args.share_embeddings,
              encoder_type=args.encoder_type)
    print(n)
    return 0
