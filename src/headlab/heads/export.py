"""``headlab export-attention``: per-layer, per-head encoder self-attention of given sentences.

    headlab export-attention -model ckpt.pt -src tokenised_bpe.txt -out att.npz [-max_sents N]
                             [-batch_size 32] [-gpu -1] [-disable_enc_heads k ...]

Works for any OpenNMT-py checkpoint whose encoder has an ``attention(src, src_len)``
method (``-encoder_type headlab``: learned heads give their softmax, fixed heads their
pattern, materialised densely only here). The model is loaded with OpenNMT-py's own
``load_test_model`` (plugin loaded), so test-time options behave as in translation.

The ``.npz`` (no pickles) holds: ``att_000000``, ... one float32 array (layers, heads,
n, n) per sentence, rows = attending token; ``tokens``: the sentences (space-joined
pieces, as in the input); ``lengths``; ``spec``: the encoder head spec. Read it back with
:func:`load_attention`.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from headlab.errors import ConfigError
from headlab.io import atomic_write, read_lines


def load_model(model_path: str, gpu: int = -1, disable_heads=()):
    """OpenNMT-py's load_test_model with the plugin: (vocabs, model, model_opt)."""
    import headlab.plugin  # noqa: F401
    import onmt.opts as opts
    from onmt.model_builder import load_test_model
    from onmt.utils.parse import ArgumentParser

    parser = ArgumentParser()
    opts.translate_opts(parser)
    args = ["-model", str(model_path), "-src", "unused", "-gpu", str(gpu)]
    if disable_heads:
        args += ["-disable_enc_heads", *map(str, disable_heads)]
    opt = parser.parse_args(args)
    return load_test_model(opt)


def sentence_attention(encoder, vocab, sentences: list[list[str]], batch_size: int = 32,
                       device="cpu"):
    """Yield (tokens, array (layers, heads, n, n)) for each tokenised sentence."""
    if not hasattr(encoder, "attention"):
        raise ConfigError("attention export needs a model trained with -encoder_type headlab",
                          key="encoder_type")
    from onmt.constants import DefaultTokens

    pad = vocab[DefaultTokens.PAD]
    for start in range(0, len(sentences), batch_size):
        batch = sentences[start:start + batch_size]
        lengths = torch.tensor([len(s) for s in batch], device=device)
        src = torch.full((len(batch), int(lengths.max()), 1), pad, dtype=torch.long, device=device)
        for b, tokens in enumerate(batch):
            src[b, :len(tokens), 0] = torch.tensor(vocab(tokens), device=device)
        maps = torch.stack(encoder.attention(src, lengths), 1).cpu()   # (B, L, H, N, N)
        for b, tokens in enumerate(batch):
            n = len(tokens)
            yield tokens, maps[b, :, :, :n, :n].numpy().astype(np.float32)


def export_attention(model_path: str, src_path: str, out_path: str, max_sents: int | None = None,
                     batch_size: int = 32, gpu: int = -1, disable_heads=()) -> int:
    """Write the npz described in the module doc; returns the number of sentences."""
    vocabs, model, model_opt = load_model(model_path, gpu, disable_heads)
    lines = read_lines(src_path)
    if max_sents is not None:
        lines = lines[:max_sents]
    sentences = [line.split() for line in lines]
    for number, tokens in enumerate(sentences, 1):
        if not tokens:
            raise ConfigError("empty source sentence (OpenNMT-py drops these)", path=src_path, line=number)
    device = next(model.parameters()).device
    arrays = {}
    with torch.no_grad():
        for i, (_, att) in enumerate(sentence_attention(model.encoder, vocabs["src"], sentences,
                                                        batch_size, device)):
            arrays[f"att_{i:06d}"] = att
    arrays["tokens"] = np.array([" ".join(s) for s in sentences], dtype=str)
    arrays["lengths"] = np.array([len(s) for s in sentences], dtype=np.int64)
    arrays["spec"] = np.array(getattr(model_opt, "enc_heads", ""), dtype=str)
    with atomic_write(out_path, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    return len(sentences)


def load_attention(path: str) -> list[tuple[list[str], np.ndarray]]:
    """[(tokens, (layers, heads, n, n) array), ...] from an export."""
    with np.load(path) as data:
        tokens = [str(t).split() for t in data["tokens"]]
        return [(toks, data[f"att_{i:06d}"]) for i, toks in enumerate(tokens)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab export-attention",
                                     description="dump per-layer, per-head encoder attention to npz")
    parser.add_argument("-model", required=True)
    parser.add_argument("-src", required=True, help="tokenised, BPE-segmented source (one sentence a line)")
    parser.add_argument("-out", required=True)
    parser.add_argument("-max_sents", type=int, default=None)
    parser.add_argument("-batch_size", type=int, default=32)
    parser.add_argument("-gpu", type=int, default=-1)
    parser.add_argument("-disable_enc_heads", type=int, nargs="*", default=[])
    args = parser.parse_args(argv)
    n = export_attention(args.model, args.src, args.out, args.max_sents, args.batch_size,
                         args.gpu, args.disable_enc_heads)
    print(f"{args.out}: {n} sentences")
    return 0
