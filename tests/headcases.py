"""Tiny real OpenNMT-py models with every head kind and mixer at every site, and the runs
the precision, device-safety and GPU tests make with them (a helper module, no tests).

:data:`CASES` covers every registered kind and mixer at every site it serves
(``tests/test_mixed_precision.py::test_cases_cover_every_kind_mixer_and_site`` keeps it
so when kinds are added). Each case is a 2+2 model (d = 32, 4 heads of 8) with options
that keep the heavy kinds small (``lpea_k`` 2, ``relpos_k`` 3). :func:`make_batch` gives
3 sentences whose source lengths are 7, 1 and 4 (a one-token sentence, padding) with
BPE pieces (``@@``: several words span two pieces, so word-based kinds differ from
token-based ones), synthetic parses for the syntax kinds (:func:`headlab.bench.synthetic_side`),
and targets with padding.

What is run on a model (each takes the model where it lives: CPU, CUDA or the simulated
device of :mod:`simdevice`):

* :func:`train_step`: OpenNMT-py's own loss (``AuxLossCompute`` with ``lambda_kl`` and
  ``lambda_l0``) and ``Optimizer`` (Adam, noam) for one step; returns the loss.
* :func:`stepwise`: incremental decoding through the KV cache with beam tiling and a
  random reordering of the hypotheses at every step (what beam search does to the cache).
* :func:`beam_search`: OpenNMT-py's ``Translator.translate_batch`` (``BeamSearch``).
* :func:`export`: :func:`headlab.engine.export.site_attention` at every site.
* :func:`run_all`: all of the above on one device, results back on the CPU for comparing
  devices and precisions; :func:`profile`: ``headlab profile-heads`` of a checkpoint.

Single layers (:func:`layer_specs`, :func:`build_layer`, :func:`layer_inputs`,
:func:`layer_run`): every registered kind at every site it serves and every mixer, with
padding, a one-token sentence, and decoder masks as OpenNMT-py builds them.
"""
from __future__ import annotations

import contextlib

import torch

from headlab.engine.model import build_model, model_opt, toy_vocabs

D_MODEL, HEADS, FF = 32, 4, 64
#: source pieces: "ab@@ c" is one word of two pieces (Fword, syntax kinds)
SRC_TOKENS = ["ab@@", "cd@@", "ef@@", "c", "d", "e", "f", "g", "h", "i"]
VOCAB = 40
PAD, BOS, EOS = 1, 2, 3
#: option values shared by every case (the aux weights make train_step use both terms)
OPTIONS = ["-lpea_k", "2", "-relpos_k", "3", "-lambda_kl", "0.1", "-lambda_l0", "0.05",
           "-optim", "adam", "-learning_rate", "1.0", "-decay_method", "noam", "-warmup_steps", "4",
           "-normalization", "tokens"]

#: name -> model options: every kind and mixer at every site it serves (paper A's fixed
#: heads, paper B's DHICM, paper C's syntax kinds and baselines, paper D's gates)
CASES = {
    "learned": dict(enc_heads="3L+1Lwide|gate,4L|dhicm", dec_heads="3L+1Lwide|gate,4L|dhicm",
                    cross_heads="4L|dhicm,3L+1Lwide|gate"),
    "fixed": dict(enc_heads="8Ftoken,7Fword+1L|gate", dec_heads="4L", cross_heads="4L"),
    "syntax": dict(enc_heads="1DEA+1LPEA+1RHEdea+1RHElpea|gate,1RelPos+1Local+1RHErel+1RHEloc|dhicm",
                   dec_heads="4L", cross_heads="4L"),
    "lpea_learned": dict(enc_heads="2LPEA+2RHElpea", dec_heads="4L", cross_heads="4L",
                         extra=["-lpea_outside", "learned"]),
    # a stock OpenNMT-py decoder behind a headlab encoder (the default of most presets)
    "stock_decoder": dict(enc_heads="4L", decoder_type="transformer"),
}


def case_opt(name: str):
    case = dict(CASES[name])
    extra = [*OPTIONS, *case.pop("extra", [])]
    case.setdefault("decoder_type", "headlab")
    return model_opt(**case, enc_layers=2, dec_layers=2, hidden_size=D_MODEL, heads=HEADS,
                     transformer_ff=FF, dropout=0.0, attention_dropout=0.0, extra=extra)


def vocabs():
    return toy_vocabs(VOCAB, src_tokens=SRC_TOKENS, share=True)


def build_case(name: str, seed: int = 0, std: float = 0.25):
    """(model in eval mode on CPU, fp32, opt, vocabs). Weights N(0, std²) with LayerNorm
    gains 1: attention that is far from uniform, so that precision matters. Models whose
    kinds read words or parses get numeric-order vocabularies for their source-feature
    columns (``model.encoder.columns``: the word boundaries, then the parse's)."""
    from headlab.heads.spec import feature_columns

    torch.manual_seed(seed)
    opt, vocab = case_opt(name), vocabs()
    columns = feature_columns(opt.enc_heads) if opt.encoder_type == "headlab" else ()
    if columns:
        vocab = {**vocab, "src_feats": feature_vocabs(len(columns))}
    model = build_model(opt, vocab)
    with torch.no_grad():
        for pname, param in model.named_parameters():
            if pname.endswith("log_alpha"):
                param.uniform_(-1.0, 3.0)              # gates partly open, partly closing
            else:
                param.normal_(0.0, std)
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.fill_(1.0)
                module.bias.zero_()
    return model.eval(), opt, vocab


def feature_vocabs(count: int):
    import pyonmttok
    from onmt.constants import DefaultTokens
    specials = [DefaultTokens.UNK, DefaultTokens.PAD, DefaultTokens.BOS, DefaultTokens.EOS]
    return [pyonmttok.build_vocab_from_tokens([str(v) for v in range(64)], special_tokens=specials)
            for _ in range(count)]


def needs_syntax(model) -> bool:
    return bool(getattr(model.encoder, "needs_syntax", False))


def columns(model) -> tuple[str, ...]:
    return tuple(getattr(model.encoder, "columns", ()))


def make_batch(model, vocab, seed: int = 1, lengths=(7, 1, 4), tgt_len: int = 6):
    """src (B, S, 1 + the model's columns), src_len (B,), tgt (B, T, 1) on CPU; see the module doc."""
    from headlab.bench import synthetic_side
    from headlab.heads.patterns import word_ids_from_continuation
    from headlab.heads.side import SPECIALS, WORD_COLUMN

    gen = torch.Generator().manual_seed(seed)
    B, S = len(lengths), max(lengths)
    src_len = torch.tensor(lengths)
    tokens = torch.randint(4, VOCAB, (B, S), generator=gen)
    pad = torch.arange(S).unsqueeze(0) >= src_len.unsqueeze(1)
    for b, n in enumerate(lengths):               # a sentence never ends inside a word
        if vocab["src"].ids_to_tokens[int(tokens[b, n - 1])].endswith("@@"):
            tokens[b, n - 1] = vocab["src"]["c"]
    tokens[pad] = PAD
    src = tokens.unsqueeze(2)
    if columns(model):                            # the word boundaries, then the parse's columns
        continuation = torch.tensor([t.endswith("@@") for t in vocab["src"].ids_to_tokens])
        word_ids = word_ids_from_continuation(continuation, tokens)
        side = synthetic_side(word_ids, src_len, gen) if needs_syntax(model) else {}
        side[WORD_COLUMN] = continuation[tokens].long()
        src = torch.stack([tokens] + [side[name].masked_fill(pad, 0) + SPECIALS for name in columns(model)], 2)
    tgt = torch.randint(4, VOCAB, (B, tgt_len, 1), generator=gen)
    tgt[:, 0, 0] = BOS
    tgt[1, 3:, 0] = PAD                           # a short target: padded queries
    tgt[2, tgt_len - 1, 0] = EOS
    return src, src_len, tgt


def to(batch, device):
    return tuple(t.to(device) for t in batch)


def forward(model, batch):
    """Teacher-forced decoder output (B, T-1, d) and log-probabilities (B, T-1, V)."""
    src, src_len, tgt = batch
    out, _ = model(src, tgt, src_len)
    return out, model.generator(out).float().log_softmax(-1)


def loss_compute(model, opt, vocab):
    import headlab.engine.plugin  # noqa: F401  (AuxLossCompute)
    from headlab.engine.aux_loss import AuxLossCompute
    return AuxLossCompute.from_opts(opt, model, vocab["tgt"], train=True)


def loss(model, opt, vocab, batch, compute=None):
    """OpenNMT-py's training loss of ``batch`` (summed cross-entropy + weighted aux terms)."""
    src, src_len, tgt = batch
    compute = compute or loss_compute(model, opt, vocab)
    out, attns = model(src, tgt, src_len)
    value, _ = compute({"src": src, "srclen": src_len, "tgt": tgt}, out, attns)
    return value


def optimizer(model, opt):
    from onmt.utils.optimizers import Optimizer
    return Optimizer.from_opt(model, opt)


def train_step(model, opt, vocab, batch, optim=None, compute=None, autocast=None):
    """One OpenNMT-py training step (loss, backward, Adam step; a GradScaler if the
    optimizer has one, as -model_dtype fp16 gives it); returns the loss (float).
    ``autocast``: a context manager factory for mixed precision."""
    model.train()
    optim = optim or optimizer(model, opt)
    optim.zero_grad(set_to_none=True)
    with (autocast or contextlib.nullcontext)():
        value = loss(model, opt, vocab, batch, compute)
    optim.backward(value)
    optim.step()
    return float(value.detach())


def losses_before_and_after(model, opt, vocab, batch, optim, steps: int = 4, autocast=None) -> tuple:
    """(loss in eval mode, the ``steps`` training losses, loss in eval mode after them):
    the evaluations are deterministic (gates at their test-time value)."""
    compute = loss_compute(model, opt, vocab)

    def evaluate():
        model.eval()
        with torch.no_grad():
            return float(loss(model, opt, vocab, batch, compute))

    before = evaluate()
    torch.manual_seed(0)
    losses = [train_step(model, opt, vocab, batch, optim, compute, autocast) for _ in range(steps)]
    return before, losses, evaluate()


def stepwise(model, batch, beam: int = 2, seed: int = 3):
    """Incremental decoding of tgt step by step through the KV cache, each sentence tiled
    ``beam`` times and the hypotheses reordered at random at every step (beam search's
    ``map_state``), returned in tiled teacher-forcing order: (B * beam, T, d)."""
    from onmt.utils.misc import tile
    src, src_len, tgt = batch
    enc_out, _, src_len = model.encoder(src, src_len)
    model.decoder.init_state(src, enc_out, None)
    model.decoder.map_state(lambda state, dim: tile(state, beam, dim=dim))
    enc_out, src_len, tgt = tile(enc_out, beam), tile(src_len, beam), tile(tgt, beam)
    gen = torch.Generator().manual_seed(seed)
    order = torch.arange(tgt.size(0))
    outs = []
    for step in range(tgt.size(1)):
        out, _ = model.decoder(tgt[:, step:step + 1], enc_out, src_len=src_len, step=step)
        outs.append(out[:, 0])
        perm = torch.randperm(tgt.size(0), generator=gen)
        dev_perm = perm.to(enc_out.device)
        model.decoder.map_state(lambda state, dim: state.index_select(dim, dev_perm))
        enc_out, src_len, tgt = enc_out[dev_perm], src_len[dev_perm], tgt[dev_perm]
        order = order[perm]
        outs = [o[dev_perm] for o in outs]
    result = torch.stack(outs, 1)
    back = torch.empty_like(order)
    back[order] = torch.arange(order.numel())
    return result[back.to(result.device)]


def translate_opt(model_path: str, beam: int = 3, gpu: int = -1, precision: str = ""):
    """OpenNMT-py translate options for :func:`translator`."""
    import headlab.engine.plugin  # noqa: F401
    import onmt.opts as opts
    from onmt.utils.parse import ArgumentParser
    parser = ArgumentParser()
    opts.translate_opts(parser)
    args = ["-model", str(model_path), "-src", "unused", "-beam_size", str(beam), "-max_length", "8",
            "-gpu", str(gpu), "-n_best", "1"]
    if precision:
        args += ["-precision", precision]
    return parser.parse_args(args)


def translator(model_path: str, **kwargs):
    """OpenNMT-py's Translator for a checkpoint, built as ``onmt_translate`` builds it."""
    import io
    from onmt.translate.translator import build_translator
    return build_translator(translate_opt(model_path, **kwargs), report_score=False, out_file=io.StringIO())


def beam_search(trans, batch):
    """(scores (B,) of the best hypothesis, predictions) of OpenNMT-py's beam search."""
    src, src_len, _ = batch
    results = trans.translate_batch({"src": src, "srclen": src_len}, attn_debug=False)
    scores = torch.tensor([float(s[0]) for s in results["scores"]])
    return scores, [[t.tolist() for t in p] for p in results["predictions"]]


def save(model, opt, vocab, path) -> str:
    from headlab.engine.model import save_checkpoint
    save_checkpoint(model, opt, vocab, path)
    return str(path)


def export(model, vocab, batch_tokens: list[list[str]], site: str, device):
    """Every sentence's (layers, heads, nq, nk) attention at ``site`` (teacher forcing on
    the source itself as target for dec/cross)."""
    from headlab.engine.export import site_attention
    targets = batch_tokens if site != "enc" else None
    with torch.no_grad():
        return [att for _, att, _ in site_attention(model, vocab, batch_tokens, targets, site, 8, device)]


def sentences(model, vocab, batch) -> list[list[str]]:
    """The source of ``batch`` as (featured) token lists, as export and profile-heads read them."""
    from headlab.heads.side import SEPARATOR
    src, src_len, _ = batch
    out = []
    for b in range(src.size(0)):
        n = int(src_len[b])
        if src.size(2) == 1:
            out.append([vocab["src"].ids_to_tokens[int(i)] for i in src[b, :n, 0]])
        else:
            out.append([SEPARATOR.join([vocab["src"].ids_to_tokens[int(src[b, i, 0])]] +
                                       [str(int(v) - 4) for v in src[b, i, 1:]]) for i in range(n)])
    return out


def relative_error(value: torch.Tensor, reference: torch.Tensor, mask: torch.Tensor | None = None) -> float:
    """max |value - reference| / max |reference| over ``mask`` (the real positions)."""
    value, reference = value.detach().float().cpu(), reference.detach().float().cpu()
    if mask is not None:
        value, reference = value[mask.cpu()], reference[mask.cpu()]
    return float((value - reference).abs().max() / reference.abs().max().clamp_min(1e-12))


# -- single layers: every kind and mixer at every site it serves -------------------------
LAYER_LENGTHS = (9, 1, 5)           # queries: a one-token sentence and padding
MEMORY_LENGTHS = (6, 2, 4)          # cross-attention keys (encoder output), padded
LAYER_OPTIONS = {"lpea_k": 2, "relpos_k": 3}


def layer_specs() -> list[tuple[str, str, dict]]:
    """(site, spec, mixer options): every registered kind at every site it serves (4 heads;
    ``Lwide``: 2), every mixer with ``4L`` at every site it serves, and LPEA's learned
    outside vector."""
    from headlab.heads import HEAD_KINDS, HEAD_MIXERS
    out = [(site, f"{2 if kind == 'Lwide' else 4}{kind}", {}) for kind, cls in HEAD_KINDS.items()
           for site in cls.sites]
    out += [(site, f"4L|{mixer}", {}) for mixer, cls in HEAD_MIXERS.items() for site in cls.sites]
    out.append(("enc", "4LPEA", {"lpea_outside": "learned"}))
    return out


def build_layer(site: str, spec: str, options: dict, seed: int = 1, std: float = 0.25):
    """A HeadlabAttention (enc) or DecoderAttention (dec, cross) layer, eval mode, CPU."""
    from headlab.engine.decoder import DecoderAttention
    from headlab.heads.attention import HeadlabAttention
    from headlab.heads.spec import parse_spec
    torch.manual_seed(seed)
    cls = HeadlabAttention if site == "enc" else DecoderAttention
    layer = cls(parse_spec(spec, site=site)[0], D_MODEL, D_MODEL // HEADS, site=site, add_qkvbias=True,
                mixer_options={**LAYER_OPTIONS, **options})
    with torch.no_grad():
        for name, param in layer.named_parameters():
            if name.endswith("log_alpha"):
                param.uniform_(-1.0, 3.0)
            else:
                param.normal_(0.0, std)
    return layer.eval()


def layer_inputs(site: str, seed: int = 0, fully_masked: bool = False):
    """(x (B, N, d), HeadContext, memory (B, M, d) for cross-attention else None), CPU.
    ``fully_masked``: decoder sites get one query row that may attend no key at all."""
    from headlab.bench import synthetic_side
    from headlab.heads.base import HeadContext
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(LAYER_LENGTHS)
    B, N = len(LAYER_LENGTHS), max(LAYER_LENGTHS)
    pad = torch.arange(N).unsqueeze(0) >= lengths.unsqueeze(1)
    x = torch.randn(B, N, D_MODEL, generator=gen)
    if site == "enc":
        starts = torch.rand(B, N, generator=gen) > 0.3
        starts[:, 0] = True
        word_ids = torch.cumsum(starts.long(), 1) - 1
        side = synthetic_side(word_ids, lengths, gen)
        return x, HeadContext(pad, lengths, word_ids=word_ids, side=side), None
    if site == "dec":                       # causal, padded keys masked as OpenNMT-py does
        allowed = torch.ones(N, N, dtype=torch.bool).tril().view(1, 1, N, N) & ~pad.view(B, 1, 1, N)
        memory = None
    else:
        M = max(MEMORY_LENGTHS)
        memory = torch.randn(B, M, D_MODEL, generator=gen)
        allowed = (torch.arange(M).unsqueeze(0) < torch.tensor(MEMORY_LENGTHS).unsqueeze(1)).view(B, 1, 1, M)
        allowed = allowed.expand(B, 1, N, M).clone()
    if fully_masked:
        allowed = allowed.clone()
        allowed[0, :, 2] = False
    return x, HeadContext(pad, lengths, allowed=allowed), memory


def ctx_to(ctx, device):
    """A HeadContext with every tensor on ``device``."""
    from headlab.heads.base import HeadContext
    def move(tensor):
        return None if tensor is None else tensor.to(device)
    return HeadContext(move(ctx.pad_mask), move(ctx.lengths), move(ctx.token_ids), move(ctx.word_ids),
                       {k: v.to(device) for k, v in ctx.side.items()}, move(ctx.allowed))


def layer_run(layer, site: str, x, ctx, memory=None, autocast=None):
    """(output (B, N, d) float32, gradient vector of the input and every parameter) of one
    forward and backward of a fixed weighted sum of the output plus the layer's aux terms."""
    x = x.clone().requires_grad_()
    layer.zero_grad(set_to_none=True)
    with (autocast or contextlib.nullcontext)():
        kv = layer.project_kv(memory) if memory is not None else None
        out = layer.attend(x, ctx, kv)
        terms = [t for t in layer.aux_terms().values() if t.requires_grad]
    weights = torch.linspace(-1.0, 1.0, out.numel(), device=out.device).view(out.shape)
    objective = (out.float() * weights).sum() + sum(t.float() for t in terms)
    objective.backward()
    grads = [x.grad] + [p.grad for p in layer.parameters() if p.grad is not None]
    return out.detach().float(), torch.cat([g.detach().float().flatten() for g in grads])


def grad_error(value: torch.Tensor, reference: torch.Tensor) -> float:
    """|value - reference| / |reference| (Euclidean norms) of gradient vectors."""
    value, reference = value.float().cpu(), reference.float().cpu()
    return float((value - reference).norm() / reference.norm().clamp_min(1e-12))


# -- everything at once, on one device ----------------------------------------------------
def run_all(name: str, device: str, folder, autocast=None, precision: str = "", context=None) -> dict:
    """Build case ``name`` (CPU, fp32 weights), move it to ``device`` and run what the
    device tests compare; every result comes back on the CPU as float32:

    ``out``/``logp``: teacher-forced decoder output and log-probabilities (eval mode);
    ``loss``, ``grads``: OpenNMT-py's loss of the batch and its gradient vector;
    ``update``: what one OpenNMT-py optimizer step (Adam, its state on the device) adds to
    the parameters with a gradient; ``steps``: incremental decoding with beam tiling; ``scores``/``preds``:
    OpenNMT-py's beam search (``-gpu 0`` off the CPU, ``-precision precision``);
    ``export``: every sentence's attention at each site the model exports;
    ``train_loss``: one training-mode step (sampled gates): finite, not compared.

    ``autocast``: a context-manager factory for the forward passes and the beam search
    (mixed precision), ``precision``: translation's ``-precision`` (then no autocast);
    ``context``: entered once the model is built on the CPU (tests.simdevice.SimulatedDevice)."""
    model, opt, vocab = build_case(name)
    batch = make_batch(model, vocab)
    path = save(model, opt, vocab, f"{folder}/{name}.pt")
    with context or contextlib.nullcontext():
        return _run_all(model, opt, vocab, batch, path, device, autocast, precision)


def _run_all(model, opt, vocab, batch, path, device, autocast, precision) -> dict:
    on_cpu = torch.device(device).type == "cpu"
    if not on_cpu:
        opt.gpu_ranks, opt.world_size = [0], 1        # as a GPU run's options say
    autocast = autocast or contextlib.nullcontext
    model.to(device)
    dbatch = to(batch, device)
    device_ = next(model.parameters()).device
    result = {}
    with torch.no_grad(), autocast():
        out, logp = forward(model, dbatch)
        steps = stepwise(model, dbatch)
    result.update(out=out, logp=logp, steps=steps)
    trans = translator(path, gpu=-1 if on_cpu else 0, precision=precision)
    with (contextlib.nullcontext if precision else autocast)():     # -precision: float16 weights
        scores, preds = beam_search(trans, dbatch)
    result.update(scores=scores, preds=preds)
    tokens = sentences(model, vocab, batch)
    sites = ["enc"] if getattr(model.decoder, "attentions", None) is None else ["enc", "dec", "cross"]
    result["export"] = {site: [torch.from_numpy(a) for a in export(model, vocab, tokens, site, device_)]
                        for site in sites}
    compute = loss_compute(model, opt, vocab)
    optim = optimizer(model, opt)
    optim.zero_grad(set_to_none=True)
    with autocast():
        value = loss(model, opt, vocab, dbatch, compute)
    optim.backward(value)
    result["loss"] = value.detach()
    trained = [p for p in model.parameters() if p.grad is not None]
    result["grads"] = torch.cat([p.grad.detach().float().flatten() for p in trained])
    before = torch.cat([p.detach().float().flatten() for p in trained])
    optim.step()
    result["update"] = torch.cat([p.detach().float().flatten() for p in trained]) - before
    result["train_loss"] = torch.tensor(train_step(model, opt, vocab, dbatch, optim, compute, autocast))
    return {key: (value.detach().float().cpu() if isinstance(value, torch.Tensor) else value)
            for key, value in result.items()}


def profile(model_path: str, folder, gpu: int = -1) -> dict:
    """``headlab profile-heads`` (paper D) of a checkpoint on the syntax fixture treebank
    (tests/fixtures/syntax/mwt_empty.conllu); returns the head table and the attention."""
    from pathlib import Path

    import numpy as np
    import pandas as pd

    from headlab.syntax.run import profile_heads
    fixture = Path(__file__).parent / "fixtures" / "syntax" / "mwt_empty.conllu"
    src = Path(folder) / "ud.bpe.src"
    src.write_text("I do n@@ 't see the U.@@ S. \" now \" .\nShe was gon@@ na go .\n")
    out = Path(folder) / f"profile{gpu}"
    profile_heads(model_path, str(fixture), str(src), str(out), pair="en-de", figure_sents=2, gpu=gpu)
    with np.load(f"{out}.attention.npz") as data:
        attention = [torch.from_numpy(data[f"att_{i:06d}"]) for i in range(2)]
    return {"heads": pd.read_csv(f"{out}.csv"), "attention": attention}
