"""``headlab atlas-model``: the head table of one model, every criterion from one process.

    headlab atlas-model --model model.pt --src valid.src --tgt valid.tgt --name MODELPATH --out DIR
                        [--valid-sentences 100] [--examples 3] [--batch-size 32]
                        [--treebank GOLD.conllu[.gz] --treebank-src BPE.src --treebank-sentences 100]
                        [--bleu full=SCORE.json --bleu 1=SCORE.json ...] [--gpu -1]

The model is loaded once; :mod:`headlab.atlas.probe` runs the shared passes on the first
``valid_sentences`` validation pairs; the encoder's syntactic profile (paper D §2.2,
:mod:`headlab.syntax.profile`) runs on the first ``treebank_sentences`` gold trees when a
treebank is given (English-source models). Writes into ``DIR``:

* ``heads.csv``: one row per site × layer × head (:data:`COLUMNS`);
* ``examples.json``: the attention of every head on the first ``examples`` validation
  sentences of at most :data:`EXAMPLE_MAX` pieces, per piece and per word (to a word: sum
  over its pieces, from a word: mean, as the profile does), for the explorer;
* ``profile.csv`` / ``profile.baselines.csv``: the syntactic profile, when computed;
* ``timing.json``: CPU seconds of each part (load, passes, ablation, profile, write), their
  total, and the wall time.

Columns beyond the passes: the head's ``kind`` (spec kind, fixed heads with their pattern:
``Ftoken:previous``), ``family`` (the issue's list: learned, fixed pattern, DEA, LPEA,
RelPos, Local, RHE*, DHICM-mixed, gated, pruned; a pruned or gated or DHICM-mixed head is
named so whatever its kind), ``gate`` / ``gate_kept`` (L0 gates: the test-time gate and
whether it is >= 0.5, :mod:`headlab.heads.gates`), ``dhicm_importance`` (mean G of the head
over the layer's query tokens) and ``dhicm_entropy`` (the layer's mean entropy of G per
token, on every head of the layer), ``rhe_redundant`` (share of sentences RHE labels the
head redundant), ``delta_bleu`` (test-time BLEU change with encoder head k disabled *in
every encoder layer*, paper A §4.3's ablation, from the ``-bleu`` score files: the same
value on head k of each layer), ``syn_*`` (the head's most syntactic relation: the one it
beats its best offset baseline by most, dependent -> head, v1 names, at least
:data:`SYN_MIN_COUNT` arcs; its accuracy, the baseline and the margin, points).
``grad_importance`` is ``grad_raw`` divided by the L2 norm of its layer's ``grad_raw``
(Michel et al.'s code normalises each layer so; every layer alike here). ``value_norm`` is
Kobayashi et al.'s ‖Σ_j α_ij f(x_j)‖, mean over query tokens (:mod:`headlab.atlas.probe`).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pandas as pd

from headlab.errors import ConfigError, DataError
from headlab.io import atomic_write, read_lines

COLUMNS = ["model", "site", "layer", "head", "kind", "family", "mixer", "pruned", "confidence", "entropy",
           "distance", "grad_raw", "grad_importance", "loss_delta", "value_norm", "delta_bleu", "syn_relation",
           "syn_accuracy", "syn_baseline", "syn_margin", "syn_count", "dhicm_importance", "dhicm_entropy", "gate",
           "gate_kept", "rhe_redundant", "tokens", "sentences"]
EXAMPLE_MAX = 24      # pieces: longer sentences make unreadable matrices
SYN_MIN_COUNT = 20    # arcs a relation needs before it can be a head's best (paper D's join)
FAMILY = {"L": "learned", "Lwide": "learned", "Ftoken": "fixed pattern", "Fword": "fixed pattern"}


def head_kinds(modules: dict[str, list], encoder) -> pd.DataFrame:
    """site, layer, head (1-based), kind, family, mixer, pruned of every head."""
    mask = getattr(encoder, "head_mask", None)
    rows = []
    for site, layers in modules.items():
        for number, attn in enumerate(layers, 1):
            mixers = [m for m in attn.spec.mixers]
            head = 0
            for group in attn.heads:
                patterns = getattr(group, "patterns", None)
                for k in range(group.count):
                    head += 1
                    kind = f"{group.kind_name}:{patterns[k]}" if patterns else group.kind_name
                    pruned = bool(site == "enc" and mask is not None and mask[number - 1][head - 1] == 0)
                    family = FAMILY.get(group.kind_name, group.kind_name)
                    family = ("pruned" if pruned else "gated" if "gate" in mixers
                              else "DHICM-mixed" if "dhicm" in mixers else family)
                    rows.append(dict(site=site, layer=number, head=head, kind=kind, family=family,
                                     mixer="+".join(mixers), pruned=pruned))
    return pd.DataFrame(rows)


def _units(tokens: list[str]) -> list[list[int]]:
    """Pieces of each word: a piece ending in ``@@`` continues into the next."""
    units, current = [], []
    for i, token in enumerate(tokens):
        current.append(i)
        if not token.endswith("@@"):
            units.append(current)
            current = []
    if current:
        units.append(current)
    return units


def _words(tokens: list[str], units: list[list[int]]) -> list[str]:
    return ["".join(tokens[i].removesuffix("@@") for i in unit) for unit in units]


def _round(array: np.ndarray) -> list:
    return np.round(array.astype(np.float64), 3).tolist()


def example_entry(src: list[str], tgt: list[str], maps: dict[str, np.ndarray]) -> dict:
    """One explorer sentence: tokens and words of both sides, each site's attention (layers,
    heads, queries, keys) per piece and per word."""
    tgt = ["<s>"] + tgt
    units = {"src": _units(src), "tgt": _units(tgt)}
    sides = {"enc": ("src", "src"), "dec": ("tgt", "tgt"), "cross": ("tgt", "src")}
    entry = {"src": src, "tgt": tgt, "src_words": _words(src, units["src"]), "tgt_words": _words(tgt, units["tgt"]),
             "maps": {}, "word_maps": {}}
    for site, att in maps.items():
        q, k = sides[site]
        # to a word: sum over its pieces (columns); from a word: mean over them (rows), as
        # headlab.syntax.profile.word_attention (which needs one side: self-attention only)
        member_k = np.zeros((len(units[k]), att.shape[-1]))
        for u, pieces in enumerate(units[k]):
            member_k[u, pieces] = 1.0
        member_q = np.zeros((len(units[q]), att.shape[-2]))
        for u, pieces in enumerate(units[q]):
            member_q[u, pieces] = 1.0 / len(pieces)
        words = member_q @ (att.astype(np.float64) @ member_k.T)
        entry["maps"][site] = _round(att)
        entry["word_maps"][site] = _round(words)
    return entry


def _syntax_columns(out_dir: Path) -> pd.DataFrame:
    """layer, head, syn_* of each encoder head (its most syntactic relation)."""
    from headlab.syntax.profile import syntactic_heads

    csv, base_csv = out_dir / "profile.csv", out_dir / "profile.baselines.csv"
    relations = syntactic_heads(csv, baselines_csv=base_csv, threshold=float("-inf"), min_count=SYN_MIN_COUNT)
    best = (relations.sort_values(["margin", "accuracy"], ascending=False, kind="stable")
            .drop_duplicates(["layer", "head"]))
    return best.rename(columns={"relation": "syn_relation", "accuracy": "syn_accuracy", "baseline": "syn_baseline",
                                "margin": "syn_margin", "count": "syn_count"})[
        ["layer", "head", "syn_relation", "syn_accuracy", "syn_baseline", "syn_margin", "syn_count"]]


def _profile(model, vocabs, opt, treebank: str, lines: list[str], n: int, out_dir: Path, device) -> pd.DataFrame:
    import torch
    from headlab.engine.export import plain_tokens, site_attention
    from headlab.syntax.align import align
    from headlab.syntax.conllu import load_treebank
    from headlab.syntax.profile import Profile
    from headlab.syntax.run import head_kinds as profile_kinds

    trees = load_treebank(treebank)
    if len(lines) != len(trees):
        raise DataError(f"{len(lines)} source sentences, but the treebank {treebank} has {len(trees)}")
    trees, sentences = trees[:n], [line.split() for line in lines[:n]]
    alignments = [align(t, plain_tokens(p)) for t, p in zip(trees, sentences)]
    layers = len(model.encoder.transformer)
    kinds = profile_kinds(getattr(opt, "enc_heads", None) or "8L", layers)
    prof = Profile(layers, len(kinds[0]), kinds)
    with torch.no_grad():
        for i, (_, att, _) in enumerate(site_attention(model, vocabs, sentences, None, "enc", 32, device)):
            prof.add(trees[i], alignments[i], att)
    with atomic_write(out_dir / "profile.csv") as handle:
        prof.heads().to_csv(handle, index=False)
    with atomic_write(out_dir / "profile.baselines.csv") as handle:
        prof.baselines().to_csv(handle, index=False)
    return _syntax_columns(out_dir)


def _delta_bleu(scores: dict[str, str]) -> dict[int, float]:
    """{encoder head k: BLEU with head k disabled in every layer - full BLEU}."""
    if not scores:
        return {}
    if "full" not in scores:
        raise ConfigError("-bleu needs the full model's score (full=SCORE.json) beside the ablated ones", key="bleu")
    full = json.loads(Path(scores["full"]).read_text())["bleu"]
    return {int(k): json.loads(Path(p).read_text())["bleu"] - full for k, p in scores.items() if k != "full"}


def _read_pairs(src: str, tgt: str, n: int) -> tuple[list[list[str]], list[list[str]]]:
    s_lines, t_lines = read_lines(src), read_lines(tgt)
    if len(s_lines) != len(t_lines):
        raise DataError(f"{len(s_lines)} source lines but {len(t_lines)} target lines in {tgt}", path=src)
    pairs = [(s.split(), t.split()) for s, t in zip(s_lines, t_lines) if s.split()][:n]
    if not pairs:
        raise DataError("no sentence pair to characterise the heads on", path=src)
    return [p[0] for p in pairs], [p[1] for p in pairs]


def characterise(model_path: str, src: str, tgt: str, out_dir: str, name: str, *, valid_sentences: int = 100,
                 examples: int = 3, batch_size: int = 32, treebank: str | None = None,
                 treebank_src: str | None = None, treebank_sentences: int = 100,
                 bleu: dict[str, str] | None = None, gpu: int = -1) -> pd.DataFrame:
    """Write the files of the module doc; returns the head table."""
    import torch

    # headlab.engine first: its deferral of spaCy & co. must precede OpenNMT-py's imports
    from headlab.engine.export import load_model, plain_tokens
    from headlab.atlas.probe import ablation_losses, batches, forward_pass, site_modules
    from headlab.heads.gates import gate_rows
    from onmt.constants import DefaultTokens

    if bool(treebank) != bool(treebank_src):
        raise ConfigError("give the treebank (-treebank) and its preprocessed text (-treebank_src) together",
                          key="treebank")
    out = Path(out_dir)     # made by the first file written: a refused input leaves no folder
    # CPU seconds of each part (wall time on a shared machine says little), wall in total
    timing, clock, wall = {}, time.process_time(), time.perf_counter()

    def lap(part):
        nonlocal clock
        now = time.process_time()
        timing[part] = round(now - clock, 3)
        clock = now

    torch.manual_seed(0)
    src_s, tgt_s = _read_pairs(src, tgt, valid_sentences)
    vocabs, model, opt = load_model(model_path, gpu)
    model.eval()
    device = next(model.parameters()).device
    modules = site_modules(model, opt)
    for p in model.parameters():
        p.requires_grad_(False)       # only the probes need gradients
    pad = vocabs["tgt"][DefaultTokens.PAD]
    data = batches(model, vocabs, src_s, tgt_s, device, batch_size)
    short = [i for i, s in enumerate(src_s) if len(s) <= EXAMPLE_MAX and len(tgt_s[i]) < EXAMPLE_MAX][:examples]
    lap("load")
    results, total, tokens, maps = forward_pass(model, modules, data, pad, set(short))
    lap("passes")
    deltas = ablation_losses(model, modules, data, pad, total, tokens)
    lap("ablation")
    syntax = None
    if treebank:
        syntax = _profile(model, vocabs, opt, treebank, read_lines(treebank_src), treebank_sentences, out, device)
    lap("profile")

    table = head_kinds(modules, model.encoder)
    rows = []
    gates = gate_rows(model.state_dict()).set_index(["site", "layer", "head"])
    bleu_k = _delta_bleu(bleu or {})
    for site, res in results.items():
        L, H = res.grad.shape
        norm = np.sqrt((res.grad ** 2).sum(1, keepdims=True))
        for layer in range(L):
            imp = np.concatenate(res.dhicm[layer]) if layer in res.dhicm else None
            rhe = np.concatenate(res.rhe[layer]) if layer in res.rhe else None
            for head in range(H):
                key = (site, layer + 1, head + 1)
                row = dict(site=site, layer=layer + 1, head=head + 1,
                           confidence=res.stats[layer, head, 0] / res.tokens,
                           entropy=res.stats[layer, head, 1] / res.tokens,
                           distance=res.stats[layer, head, 2] / res.tokens if site != "cross" else math.nan,
                           grad_raw=res.grad[layer, head],
                           grad_importance=res.grad[layer, head] / norm[layer, 0] if norm[layer, 0] > 0 else 0.0,
                           loss_delta=deltas[site][layer, head],
                           value_norm=res.value_norm[layer, head] / res.tokens,
                           delta_bleu=bleu_k.get(head + 1, math.nan) if site == "enc" else math.nan,
                           tokens=int(res.tokens), sentences=len(src_s))
                if imp is not None:
                    row["dhicm_importance"] = float(imp[:, head].mean())
                    row["dhicm_entropy"] = float((-(imp * np.log(np.clip(imp, 1e-12, None))).sum(-1)).mean())
                if rhe is not None and not np.isnan(rhe[:, head]).all():
                    row["rhe_redundant"] = float((rhe[:, head] == 0).mean())
                if key in gates.index:
                    row["gate"], row["gate_kept"] = float(gates.loc[key, "gate"]), bool(gates.loc[key, "kept"])
                rows.append(row)
    heads = table.merge(pd.DataFrame(rows), on=["site", "layer", "head"], how="left")
    if syntax is not None:
        heads = heads.merge(syntax.assign(site="enc"), on=["site", "layer", "head"], how="left")
    heads["model"] = name
    heads = heads.reindex(columns=COLUMNS)
    with atomic_write(out / "heads.csv") as handle:
        heads.to_csv(handle, index=False)
    sentences = [example_entry(plain_tokens(src_s[i]), tgt_s[i], maps[i]) for i in short if i in maps]
    with atomic_write(out / "examples.json") as handle:
        json.dump({"model": name, "sentences": sentences}, handle, separators=(",", ":"))
    lap("write")
    with atomic_write(out / "timing.json") as handle:
        json.dump({"model": name, "sentences": len(src_s), "heads": len(heads), **timing,
                   "total": round(sum(timing.values()), 3), "wall": round(time.perf_counter() - wall, 3)},
                  handle, indent=1)
    return heads


def main(argv: list[str]) -> int:
    from headlab.options import CommandParser, bounded

    parser = CommandParser("atlas-model", __doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="a headlab checkpoint (.pt)")
    parser.add_argument("--src", required=True, help="validation source (BPE; featured for syntax models)")
    parser.add_argument("--tgt", required=True, help="validation target (BPE)")
    parser.add_argument("--name", required=True, help="the model's path (corpus/pair/.../seedN)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--valid-sentences", type=bounded(int, 1), default=100,
                        help="validation sentences the criteria average over")
    parser.add_argument("--examples", type=bounded(int, 0), default=3, help="sentences whose attention the explorer shows")
    parser.add_argument("--batch-size", type=bounded(int, 1), default=32, help="sentences per batch")
    parser.add_argument("--treebank", default=None, help="gold trees (CoNLL-U) for the syntactic profile")
    parser.add_argument("--treebank-src", default=None, help="the treebank's text after the model's preprocessing")
    parser.add_argument("--treebank-sentences", type=bounded(int, 1), default=100, help="treebank sentences profiled")
    parser.add_argument("--bleu", action="append", default=[], metavar="K=SCORE.json",
                        help="full=JSON and K=JSON (encoder head K disabled in every layer) score files")
    parser.add_argument("--gpu", type=int, default=-1, help="CUDA device id, -1 for CPU")
    args = parser.parse_args(argv)
    bleu = {}
    for item in args.bleu:
        key, sep, path = item.partition("=")
        if not sep or not (key == "full" or key.isdigit()):
            raise ConfigError(f"-bleu expects full=PATH or K=PATH, got {item!r}", key="bleu")
        bleu[key] = path
    heads = characterise(args.model, args.src, args.tgt, args.out, args.name, valid_sentences=args.valid_sentences,
                         examples=args.examples, batch_size=args.batch_size, treebank=args.treebank,
                         treebank_src=args.treebank_src, treebank_sentences=args.treebank_sentences, bleu=bleu,
                         gpu=args.gpu)
    print(f"{args.out}/heads.csv: {len(heads)} heads")
    return 0
