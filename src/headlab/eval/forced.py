"""Forced decoding: the log-probability of given target sentences under an OpenNMT-py model.

    headlab score --model ckpt.pt --src src.bpe --tgt tgt.bpe --out scores.tsv [--batch-size 32] [--gpu 0]
                  [any onmt_translate option, e.g. -disable_enc_heads 8]

Options this command does not know are passed to OpenNMT-py's translate option parser
before the model is loaded, so test-time head ablation (paper A §4.3, Table 6 and
Figure 3 "H8 disabled", ``-disable_enc_heads`` from ``headlab.engine.plugin``) applies here too.

Inputs are what the model was trained on (tokenised, BPE'd), one sentence per line,
tokens separated by spaces. Each output line (input order) is::

    <sum log-prob>\\t<mean log-prob per token>\\t<number of scored tokens>

Scoring follows OpenNMT-py 3.5.1's own gold scoring (``Translator._score_target``):
source ids are the source tokens (no BOS/EOS, ``onmt.inputters.text_utils.numericalize``);
the target is ``[decoder_start_token] + tokens + [EOS]``, fed shifted by one
(``tgt[:, :-1]`` in, ``tgt[:, 1:]`` scored) and scored with ``log_softmax`` of
``model.generator``. So the sum **includes the EOS token** and the token count is
``len(tokens) + 1``; the mean is ``sum / count``. Higher is better (closer to 0).
Natural-log units. Unknown tokens are scored as the vocabulary's ``<unk>``, as OpenNMT does.

Padding never leaks into a sentence's score (encoder masks by ``src_len``, decoder
self-attention is causal, padded target positions are masked out), so the scores do
not depend on the batch size up to float rounding (tested to 1e-5).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from headlab.errors import ConfigError, DataError
from headlab.io import atomic_write
from headlab.eval.common import read_aligned


@dataclass
class Scored:
    total: float   # sum of log-probs over tokens + EOS
    mean: float    # total / tokens
    tokens: int    # target tokens + 1 (EOS)


def _apply_compat() -> None:
    """Load checkpoints as headlab writes them: torch >= 2.6, headlab's encoder and decoder
    (:mod:`headlab.engine.plugin`, which applies :mod:`headlab.engine.compat`)."""
    import headlab.engine.plugin  # noqa: F401


def load_model(path: str | os.PathLike, gpu: int = -1, extra_opts: list[str] | None = None):
    """Load ``path`` with ``onmt.model_builder.load_test_model``; returns (model, vocabs, device).

    ``extra_opts``: more ``onmt_translate`` options (e.g. ``["-disable_enc_heads", "8"]``).
    """
    import torch

    if not os.path.exists(path):
        raise DataError("checkpoint not found", path=str(path))
    _apply_compat()
    from headlab.engine.devices import check_cuda_device
    check_cuda_device(gpu, "--gpu", "--gpu -1 runs on the CPU")
    import onmt.model_builder
    import onmt.opts
    from onmt.utils.parse import ArgumentParser

    from headlab.engine.config import one_line_errors

    parser = one_line_errors(ArgumentParser(), "translate")     # no 250-line usage before the error
    onmt.opts.translate_opts(parser)
    opt = parser.parse_args(["-model", str(path), "-src", "-", "-gpu", str(gpu)] + list(extra_opts or []))
    vocabs, model, model_opt = onmt.model_builder.load_test_model(opt, model_path=str(path))
    if getattr(model_opt, "copy_attn", False):
        raise ConfigError("forced scoring of copy-attention models is not supported", path=str(path))
    device = torch.device("cuda", gpu) if gpu >= 0 else torch.device("cpu")
    model.to(device).eval()
    return model, vocabs, device


def _pad(seqs, pad, device):
    import torch
    from torch.nn.utils.rnn import pad_sequence

    tensors = [torch.tensor(s, dtype=torch.long, device=device) for s in seqs]
    return pad_sequence(tensors, batch_first=True, padding_value=pad).unsqueeze(-1)


def _score_batch(model, vocabs, src_tok, tgt_tok, device) -> list[Scored]:
    import torch
    from onmt.constants import DefaultTokens

    from headlab.engine.words import source_ids

    tgt_vocab = vocabs["tgt"]
    start = vocabs.get("decoder_start_token", DefaultTokens.BOS)
    tgt_pad = tgt_vocab[DefaultTokens.PAD]
    # piece ids and the feature columns the encoder reads (word boundaries from the text)
    src, src_len = source_ids(vocabs, src_tok, getattr(model.encoder, "columns", ()), device)
    tgt = _pad([tgt_vocab([start] + t + [DefaultTokens.EOS]) for t in tgt_tok], tgt_pad, device)

    # Translator._run_encoder / _translate_batch_with_strategy / _score_target
    enc_out, enc_final_hs, enc_len = model.encoder(src, src_len)
    if enc_len is None:
        enc_len = src_len
    model.decoder.init_state(src, enc_out, enc_final_hs)
    dec_out, _ = model.decoder(tgt[:, :-1, :], enc_out, src_len=enc_len, step=None)
    log_probs = torch.log_softmax(model.generator(dec_out).float(), dim=-1)
    gold = tgt[:, 1:, 0]
    token_lp = log_probs.gather(2, gold.unsqueeze(-1)).squeeze(-1)
    mask = gold.ne(tgt_pad)
    totals = (token_lp * mask).sum(dim=1)
    counts = mask.sum(dim=1)
    return [Scored(float(t), float(t) / int(c), int(c)) for t, c in zip(totals.tolist(), counts.tolist())]


def score(model, vocabs, src_lines: list[str], tgt_lines: list[str], *, batch_size: int = 32,
          device=None, src_path: str = "src") -> list[Scored]:
    """Score ``tgt_lines[i]`` given ``src_lines[i]``; results in input order.

    Sentences are sorted by length into batches (less padding), then put back in order.
    """
    import torch

    if len(src_lines) != len(tgt_lines):
        raise DataError(f"{len(src_lines)} source lines but {len(tgt_lines)} target lines")
    if batch_size < 1:
        raise ConfigError(f"batch size must be positive, got {batch_size}")
    device = device or torch.device("cpu")
    src_tok = [line.split() for line in src_lines]
    tgt_tok = [line.split() for line in tgt_lines]
    for number, tokens in enumerate(src_tok, start=1):
        if not tokens:
            raise DataError("empty source sentence cannot be scored", path=src_path, line=number)
    order = sorted(range(len(src_tok)), key=lambda i: (len(src_tok[i]), len(tgt_tok[i])))
    results: list[Scored | None] = [None] * len(order)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            ids = order[start:start + batch_size]
            scored = _score_batch(model, vocabs, [src_tok[i] for i in ids], [tgt_tok[i] for i in ids], device)
            for i, value in zip(ids, scored):
                results[i] = value
    return results  # type: ignore[return-value]


def score_files(model_path, src_path, tgt_path, out_path, *, batch_size: int = 32, gpu: int = -1,
                extra_opts: list[str] | None = None) -> int:
    texts = read_aligned(src=src_path, tgt=tgt_path)
    model, vocabs, device = load_model(model_path, gpu=gpu, extra_opts=extra_opts)
    results = score(model, vocabs, texts["src"], texts["tgt"], batch_size=batch_size,
                    device=device, src_path=str(src_path))
    with atomic_write(out_path) as handle:
        for r in results:
            handle.write(f"{r.total:.6f}\t{r.mean:.6f}\t{r.tokens}\n")
    return len(results)


def main(argv: list[str]) -> int:
    from headlab.options import CommandParser, bounded

    parser = CommandParser("score", __doc__.split("\n\n")[0],
                           epilog="Any other option is an onmt_translate option (e.g. -disable_enc_heads 8).")
    parser.add_argument("--model", required=True, help="OpenNMT-py 3.5.1 checkpoint (.pt)")
    parser.add_argument("--src", required=True, help="tokenised source, one sentence per line")
    parser.add_argument("--tgt", required=True, help="tokenised target to score, same number of lines")
    parser.add_argument("--out", required=True, help="TSV: sum, mean, tokens (input order)")
    parser.add_argument("--batch-size", type=bounded(int, 1), default=32, help="sentences per batch")
    parser.add_argument("--gpu", type=int, default=-1, help="CUDA device id, -1 for CPU")
    args, extra = parser.parse_known_args(argv)
    n = score_files(args.model, args.src, args.tgt, args.out, batch_size=args.batch_size, gpu=args.gpu,
                    extra_opts=extra)
    print(f"scored {n} sentences -> {args.out}")
    return 0
