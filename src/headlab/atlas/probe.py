"""The shared passes of the atlas over one model: every head of every site (encoder self,
decoder self, cross), teacher-forced on a set of sentence pairs.

One pass with gradients per batch gives, for every head at once:

* its attention statistics (Voita et al. 2019): **confidence** = mean over query tokens of
  the head's largest attention weight; **entropy** = mean over query tokens of
  -Σ_j α_ij ln α_ij (nats); **distance** = mean over query tokens of Σ_j α_ij |i - j|
  (positions; self-attention sites only: a cross-attention's queries and keys are two
  sentences, so it is NaN there). Token-weighted means over the whole set;
* the teacher-forced loss of the full model (sum over sentences of the target's negative
  log-likelihood, EOS included, as :mod:`headlab.eval.forced` scores it);
* **gradient importance** (Michel et al. 2019, eq. 5): I_h = Σ_x |∂L(x)/∂ξ_h| at ξ = 1,
  with ξ_h the head probe of :class:`headlab.heads.attention.HeadlabAttention` (multiplies
  the head's output before the mixers and the output projection). The probe has one row
  per sentence, so one backward gives every sentence's own gradient (sentence b's loss
  depends on row b only): exactly the expectation over examples of the paper, not their
  code's per-batch approximation. L(x) is the sentence's summed negative log-likelihood;
* DHICM importance G (paper B eq. 1) and RHE labels (paper C eq. 10), recorded in the same
  forward;
* **value norm** (Kobayashi et al. 2020, "Attention is not only a weight"): mean over query
  tokens of ‖Σ_j α_ij f_h(x_j)‖, f_h(x) = (x W_V^h + b_V^h) W_O^h the head's value vector
  carried through its share of the output projection: what the head adds to the layer's
  output, weights and value norms together (:func:`value_norm_sums`). The head's output is
  taken after the list mixers (a gate scales it); in a DHICM layer f_h goes through G_h, V
  and W_s (paper B eq. 3), biases left out as in the paper (they are no head's).

Then one forward per head without gradients: the **loss change** when that head alone
(one site, one layer, one head) is disabled (probe 0), per target token, in nats. For
decoder and cross heads the encoder output is computed once per batch and reused.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

SITES = ("enc", "dec", "cross")


def site_modules(model, opt) -> dict[str, list]:
    """{site: [HeadlabAttention of each layer]}; a stock decoder is swapped for the equal
    headlab one first (:func:`headlab.engine.decoder.as_headlab_decoder`)."""
    from headlab.engine.decoder import as_headlab_decoder

    decoder = as_headlab_decoder(model, opt)
    return {"enc": [layer.self_attn for layer in model.encoder.transformer],
            "dec": decoder.attentions("dec"), "cross": decoder.attentions("cross")}


def set_probes(modules: dict[str, list], value) -> None:
    """Every layer's head probe: ``value(site, layer, num_heads)`` -> Tensor or None."""
    for site, layers in modules.items():
        for number, attn in enumerate(layers):
            attn.head_probe = value(site, number, attn.num_heads)


def sentence_loss(model, src: Tensor, src_len: Tensor, tgt: Tensor, pad: int,
                  enc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    """(negative log-likelihood of each target sentence (B,), its scored tokens (B,)); with
    ``enc`` = (encoder output, lengths) the encoder is not run again."""
    if enc is None:
        enc_out, _, enc_len = model.encoder(src, src_len)
        enc = (enc_out, src_len if enc_len is None else enc_len)
    model.decoder.init_state(src, enc[0], None)
    dec_out, _ = model.decoder(tgt[:, :-1, :], enc[0], src_len=enc[1])
    logits = model.generator(dec_out)
    # at least float32 (half-precision models), float64 kept (tests' finite differences)
    log_probs = torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), -1)
    gold = tgt[:, 1:, 0]
    mask = gold.ne(pad)
    token = log_probs.gather(2, gold.unsqueeze(-1)).squeeze(-1)
    return -(token * mask).sum(1), mask.sum(1)


@dataclass
class Batch:
    src: Tensor
    src_len: Tensor
    tgt: Tensor
    index: list[int]          # positions of these sentences in the input list


def batches(model, vocabs, src: list[list[str]], tgt: list[list[str]], device, batch_size: int = 32) -> list[Batch]:
    """Sentences sorted by length into batches (less padding), built once for every pass."""
    from headlab.engine.export import teacher_forcing_batch

    order = sorted(range(len(src)), key=lambda i: (len(src[i]), len(tgt[i])))
    out = []
    for start in range(0, len(order), batch_size):
        ids = order[start:start + batch_size]
        s, s_len, t = teacher_forcing_batch(model, vocabs, [src[i] for i in ids], [tgt[i] for i in ids], device)
        out.append(Batch(s, s_len, t, ids))
    return out


def attention_stats(att: Tensor, q_len: Tensor, k_len: Tensor, distance: bool) -> Tensor:
    """Sums over the real query tokens of (max weight, entropy, distance) per head: att
    (B, H, Nq, Nk), lengths (B,) -> (H, 3) float64 (distance 0 when not asked)."""
    B, H, Nq, Nk = att.shape
    rows = torch.arange(Nq, device=att.device).view(1, Nq) < q_len.view(B, 1)            # (B, Nq)
    a = att.double()
    conf = a.amax(-1)
    ent = -(a * a.clamp_min(1e-30).log()).sum(-1)
    if distance:
        pos_q = torch.arange(Nq, device=att.device, dtype=torch.float64).view(Nq, 1)
        pos_k = torch.arange(Nk, device=att.device, dtype=torch.float64).view(1, Nk)
        dist = (a * (pos_q - pos_k).abs()).sum(-1)
    else:
        dist = torch.zeros_like(conf)
    w = rows.view(B, 1, Nq).double()
    return torch.stack([(conf * w).sum((0, 2)), (ent * w).sum((0, 2)), (dist * w).sum((0, 2))], -1)


@dataclass
class SiteResult:
    """Per layer and head of one site (arrays (layers, heads))."""
    stats: np.ndarray                       # (L, H, 3) sums: max weight, entropy, distance
    tokens: float = 0.0                     # query tokens summed over
    grad: np.ndarray | None = None          # Σ_x |dL(x)/dξ|
    loss_delta: np.ndarray | None = None    # per-token loss change with the head disabled
    dhicm: dict[int, list[np.ndarray]] = field(default_factory=dict)   # layer -> [(tokens, H)]
    rhe: dict[int, list[np.ndarray]] = field(default_factory=dict)     # layer -> [(B, H) important?]
    value_norm: np.ndarray | None = None    # (L, H) sums over query tokens of ‖Σ_j α_ij f_h(x_j)‖


def _rhe_groups(attn) -> list[tuple[int, object]]:
    start, out = 0, []
    for group in attn.heads:
        if hasattr(group, "fgate") and hasattr(group, "record"):
            out.append((start, group))
        start += group.count
    return out


def _dhicm(attn):
    mixer = attn.output_mixer
    return mixer if mixer is not None and hasattr(mixer, "importance") else None


def head_projections(attn) -> list[Tensor]:
    """Per head group, (count, d_head, d_model): the linear map from each head's output to
    the layer's output (its columns of ``final_linear``; in a DHICM layer V then W_s, one
    map for every head)."""
    mixer = _dhicm(attn)
    if mixer is not None:
        shared = mixer.V.weight.T @ mixer.W_s.weight.T                      # (d_head, d_model)
        return [shared.unsqueeze(0).expand(g.count, -1, -1) for g in attn.heads]
    columns = attn.final_linear.weight.T.split(attn.widths, 0)              # (count * d_head, d_model) each
    return [c.reshape(g.count, g.d_head, -1) for g, c in zip(attn.heads, columns)]


def value_norm_sums(outs: list[Tensor], projections: list[Tensor], q_len: Tensor,
                    weights: Tensor | None = None) -> Tensor:
    """Σ over the real query tokens of ‖o_h P_h‖ per head, (H,) float64: ``outs`` the heads'
    outputs o_h = Σ_j α_ij v_j^h, one (B, Nq, count, d_head) tensor per group;
    ``projections`` from :func:`head_projections`; ``weights`` (B, Nq, H) >= 0 scale each
    head first (DHICM's G)."""
    norms = torch.cat([torch.einsum("bnck,ckd->bncd", o.double(), p.detach().double()).norm(dim=-1)
                       for o, p in zip(outs, projections)], -1)             # (B, Nq, H)
    if weights is not None:
        norms = norms * weights.double()
    B, Nq = norms.shape[:2]
    real = (torch.arange(Nq, device=norms.device).view(1, Nq) < q_len.view(B, 1)).double()
    return (norms * real.unsqueeze(-1)).sum((0, 1))


class _OutputRecorder:
    """Keeps a layer's head outputs of each forward (an instance attribute over the method,
    removed by :meth:`close`): the value norm needs them, the layer's API does not give them."""

    def __init__(self, attn):
        self.attn, self.outs = attn, None
        method = attn.head_outputs

        def record(*args, **kwargs):
            outs = method(*args, **kwargs)
            self.outs = [o.detach() for o in outs]
            return outs
        attn.head_outputs = record

    def close(self):
        del self.attn.head_outputs


def forward_pass(model, modules: dict[str, list], data: list[Batch], pad: int,
                 examples: set[int] = frozenset()) -> tuple[dict[str, SiteResult], float, int, dict]:
    """The pass with gradients (module doc): (per-site results, total loss, target tokens,
    {sentence index: {site: attention (L, H, nq, nk) numpy}} for ``examples``)."""
    results = {site: SiteResult(np.zeros((len(layers), layers[0].num_heads if layers else 0, 3)),
                                grad=np.zeros((len(layers), layers[0].num_heads if layers else 0)),
                                value_norm=np.zeros((len(layers), layers[0].num_heads if layers else 0)))
               for site, layers in modules.items()}
    outputs = {(site, number): _OutputRecorder(attn) for site, layers in modules.items()
               for number, attn in enumerate(layers)}
    projections = {key: head_projections(rec.attn) for key, rec in outputs.items()}
    recorders = [a for a in (*modules["dec"], *modules["cross"])]
    recorders += [m for layers in modules.values() for m in map(_dhicm, layers) if m is not None]
    recorders += [g for layers in modules.values() for a in layers for _, g in _rhe_groups(a)]
    for module in recorders:
        module.record = True
    total, tokens, maps = 0.0, 0, {}
    try:
        for batch in data:
            B = batch.src.size(0)
            probes = {}

            def make(site, layer, heads):
                probes[(site, layer)] = torch.ones(B, heads, device=batch.src.device, requires_grad=True)
                return probes[(site, layer)]
            set_probes(modules, make)
            with torch.no_grad():
                enc_maps = model.encoder.attention(batch.src, batch.src_len)
            # the encoder's own forward (inside sentence_loss) records DHICM / RHE of enc
            loss, count = sentence_loss(model, batch.src, batch.src_len, batch.tgt, pad)
            summed = loss.sum()
            summed.backward()
            total += float(summed.detach())
            tokens += int(count.sum())
            q_len = {"enc": batch.src_len, "dec": count, "cross": count}
            for site, layers in modules.items():
                res = results[site]
                for number, attn in enumerate(layers):
                    res.grad[number] += probes[(site, number)].grad.abs().sum(0).double().cpu().numpy()
                    att = enc_maps[number] if site == "enc" else attn.recorded.float()
                    k_len = batch.src_len if site in ("enc", "cross") else count
                    res.stats[number] += attention_stats(att, q_len[site], k_len, site != "cross").cpu().numpy()
                    mixer = _dhicm(attn)
                    weights = mixer.importance if mixer is not None else None
                    res.value_norm[number] += value_norm_sums(outputs[(site, number)].outs, projections[(site, number)],
                                                              q_len[site], weights).cpu().numpy()
                    if mixer is not None and mixer.importance is not None:
                        imp = mixer.importance.float().cpu().numpy()
                        res.dhicm.setdefault(number, []).extend(
                            imp[b, :int(q_len[site][b])] for b in range(B))
                    for start, group in _rhe_groups(attn):
                        labels = np.zeros((B, attn.num_heads)) * np.nan
                        labels[:, start:start + group.count] = group.labels.float().cpu().numpy()
                        res.rhe.setdefault(number, []).append(labels)
                res.tokens += float(q_len[site].sum())
            for b, index in enumerate(batch.index):
                if index in examples:
                    n, t = int(batch.src_len[b]), int(count[b])
                    maps[index] = {
                        "enc": torch.stack([m[b, :, :n, :n] for m in enc_maps]).float().cpu().numpy(),
                        "dec": torch.stack([a.recorded[b, :, :t, :t] for a in modules["dec"]]).float().cpu().numpy(),
                        "cross": torch.stack([a.recorded[b, :, :t, :n] for a in modules["cross"]]).float().cpu().numpy()}
    finally:
        for recorder in outputs.values():
            recorder.close()
        for module in recorders:
            module.record = False
        set_probes(modules, lambda *_: None)
        model.zero_grad(set_to_none=True)
    return results, total, tokens, maps


@torch.no_grad()
def ablation_losses(model, modules: dict[str, list], data: list[Batch], pad: int, full: float,
                    tokens: int, max_rows: int = 1024) -> dict[str, np.ndarray]:
    """{site: (L, H) per-token loss change (nats) with that head alone disabled}.

    Several heads of one layer are ablated in one forward: the batch is repeated once per
    head and the probe zeroes head h in the h-th copy only (at most ``max_rows`` sentences
    a forward), which is the same computation as one forward per head, with fewer, larger
    operations."""
    encoded = []
    for batch in data:
        enc_out, _, enc_len = model.encoder(batch.src, batch.src_len)
        encoded.append((enc_out, batch.src_len if enc_len is None else enc_len))
    out = {}
    for site, layers in modules.items():
        delta = np.zeros((len(layers), layers[0].num_heads if layers else 0))
        for number, attn in enumerate(layers):
            H = attn.num_heads
            for batch, (enc_out, enc_len) in zip(data, encoded):
                B = batch.src.size(0)
                step = max(1, min(H, max_rows // B))
                for first in range(0, H, step):
                    heads = list(range(first, min(H, first + step)))
                    n = len(heads)
                    probe = torch.ones(n * B, H, device=batch.src.device)
                    for k, h in enumerate(heads):
                        probe[k * B:(k + 1) * B, h] = 0.0
                    attn.head_probe = probe
                    try:
                        enc = None if site == "enc" else (enc_out.repeat(n, 1, 1), enc_len.repeat(n))
                        loss = sentence_loss(model, batch.src.repeat(n, 1, 1), batch.src_len.repeat(n),
                                             batch.tgt.repeat(n, 1, 1), pad, enc)[0]
                    finally:
                        attn.head_probe = None
                    delta[number, heads] += loss.view(n, B).sum(1).double().cpu().numpy()
            delta[number] = (delta[number] - full) / max(tokens, 1)
        out[site] = delta
    return out
