"""Build real OpenNMT-py models from a few hyper-parameters (parameter counts, tests, bench).

``model_opt(...)`` parses OpenNMT-py's own training options (so every default is
OpenNMT-py's) and ``build_model(...)`` calls ``onmt.model_builder.build_base_model`` with
the headlab plugin loaded. ``device="meta"`` builds without allocating memory.
"""
from __future__ import annotations

import torch

#: stand-alone fallback for ``headlab params`` when headlab.engine.config (presets.yaml) is
#: not importable; the real presets live in headlab/presets.yaml
PRESETS = {
    "base": dict(hidden_size=512, heads=8, transformer_ff=2048, add_qkvbias=True),
    "tiny": dict(hidden_size=64, heads=8, transformer_ff=128, add_qkvbias=True),
}


def model_opt(*, encoder_type="headlab", enc_heads="8L", enc_layers=6, dec_layers=6,
              hidden_size=512, heads=8, transformer_ff=2048, add_qkvbias=True,
              share_embeddings=False, dropout=0.1, attention_dropout=0.1, extra=(),
              decoder_type="transformer", dec_heads="8L", cross_heads="8L"):
    import headlab.engine.plugin  # noqa: F401  (options, encoder registration)
    import onmt.opts as opts
    from onmt.utils.parse import ArgumentParser

    from headlab.engine.config import one_line_errors

    parser = one_line_errors(ArgumentParser(), "train")    # a bad value in ``extra``: one line, no usage
    opts.train_opts(parser)
    args = ["-data", "{}", "-src_vocab", "unused",
            "-encoder_type", encoder_type, "-decoder_type", decoder_type,
            "-enc_heads", enc_heads, "-dec_heads", dec_heads, "-cross_heads", cross_heads, "-enc_layers", str(enc_layers), "-dec_layers", str(dec_layers),
            "-hidden_size", str(hidden_size), "-word_vec_size", str(hidden_size),
            "-heads", str(heads), "-transformer_ff", str(transformer_ff), "-position_encoding",
            "-dropout", str(dropout), "-attention_dropout", str(attention_dropout), *extra]
    if add_qkvbias:
        args.append("-add_qkvbias")
    if share_embeddings:
        args += ["-share_embeddings", "-share_vocab"]
    opt, _ = parser.parse_known_args(args)
    ArgumentParser.update_model_opts(opt)
    ArgumentParser.validate_model_opts(opt)
    return opt


def toy_vocabs(src_size: int, tgt_size: int | None = None, share: bool = False,
               src_tokens: list[str] | None = None, feats: int = 0, values: int = 64):
    """pyonmttok vocabularies of the given sizes (4 specials included); ``feats``: that many
    numeric-order source-feature vocabularies of ``values`` values (headlab.heads.side)."""
    import pyonmttok
    from onmt.constants import DefaultTokens

    specials = [DefaultTokens.UNK, DefaultTokens.PAD, DefaultTokens.BOS, DefaultTokens.EOS]

    def vocab(size, tokens=None):
        tokens = list(tokens or [])
        tokens += [f"w{i}" for i in range(size - len(specials) - len(tokens))]
        return pyonmttok.build_vocab_from_tokens(tokens, special_tokens=specials)

    src = vocab(src_size, src_tokens)
    tgt = src if share else vocab(tgt_size or src_size)
    vocabs = {"src": src, "tgt": tgt, "data_task": "seq2seq", "decoder_start_token": DefaultTokens.BOS}
    if feats:
        vocabs["src_feats"] = [pyonmttok.build_vocab_from_tokens([str(v) for v in range(values)],
                                                                 special_tokens=specials) for _ in range(feats)]
    return vocabs


def build_model(opt, vocabs, device: str | None = None):
    import headlab.engine.plugin  # noqa: F401
    from onmt.model_builder import build_base_model

    if device == "meta":
        with torch.device(device):
            return build_base_model(opt, vocabs)
    model = build_base_model(opt, vocabs)
    # onmt.model_builder.build_model initialises after build_base_model (which leaves
    # skip_init weights uninitialised): same rule here
    with torch.no_grad():
        for param in model.parameters():
            param.uniform_(-opt.param_init, opt.param_init)
    return model.to(device) if device else model


def count_parameters(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def save_checkpoint(model, opt, vocabs, path) -> None:
    """Write ``model`` in OpenNMT-py 3.5.1's checkpoint layout (model_saver._save)."""
    from onmt.inputters.inputter import vocabs_to_dict

    state = {k: v for k, v in model.state_dict().items() if "generator" not in k}
    torch.save({"model": state, "generator": model.generator.state_dict(),
                "vocab": vocabs_to_dict(vocabs), "opt": opt, "optim": None}, path)
