"""``headlab params``: parameter count of a real OpenNMT-py model for a preset and head spec.

    headlab params --preset base --layers 6+6 --heads 7Ftoken+1L [--src-vocab N]
                   [--tgt-vocab N] [--share-embeddings] [--encoder-type transformer]
                   [--option lpea_k=4 ...]

Architecture keys (hidden_size, heads, transformer_ff, add_qkvbias, ...) come from the
preset (headlab/presets.yaml via headlab.engine.config); embedding sharing only from
``--share-embeddings``. The model is built by OpenNMT-py's own ``build_base_model`` (headlab plugin loaded) on
torch's ``meta`` device: exact shapes, no memory, well under a second. Paper A Table 5
(EN-DE, 6+6): 8L 91.7M, 7Ftoken+1L 88.9M, 8Ftoken 88.5M. Paper C (first encoder layer,
d_h = 64): DEA and RHEdea +0; LPEA and RHElpea +(2k+1)d_h + d_h² + 2d_h (5,056 at k = 6);
RelPos +(2k+1)d_h per layer; Local +d_h² + 2·8·d_h per layer (tests/test_heads_params.py).
"""
from __future__ import annotations

import argparse

from headlab.errors import ConfigError
from headlab.options import bounded


#: architecture keys taken from a preset; embedding tying comes from the flags only, so
#: that the default reproduces paper A Table 5 (separate source/target embeddings)
_ARCH = ("hidden_size", "heads", "transformer_ff", "add_qkvbias")
_ARCH_FLAGS = ("add_ffnbias", "parallel_residual")          # store_true options
_ARCH_VALUES = ("layer_norm", "pos_ffn_activation_fn", "norm_eps")


def _preset(name: str) -> dict:
    """Architecture of preset ``name`` from headlab/presets.yaml (headlab.engine.config)."""
    try:
        from headlab.engine.config import resolve_preset
    except ImportError:                 # stand-alone fallback: headlab.engine.model.PRESETS
        from headlab.engine.model import PRESETS
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))}",
                              key="preset") from None
        return dict(PRESETS[name])
    return resolve_preset(name)


def _check_options(options: dict[str, str]) -> None:
    """``--option`` names and values as ``onmt_train`` would take them, and within the
    bounds the training configs are held to: a misspelt name would leave the count as it
    was without a word, a bad value fail in OpenNMT-py's parser (after its ~250-line usage)
    or in torch (``transformer_ff=-5``: a negative dimension)."""
    from headlab.engine import option_values
    from headlab.engine.config import validate_options

    validate_options(options, source="--option")
    bad = option_values.out_of_range(options)
    if bad:
        raise ConfigError(bad[1], path="--option", key=bad[0])


def count(preset: str = "base", layers: str = "6+6", heads: str = "8L", *, src_vocab: int = 32000,
          tgt_vocab: int | None = None, share_embeddings: bool = False,
          encoder_type: str = "headlab", options: dict | None = None) -> int:
    """Parameters of the model; ``options``: more model options that change the count
    (``{"lpea_k": 4}``, ``{"relpos_k": 8}``, ``{"lpea_outside": "learned"}``)."""
    from headlab.engine.model import build_model, count_parameters, model_opt, toy_vocabs

    options_ = options
    options = _preset(preset)
    try:
        enc_layers, dec_layers = (int(x) for x in layers.split("+"))
    except ValueError:
        raise ConfigError(f"--layers {layers!r}: expected ENC+DEC, e.g. 6+6 or 6+1", key="layers") from None
    hp = {k: options[k] for k in _ARCH if k in options}
    extra = [f"-{k}" for k in _ARCH_FLAGS if options.get(k)]
    extra += [a for k in _ARCH_VALUES if k in options for a in (f"-{k}", str(options[k]))]
    extra += [a for k, v in (options_ or {}).items() for a in (f"-{k}", str(v))]
    from headlab.naming import STOCK_HEADS, parse_heads_name
    specs = parse_heads_name(heads)        # the encoder's spec, or all three sites as a path names them
    decoder = "transformer" if specs["dec"] == specs["cross"] == STOCK_HEADS else "headlab"
    opt = model_opt(encoder_type=encoder_type, enc_heads=specs["enc"], enc_layers=enc_layers,
                    dec_layers=dec_layers, share_embeddings=share_embeddings, extra=extra,
                    decoder_type=decoder, dec_heads=specs["dec"], cross_heads=specs["cross"], **hp)
    vocabs = toy_vocabs(src_vocab, tgt_vocab or src_vocab, share=share_embeddings)
    return count_parameters(build_model(opt, vocabs, device="meta"))


def count_checkpoint(path: str) -> int:
    """Parameters of a trained OpenNMT-py checkpoint (tied weights counted once)."""
    import headlab.engine.plugin  # noqa: F401
    from onmt.inputters.inputter import dict_to_vocabs
    from onmt.model_builder import build_base_model
    from onmt.utils.parse import ArgumentParser

    from headlab.engine.model import count_parameters
    from headlab.checkpoints import read_checkpoint

    ckpt = read_checkpoint(path, needs=("opt", "vocab"))
    opt = ArgumentParser.ckpt_model_opts(ckpt["opt"])
    # built on the CPU, not under ``torch.device("meta")``: that context's first use imports
    # torch._dynamo (1.0 CPU-s a process); a base-size model's CPU build takes 0.6 s, a toy's ~0
    model = build_base_model(opt, dict_to_vocabs(ckpt["vocab"]))
    return count_parameters(model)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab params", description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="base", help="a preset of src/headlab/presets.yaml")
    parser.add_argument("--layers", default="6+6", help="ENC+DEC layers, e.g. 6+6 or 6+1")
    parser.add_argument("--heads", default="8L",
                        help="encoder head spec (7Ftoken+1L), or all three sites: ENC@dec=SPEC@cross=SPEC")
    parser.add_argument("--src-vocab", type=bounded(int, 1), default=32000, help="source vocabulary size")
    parser.add_argument("--tgt-vocab", type=bounded(int, 1), default=None,
                        help="target vocabulary size (default: the source's)")
    parser.add_argument("--share-embeddings", action="store_true", help="one embedding matrix for both sides and the generator")
    parser.add_argument("--encoder-type", default="headlab", help="headlab or transformer (stock)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="a model option that changes the count, e.g. lpea_k=4 (repeatable)")
    parser.add_argument("--model", help="count a trained checkpoint instead of a preset")
    parser.add_argument("--out", help="write {\"params\": N} as JSON here instead of printing N")
    args = parser.parse_args(argv)
    if args.model:
        n = count_checkpoint(args.model)
        if args.out:
            import json
            from headlab.io import atomic_write
            with atomic_write(args.out) as handle:
                json.dump({"params": n, "model": args.model}, handle)
            return 0
        print(n)
        return 0
    extra = {}
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE, e.g. lpea_k=4", key="option")
        extra[key.lstrip("-")] = value
    _check_options(extra)
    n = count(args.preset, args.layers, args.heads, src_vocab=args.src_vocab,
              tgt_vocab=args.tgt_vocab, share_embeddings=args.share_embeddings,
              encoder_type=args.encoder_type, options=extra)
    print(n)
    return 0
