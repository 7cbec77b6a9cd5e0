"""``headlab profile-heads`` and ``headlab treebank``: paper D §2.2 for any trained model.

    headlab treebank text  --in GOLD.conllu[.gz] --out RAW.src [--pair en-de]
    headlab treebank parse --in RAW.src --out GOLD.conllu [--pair en-de] [--spacy-model NAME]
    headlab profile-heads  --model model.pt --treebank GOLD.conllu[.gz] --src BPE.src --pair en-de
                           --out PREFIX [--max-sents N] [--figure-sents 10] [--batch-size 32] [--gpu -1]

``treebank text`` writes a treebank's sentences as one raw line each: the workflow then
runs the model's own preprocessing on it (the pair's Moses tokeniser, truecaser and BPE
codes, rules/data.smk) like any split. ``treebank parse`` parses raw source lines with
spaCy into CoNLL-U (the paper parsed newstest2016 with CoreNLP). ``profile-heads`` runs
the encoder over the BPE'd sentences (:func:`headlab.engine.export.site_attention`, any
``-encoder_type headlab`` checkpoint: fixed, learned, gated or DHICM heads), aligns each
tree with its pieces (:mod:`headlab.syntax.align`) and writes

* ``PREFIX.csv``: the tidy head profile (:mod:`headlab.syntax.profile`);
* ``PREFIX.baselines.csv``: the offset baselines per relation;
* ``PREFIX.alignment.json``: sentences, aligned / unaligned words, scored / skipped arcs;
* ``PREFIX.attention.npz``: the first ``-figure_sents`` sentences in the layout of
  ``headlab export-attention`` (``att_*``, ``tokens``, ...; :func:`headlab.engine.export.load_attention`
  reads it), plus ``words_*`` (layers, heads, units, units) word-level attention and
  ``trees`` (JSON per sentence: forms, heads, relations, units) for the arc figures
  (:func:`headlab.syntax.arcs.load_figure_sentences` reads them).

Only English-source models can be profiled against English trees: another pair is a
:class:`ConfigError` naming it. A source file whose sentence count differs from the
treebank's is a :class:`DataError` naming both files. Every output is written after the
whole run, each atomically.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from headlab.errors import ConfigError, DataError
from headlab.io import atomic_write, read_lines
from headlab.syntax.align import align
from headlab.syntax.conllu import SPACY_MODEL, load_treebank, parse_texts, texts, write_conllu
from headlab.syntax.profile import Profile, word_attention

LANGUAGE = "en"        # the gold trees' language (UD English-EWT / PUD, the English spaCy model)


def check_pair(pair: str | None) -> None:
    if pair is None:
        return
    src = pair.split("-")[0]
    if src != LANGUAGE:
        raise ConfigError(f"pair {pair}: the syntactic profile needs an English-source model (English gold "
                          f"trees); this model reads {src!r}", key="pair")


def head_kinds(spec: str, layers: int) -> list[list[str]]:
    """Per layer, per head: the head kind (``L``; fixed heads with their pattern, ``Ftoken:previous``)."""
    from headlab.heads.kinds import _FixedHeads
    from headlab.heads.patterns import PATTERNS
    from headlab.heads.spec import HEAD_KINDS, parse_spec

    out = []
    for layer in parse_spec(spec, layers, "enc"):
        kinds = []
        for term in layer.terms:
            fixed = issubclass(HEAD_KINDS[term.kind], _FixedHeads)
            kinds += [f"{term.kind}:{PATTERNS[k]}" if fixed else term.kind for k in range(term.count)]
        out.append(kinds)
    return out


def _figure_entry(tree, alignment) -> dict:
    return {"sent_id": tree.sent_id, "forms": tree.forms, "heads": tree.heads, "deprels": tree.deprels,
            "scheme": tree.scheme, "word_unit": alignment.word_unit, "unit_words": alignment.unit_words,
            "units": [" ".join(tree.forms[w] for w in words) for words in alignment.unit_words]}


def profile_heads(model_path: str, treebank: str, src: str, out: str, pair: str | None = None,
                  max_sents: int | None = None, figure_sents: int = 10, batch_size: int = 32,
                  gpu: int = -1) -> dict:
    """Profile the encoder heads of ``model_path`` on ``treebank``; returns the summary."""
    import torch
    from headlab.engine.export import load_model, site_attention

    check_pair(pair)
    trees = load_treebank(treebank)
    lines = read_lines(src)
    if len(lines) != len(trees):
        raise DataError(f"{len(lines)} source sentences, but the treebank {treebank} has {len(trees)}: "
                        f"the source must be the treebank's text, one sentence a line, in order", path=src)
    if max_sents is not None:
        trees, lines = trees[:max_sents], lines[:max_sents]
    pieces = [line.split() for line in lines]
    alignments = [align(t, p) for t, p in zip(trees, pieces)]     # every mismatch before the model runs

    vocabs, model, opt = load_model(model_path, gpu)
    layers = len(model.encoder.transformer) if hasattr(model.encoder, "transformer") else opt.enc_layers
    kinds = head_kinds(getattr(opt, "enc_heads", f"{opt.heads}L"), layers)
    prof = Profile(layers, len(kinds[0]), kinds)
    figures, device = {}, next(model.parameters()).device
    with torch.no_grad():
        for i, (tokens, att, _) in enumerate(site_attention(model, vocabs, pieces, None, "enc", batch_size, device)):
            prof.add(trees[i], alignments[i], att)
            if i < figure_sents:
                figures[i] = (tokens, att, word_attention(att, alignments[i].unit_pieces).astype(np.float32))

    summary = {"treebank": str(treebank), "source": str(src), "model": str(model_path), **prof.summary()}
    arrays = {}
    for i, (tokens, att, words) in figures.items():
        arrays[f"att_{i:06d}"] = att
        arrays[f"words_{i:06d}"] = words
    order = sorted(figures)
    arrays["tokens"] = np.array([" ".join(figures[i][0]) for i in order], dtype=str)
    arrays["lengths"] = np.array([len(figures[i][0]) for i in order], dtype=np.int64)
    arrays["spec"] = np.array(getattr(opt, "enc_heads", ""), dtype=str)
    arrays["site"] = np.array("enc", dtype=str)
    arrays["trees"] = np.array([json.dumps(_figure_entry(trees[i], alignments[i])) for i in order], dtype=str)
    heads, baselines = prof.heads(), prof.baselines()
    with atomic_write(f"{out}.csv") as handle:
        heads.to_csv(handle, index=False)
    with atomic_write(f"{out}.baselines.csv") as handle:
        baselines.to_csv(handle, index=False)
    with atomic_write(f"{out}.attention.npz", "wb") as handle:
        np.savez_compressed(handle, **arrays)
    with atomic_write(f"{out}.alignment.json") as handle:
        json.dump(summary, handle, indent=1)
    return summary


def main_profile_heads(argv: list[str]) -> int:
    from headlab.options import CommandParser, bounded

    parser = CommandParser("profile-heads", __doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a headlab checkpoint (.pt)")
    parser.add_argument("--treebank", required=True, help="gold trees, CoNLL-U (.gz allowed)")
    parser.add_argument("--src", required=True, help="the treebank's text after the model's preprocessing (BPE)")
    parser.add_argument("--pair", default=None, help="the model's language pair (English source only)")
    parser.add_argument("--out", required=True, help="output prefix (PREFIX.csv, .baselines.csv, ...)")
    parser.add_argument("--max-sents", type=bounded(int, 1), default=None, help="only the first N sentences")
    parser.add_argument("--figure-sents", type=bounded(int, 0), default=10, help="sentences drawn in the attention figure")
    parser.add_argument("--batch-size", type=bounded(int, 1), default=32, help="sentences per batch")
    parser.add_argument("--gpu", type=int, default=-1, help="CUDA device id, -1 for CPU")
    args = parser.parse_args(argv)
    s = profile_heads(args.model, args.treebank, args.src, args.out, args.pair, args.max_sents, args.figure_sents,
                      args.batch_size, args.gpu)
    print(f"{args.out}.csv: {s['sentences']} sentences, {s['arcs_scored']} of {s['arcs']} arcs scored, "
          f"{s['unaligned_words']} of {s['words']} words unaligned")
    return 0


def main_treebank(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="headlab treebank", description="gold trees' text, or spaCy parses")
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("text", help="one raw sentence a line from a CoNLL-U file")
    p.add_argument("--in", dest="inp", required=True, help="a CoNLL-U file")
    p.add_argument("--out", required=True, help="raw sentences, one a line")
    p.add_argument("--pair", default=None, help="the language pair (English source only)")
    p = sub.add_parser("parse", help="parse raw source lines with spaCy into CoNLL-U")
    p.add_argument("--in", dest="inp", required=True, help="raw source sentences")
    p.add_argument("--out", required=True, help="CoNLL-U to write")
    p.add_argument("--pair", default=None, help="the language pair (English source only)")
    p.add_argument("--spacy-model", default=SPACY_MODEL, help="spaCy model name")
    args = parser.parse_args(argv)
    check_pair(args.pair)
    if args.step == "text":
        with atomic_write(args.out) as handle:
            for line in texts(load_treebank(args.inp)):
                handle.write(line + "\n")
    else:
        from headlab.syntax.conllu import load_spacy
        lines = read_lines(args.inp)
        write_conllu(parse_texts(lines, load_spacy(args.spacy_model), where=args.inp), args.out)
    return 0
