"""``headlab export-attention``: per-layer, per-head attention of one site, for given sentences.

    headlab export-attention --model ckpt.pt --src tokenised_bpe.txt --out att.npz [--max-sents N]
                             [--site enc|dec|cross --tgt tokenised_bpe.txt]
                             [--batch-size 32] [--gpu -1] [--disable-enc-heads k ...]

Encoder self-attention (``--site enc``, the default) works for any checkpoint whose encoder
has an ``attention(src, src_len)`` method (``-encoder_type headlab``: learned heads give
their softmax, fixed heads their pattern, materialised densely only here). Decoder
self-attention (``dec``) and cross-attention (``cross``, rows = target tokens, columns =
source tokens: paper B Figures 1-2) need ``-decoder_type headlab`` and the target
sentences (``--tgt``), decoded by teacher forcing. The model is loaded with OpenNMT-py's
own ``load_test_model`` (plugin loaded), so test-time options behave as in translation.

The ``.npz`` (no pickles) holds: ``att_000000``, ... one float32 array (layers, heads,
n_query, n_key) per sentence; ``tokens``: the sentences of the queries' side (space-joined
pieces, as in the input; for ``dec``/``cross`` the target with its leading ``<s>``),
``src_tokens`` for ``cross``; ``lengths``; ``spec``: the site's head spec; ``site``. Where
the site has DHICM layers, ``imp_000000``, ... (layers, n_query, heads): the second-level
importance G of each query token for each head (paper B Figure 3), NaN for layers without
DHICM. Where the encoder has RHE heads (paper C Figure 5): ``rhe_000000``, ... (layers,
heads): each head's label for the sentence, 1 important, 0 redundant, NaN for other heads;
``att_*`` is the attention actually used (enlivened for redundant heads, zeros with
``-rhe_prune``) and ``raw_000000``, ... the same array with every RHE head's own attention
before enlivening.
Read it back with :func:`load_attention` / :func:`load_importance` / :func:`load_labels`.
"""
from __future__ import annotations

# torch is imported where a model runs: the readers below (load_attention & co.) serve the
# study tables and figures, which would otherwise pay 1 CPU-s a job for an unused import
import numpy as np

from headlab.errors import ConfigError, DataError
from headlab.io import atomic_write, read_lines


def load_model(model_path: str, gpu: int = -1, disable_heads=(), rhe_prune: bool = False):
    """OpenNMT-py's load_test_model with the plugin: (vocabs, model, model_opt)."""
    import headlab.engine.plugin  # noqa: F401
    from headlab.engine.devices import check_cuda_device
    import onmt.opts as opts
    from onmt.model_builder import load_test_model
    from onmt.utils.parse import ArgumentParser

    check_cuda_device(gpu, "--gpu", "--gpu -1 runs on the CPU")
    parser = ArgumentParser()
    opts.translate_opts(parser)
    args = ["-model", str(model_path), "-src", "unused", "-gpu", str(gpu)]
    if disable_heads:
        args += ["-disable_enc_heads", *map(str, disable_heads)]
    if rhe_prune:
        args.append("-rhe_prune")
    opt = parser.parse_args(args)
    return load_test_model(opt)


def _dhicm_mixers(modules) -> list:
    """Per layer, its DHICM mixer (the output mixer that records importance) or None."""
    return [m if m is not None and hasattr(m, "importance") else None
            for m in (getattr(attn, "output_mixer", None) for attn in modules)]


def _importance(mixers, n_query: int, heads: int, b: int) -> np.ndarray | None:
    if not any(m is not None for m in mixers):
        return None
    out = np.full((len(mixers), n_query, heads), np.nan, dtype=np.float32)
    for layer, mixer in enumerate(mixers):
        if mixer is not None:
            out[layer] = mixer.importance[b, :n_query].float().cpu().numpy()
    return out


def _rhe_groups(modules) -> list[list[tuple[int, object]]]:
    """Per layer, (first head index, group) of each RHE group (paper C: per-sentence labels)."""
    out = []
    for attn in modules:
        start, found = 0, []
        for group in getattr(attn, "heads", []):
            if hasattr(group, "fgate") and hasattr(group, "record"):
                found.append((start, group))
            start += group.count
        out.append(found)
    return out


def _rhe_arrays(rhe, att: np.ndarray, b: int) -> dict[str, np.ndarray]:
    """``rhe`` labels (layers, heads) and ``raw`` attention before enlivening (as ``att``)
    of sentence ``b``; empty without RHE heads."""
    if not any(rhe):
        return {}
    labels = np.full(att.shape[:2], np.nan, dtype=np.float32)
    raw = att.copy()
    nq, nk = att.shape[2:]
    for layer, groups in enumerate(rhe):
        for start, group in groups:
            labels[layer, start:start + group.count] = group.labels[b].float().cpu().numpy()
            raw[layer, start:start + group.count] = group.raw[b, :, :nq, :nk].float().cpu().numpy()
    return {"rhe": labels, "raw": raw}


def _ids(vocab, sentences, device):
    import torch
    from onmt.constants import DefaultTokens

    lengths = torch.tensor([len(s) for s in sentences], device=device)
    ids = torch.full((len(sentences), int(lengths.max()), 1), vocab[DefaultTokens.PAD], dtype=torch.long,
                     device=device)
    for b, tokens in enumerate(sentences):
        ids[b, :len(tokens), 0] = torch.tensor(vocab(tokens), device=device)
    return ids, lengths


def _src_ids(model, vocabs, sentences, device):
    """Source ids (B, N, 1 + n_src_feats) as OpenNMT-py batches them for this model: the
    word-boundary column from the text, a featured line's (``piece￨f1￨…``, paper C syntax
    models) other columns from ``vocabs["src_feats"]`` (:func:`headlab.engine.words.source_ids`)."""
    from headlab.engine.words import source_ids
    return source_ids(vocabs, sentences, getattr(model.encoder, "columns", ()), device)


def teacher_forcing_batch(model, vocabs, src: list[list[str]], tgt: list[list[str]], device):
    """(source ids (B, N, 1 + n_src_feats), source lengths, target ids (B, T + 2, 1)) of
    sentences (featured sources allowed), the target as OpenNMT-py scores it:
    ``[decoder_start_token] + tokens + [EOS]`` (``model(src, tgt, src_len)`` drops the last
    input; :mod:`headlab.eval.forced`)."""
    from onmt.constants import DefaultTokens

    src_t, src_len = _src_ids(model, vocabs, src, device)
    start = vocabs.get("decoder_start_token", DefaultTokens.BOS)
    tgt_t, _ = _ids(vocabs["tgt"], [[start] + t + [DefaultTokens.EOS] for t in tgt], device)
    return src_t, src_len, tgt_t


def plain_tokens(sentence: list[str]) -> list[str]:
    """The pieces of a (possibly featured) source sentence."""
    from headlab.heads.side import SEPARATOR
    return [token.split(SEPARATOR, 1)[0] for token in sentence]


def site_attention(model, vocabs, src: list[list[str]], tgt: list[list[str]] | None, site: str = "enc",
                   batch_size: int = 32, device="cpu", extras: bool = False):
    """Yield (query tokens, attention (layers, heads, nq, nk), DHICM importance or None),
    and with ``extras`` a fourth item: {"rhe": RHE labels (layers, heads), "raw": attention
    before enlivening} (paper C), or {} for a model without RHE heads."""
    import torch
    from onmt.constants import DefaultTokens

    if site == "enc":
        if not hasattr(model.encoder, "attention"):
            raise ConfigError("attention export needs a model trained with -encoder_type headlab",
                              key="encoder_type")
        modules = [layer.self_attn for layer in model.encoder.transformer]
    else:
        if not hasattr(model.decoder, "attentions"):
            raise ConfigError(f"-site {site} needs a model trained with -decoder_type headlab",
                              key="decoder_type")
        modules = model.decoder.attentions(site)
    mixers = _dhicm_mixers(modules)
    rhe = _rhe_groups(modules)
    recorders = [m for m in [*modules, *mixers, *(g for layer in rhe for _, g in layer)]
                 if m is not None and hasattr(m, "record")]
    for module in recorders:
        module.record = True
    try:
        for start in range(0, len(src), batch_size):
            s_batch = src[start:start + batch_size]
            src_t, src_len = _src_ids(model, vocabs, s_batch, device)
            if site == "enc":
                maps = torch.stack(model.encoder.attention(src_t, src_len), 1).cpu()
                model.encoder(src_t, src_len)                    # fills the importance
                queries = [plain_tokens(s) for s in s_batch]
            else:
                queries = [[DefaultTokens.BOS] + t for t in tgt[start:start + batch_size]]
                tgt_t, _ = _ids(vocabs["tgt"], [q + [DefaultTokens.EOS] for q in queries], device)
                model(src_t, tgt_t, src_len)                     # teacher forcing (drops the EOS input)
                maps = torch.stack([m.recorded.float() for m in modules], 1).cpu()
            heads = maps.size(2)
            for b, tokens in enumerate(queries):
                n_key = len(tokens) if site == "dec" else len(s_batch[b])
                att = maps[b, :, :, :len(tokens), :n_key].numpy().astype(np.float32)
                imp = _importance(mixers, len(tokens), heads, b)
                yield (tokens, att, imp, _rhe_arrays(rhe, att, b)) if extras else (tokens, att, imp)
    finally:
        for module in recorders:
            module.record = False


def _sentences(path: str, max_sents: int | None, what: str) -> list[list[str]]:
    lines = read_lines(path)
    if max_sents is not None:
        lines = lines[:max_sents]
    sentences = [line.split() for line in lines]
    for number, tokens in enumerate(sentences, 1):
        if not tokens:
            raise ConfigError(f"empty {what} sentence (OpenNMT-py drops these)", path=path, line=number)
    return sentences


def export_attention(model_path: str, src_path: str, out_path: str, max_sents: int | None = None,
                     batch_size: int = 32, gpu: int = -1, disable_heads=(), site: str = "enc",
                     tgt_path: str | None = None, rhe_prune: bool = False) -> int:
    """Write the npz described in the module doc; returns the number of sentences."""
    import torch

    if site not in ("enc", "dec", "cross"):
        raise ConfigError(f"unknown attention site {site!r}; known: enc, dec, cross", key="site")
    if site != "enc" and not tgt_path:
        raise ConfigError(f"-site {site} decodes by teacher forcing: give the target sentences (-tgt)",
                          key="tgt")
    # the text first: a bad input is refused before a large model is loaded
    sentences = _sentences(src_path, max_sents, "source")
    targets = _sentences(tgt_path, max_sents, "target") if tgt_path else None
    if targets is not None and len(targets) != len(sentences):
        raise ConfigError(f"{len(targets)} target sentences for {len(sentences)} sources", path=tgt_path)
    vocabs, model, model_opt = load_model(model_path, gpu, disable_heads, rhe_prune)
    device = next(model.parameters()).device
    arrays, queries = {}, []
    with torch.no_grad():
        for i, (tokens, att, imp, extra) in enumerate(site_attention(model, vocabs, sentences, targets,
                                                                     site, batch_size, device, extras=True)):
            arrays[f"att_{i:06d}"] = att
            if imp is not None:
                arrays[f"imp_{i:06d}"] = imp
            for name, array in extra.items():
                arrays[f"{name}_{i:06d}"] = array
            queries.append(tokens)
    arrays["tokens"] = np.array([" ".join(s) for s in queries], dtype=str)
    if site != "enc":
        arrays["src_tokens"] = np.array([" ".join(plain_tokens(s)) for s in sentences], dtype=str)
    arrays["lengths"] = np.array([len(s) for s in queries], dtype=np.int64)
    arrays["spec"] = np.array(getattr(model_opt, f"{site}_heads", ""), dtype=str)
    arrays["site"] = np.array(site, dtype=str)
    with atomic_write(out_path, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    return len(sentences)


def load_attention(path: str) -> list[tuple[list[str], np.ndarray]]:
    """[(tokens, (layers, heads, n, n) array), ...] from an export."""
    with np.load(path) as data:
        tokens = [str(t).split() for t in data["tokens"]]
        return [(toks, data[f"att_{i:06d}"]) for i, toks in enumerate(tokens)]


def load_importance(path: str) -> list[tuple[list[str], np.ndarray]]:
    """[(tokens, (layers, n, heads) DHICM importance), ...] from an export (empty: no DHICM)."""
    with np.load(path) as data:
        tokens = [str(t).split() for t in data["tokens"]]
        keys = [f"imp_{i:06d}" for i in range(len(tokens))]
        lacking = [i for i, key in enumerate(keys) if key not in data]
        if not lacking:
            return [(toks, data[key]) for toks, key in zip(tokens, keys)]
        if len(lacking) < len(tokens):
            # the DHICM layers are the same for every sentence, so a partial export is a
            # broken file; skipping its gaps would shrink the token counts without a word
            raise DataError(f"sentence {lacking[0]} ({keys[lacking[0]]}) has no DHICM importance though "
                            f"{len(tokens) - len(lacking)} of the {len(tokens)} sentences have it: "
                            "a partial export; delete it to export again", path=path)
        return []


def load_labels(path: str) -> list[tuple[list[str], np.ndarray]]:
    """[(tokens, (layers, heads) RHE labels), ...] from an export (empty: no RHE heads)."""
    with np.load(path) as data:
        tokens = [str(t).split() for t in data["tokens"]]
        return [(toks, data[f"rhe_{i:06d}"]) for i, toks in enumerate(tokens) if f"rhe_{i:06d}" in data]


def main(argv: list[str]) -> int:
    from headlab.options import CommandParser, bounded

    parser = CommandParser("export-attention", "dump per-layer, per-head attention of one site to npz")
    parser.add_argument("--model", required=True, help="a headlab checkpoint (.pt)")
    parser.add_argument("--src", required=True, help="tokenised, BPE-segmented source (one sentence a line)")
    parser.add_argument("--out", required=True, help="the .npz to write")
    parser.add_argument("--max-sents", type=bounded(int, 1), default=None, help="only the first N sentences")
    parser.add_argument("--batch-size", type=bounded(int, 1), default=32, help="sentences per batch")
    parser.add_argument("--gpu", type=int, default=-1, help="CUDA device id, -1 for CPU")
    parser.add_argument("--disable-enc-heads", type=int, nargs="*", default=[],
                        help="encoder heads (1-based) zeroed in every layer (paper A §4.3)")
    parser.add_argument("--site", default="enc", choices=["enc", "dec", "cross"],
                        help="encoder self-, decoder self- or cross-attention")
    parser.add_argument("--tgt", help="target sentences (tokenised, BPE) for --site dec/cross")
    parser.add_argument("--rhe-prune", action="store_true",
                        help="paper C: redundant RHE heads output 0 (their exported rows are 0)")
    args = parser.parse_args(argv)
    n = export_attention(args.model, args.src, args.out, args.max_sents, args.batch_size,
                         args.gpu, args.disable_enc_heads, args.site, args.tgt, args.rhe_prune)
    print(f"{args.out}: {n} sentences")
    return 0
