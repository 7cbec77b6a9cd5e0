"""Paper A's fixed attention patterns in O(n) time and memory: shifts and prefix sums.

A fixed head never builds its n x n attention matrix. Each pattern is a weighted average
of value vectors over a contiguous span of positions, so every row is one (inclusive or
suffix) cumulative sum looked up at the span's end, divided by the cumulative weight.
Cumulative sums are of non-negative weights only and are never subtracted from each
other, so no precision is lost to cancellation even though (j+1)^3 reaches ~1e10 at
n=2048; they are computed in float32 whatever the input dtype.

Positions are 0-based: token i of a sentence of n real tokens, i in 0..n-1 (OpenNMT-py
3.5.1 feeds the encoder the source tokens only, no BOS/EOS, so the last position n-1 is
the last source token, usually the final punctuation). Patterns (paper A §3.2; 8: §4.4):

====  ==========  ========================================================================
 #    name        row i (weights normalised to sum to 1)
====  ==========  ========================================================================
 1    current     1 at i
 2    previous    1 at i-1
 3    next        1 at i+1
 4    left        f(j) = (j+1)^3 over j = 0..i-2
 5    right       pattern 4 flipped: (n-j)^3 over j = i+2..n-1 (largest next to i)
 6    end         (j+1)^3 over j = 0..n-1 (peaks at the end of the sentence)
 7    start       pattern 6 flipped: (n-j)^3 over j = 0..n-1 (peaks at the start)
 8    last        1 at n-1
====  ==========  ========================================================================

Edge cases (decided here, tested in tests/test_heads_patterns.py):

* **Empty support falls back to the token itself.** Where a pattern's span has no
  position (previous at i=0; next at i=n-1; left context for i<2; right context for
  i>n-3; sentences of length 1 and 2 included) the row is that of pattern 1 (weight 1 at
  i). Every row of a real token is thus a probability distribution over real tokens,
  like a softmax row, and a head's output never collapses to zero at sentence edges.
* **Padding** is never attended (zero weight), and rows of padded positions are all zero
  (their outputs are 0 before the output projection; OpenNMT-py masks them downstream).
* Paper A Table 4 labels heads 6 and 7 "Start context" / "End context", the reverse of
  the §3.2 list; we follow §3.2 (6 = end of sentence, 7 = start).

**Word-based variant** (paper A §3.2, Fig. 1 lower row): BPE pieces ending in ``@@``
join the next piece into one word. The pattern is applied to the sequence of *words*
(word u of m words, with the same edge-case rules), every piece of word u gets word u's
row, and the weight given to an attended word is spread **uniformly over its pieces**
(equivalently: the attended value of a word is the mean of its pieces' values). This is
O(n) too: piece values are averaged into word slots with a scatter-add, the token
algorithm runs over word slots, and the result is gathered back to pieces.

Implementation: heads are processed in three batches whatever their number: the
one-position patterns (1, 2, 3, 8) are one ``gather`` along time; the patterns weighted by
(j+1)^3 (4, 6) share one prefix sum; those weighted by (n-j)^3 (5, 7) share one suffix
sum. Every pattern is then a lookup of its sum at one index per row (i-2, n-1, i+2, 0),
divided by the matching cumulative weight. The interface is token-major, (B, N, heads,
d), the layout of the value projection's output; inside, heads are made contiguous
(one transposing copy in, one out) so that selecting heads and scanning along time are
block operations. Autograd differentiates it (the transpose of each pattern is again a
gather/scatter or a reversed cumulative sum: O(n) as well).
"""
from __future__ import annotations

import functools

import torch
from torch import Tensor

from headlab.heads.builtin import FIXED_PATTERNS

#: pattern names in paper A's order (head k of ``kF...`` is PATTERNS[k-1]), declared with
#: the fixed kinds (their most heads)
PATTERNS = FIXED_PATTERNS
_SHIFT = ("current", "previous", "next", "last")
_PREFIX = ("left", "end")        # weights (j+1)^3
_SUFFIX = ("right", "start")     # weights (n-j)^3, i.e. the prefix patterns flipped


def _lookup(pattern: str, pos: Tensor, n: Tensor) -> tuple[Tensor, Tensor]:
    """(index, use) per row, (B, N) each: where pattern's sum/position is read for row i
    and whether its span is non-empty (else the row falls back to the token itself)."""
    i = pos.unsqueeze(0).expand(n.size(0), -1)
    true = torch.ones_like(i, dtype=torch.bool)
    last = (n - 1).clamp_min(0).expand_as(i)
    if pattern == "current":                      # paper A §3.2 pattern 1
        return i, true
    if pattern == "previous":                     # pattern 2: i-1
        return (i - 1).clamp_min(0), i >= 1
    if pattern == "next":                         # pattern 3: i+1
        return torch.minimum(i + 1, last), i + 1 < n
    if pattern == "last":                         # paper A §4.4: n-1
        return last, true
    if pattern == "left":                         # pattern 4: prefix sum up to i-2
        return (i - 2).clamp_min(0), i >= 2
    if pattern == "end":                          # pattern 6: prefix sum up to n-1
        return last, true
    if pattern == "right":                        # pattern 5: suffix sum from i+2
        return torch.minimum(i + 2, last), i + 2 < n
    if pattern == "start":                        # pattern 7: suffix sum from 0
        return torch.zeros_like(i), true
    raise KeyError(f"unknown fixed pattern {pattern!r}; known: {', '.join(PATTERNS)}")


def _rows(name: str, x: Tensor, n: Tensor, transpose: bool = False) -> Tensor:
    """Pattern ``name`` (its transpose with ``transpose``) along the time axis of one head:
    x (B, N, d) float32, n (B, 1) real lengths -> (B, N, d); rows of padded positions 0.

    A = diag(use) D⁻¹ S C W + diag(~use): W the weights, C the prefix (or suffix) sum, S
    the read-out index per row, D the matching cumulative weight; shift patterns are S
    alone. The transpose Aᵀ = W Cᵀ Sᵀ D⁻¹ diag(use) + diag(~use) is the same kind of O(n)
    algorithm: a scatter-add at the read-out index, then a suffix (or prefix) sum."""
    B, N, d = x.shape
    pos = torch.arange(N, device=x.device)
    index, use = _lookup(name, pos, n)
    valid = (pos.unsqueeze(0) < n).unsqueeze(-1)                    # (B, N, 1)
    spread = index.unsqueeze(-1).expand(B, N, d)
    if transpose:
        x = x * valid                                               # padded rows were zeroed
    if name in _SHIFT:
        if transpose:
            return torch.zeros_like(x).scatter_add_(1, spread, x)
        return x.gather(1, spread) * valid
    suffix = name in _SUFFIX
    j = pos.unsqueeze(0).to(x.dtype)
    w = ((n - j) if suffix else (j + 1)).clamp_min(0).pow(3) * valid.squeeze(-1)   # 0 at padding
    den = _running(w, suffix).gather(1, index).clamp_min(1e-30).unsqueeze(-1)   # (B, N, 1)
    use = use.unsqueeze(-1)
    if transpose:
        picked = torch.zeros_like(x).scatter_add_(1, spread, torch.where(use, x / den, 0))
        return _running(picked, not suffix) * w.unsqueeze(-1) + torch.where(use, 0, x)
    num = _running(x * w.unsqueeze(-1), suffix).gather(1, spread)
    return torch.where(use, num / den, x) * valid


def _running(x: Tensor, suffix: bool) -> Tensor:
    """Prefix sums along dim 1, or suffix sums (a prefix sum of the reversed sequence, read
    back reversed: no subtraction, so no cancellation)."""
    return x.flip(1).cumsum(1).flip(1) if suffix else x.cumsum(1)


def _word_rows(name: str, x: Tensor, words: "_Words", transpose: bool = False) -> Tensor:
    """Word-based pattern (or its transpose) of one head: pieces -> word slots (mean of
    their pieces), the token pattern over words, back to every piece of a word."""
    B, N, d = x.shape
    spread = words.slot.unsqueeze(-1).expand(B, N, d)
    if transpose:                    # Aᵀ = (mean)ᵀ · patternᵀ · (gather)ᵀ
        per_word = torch.zeros_like(x).scatter_add_(1, spread, x * words.valid)
        per_word = _rows(name, per_word, words.count, transpose=True)
        return per_word.gather(1, spread) / words.size.gather(1, words.slot).unsqueeze(-1) * words.valid
    per_word = torch.zeros_like(x).scatter_add_(1, spread, x * words.valid) / words.size.unsqueeze(-1)
    return _rows(name, per_word, words.count).gather(1, spread) * words.valid


class _Words:
    """Word slots of pieces: ``slot`` (B, N) word index (0 at padding), ``size`` (B, N)
    pieces per word slot (>= 1), ``count`` (B, 1) words, ``valid`` (B, N, 1) float."""

    def __init__(self, word_ids: Tensor, lengths: Tensor):
        B, N = word_ids.shape
        lengths = lengths.to(word_ids.device)
        valid = torch.arange(N, device=word_ids.device).unsqueeze(0) < lengths.unsqueeze(1)
        self.slot = torch.where(valid, word_ids, torch.zeros_like(word_ids)).clamp(0, N - 1)
        self.valid = valid.unsqueeze(-1).float()
        pieces = torch.zeros(B, N, device=word_ids.device).scatter_add_(1, self.slot, self.valid.squeeze(-1))
        self.size = pieces.clamp_min(1)
        self.count = torch.where(lengths > 0, (self.slot * valid).max(1).values + 1,
                                 torch.zeros_like(lengths)).view(B, 1)


class _Patterns(torch.autograd.Function):
    """The fixed heads as one linear map of the values: its backward is the transposed
    patterns (:func:`_rows`), so nothing but lengths and word ids is kept for backward
    and no intermediate of the forward outlives it. One head at a time: temporaries are
    (B, N, d), the output is written in place."""

    @staticmethod
    def forward(ctx, v, lengths, word_ids, names):
        ctx.names = names
        ctx.save_for_backward(lengths, word_ids)
        return _apply(names, v, lengths, word_ids, transpose=False)

    @staticmethod
    def backward(ctx, grad):
        lengths, word_ids = ctx.saved_tensors
        return _apply(ctx.names, grad, lengths, word_ids, transpose=True), None, None, None


def _apply(names, v: Tensor, lengths: Tensor, word_ids: Tensor | None, transpose: bool) -> Tensor:
    B, N, H, d = v.shape
    out = torch.empty(B, N, H, d, device=v.device, dtype=torch.float32)
    if word_ids is not None:
        words = _Words(word_ids.to(v.device), lengths)
    else:
        n = lengths.to(v.device).view(B, 1)
    for h, name in enumerate(names):
        x = v[:, :, h].float()
        out[:, :, h] = _word_rows(name, x, words, transpose) if word_ids is not None else _rows(name, x, n, transpose)
    return out


def apply_patterns(names, v: Tensor, lengths: Tensor, word_ids: Tensor | None = None) -> Tensor:
    """Patterns ``names[h]`` applied to ``v[:, :, h]``; v: (B, N, H, d) -> (B, N, H, d) float32.

    Row i of head h is sum_j A_h[i, j] v[:, j, h] with A_h as in the module doc; rows of
    padded positions are 0. With ``word_ids`` (B, N) the word-based variant is computed.
    """
    # float32 whatever the input (mixed precision): sums of (j+1)^3-weighted values; the
    # cast outside the Function hands its backward float32 gradients and casts them back
    return _Patterns.apply(v.float(), lengths, word_ids, tuple(names))


def apply_pattern(name: str, v: Tensor, lengths: Tensor) -> Tensor:
    """One pattern on v: (B, N, d) -> (B, N, d)."""
    return apply_patterns((name,), v.unsqueeze(2), lengths)[:, :, 0]


def word_ids_from_continuation(continuation: Tensor, token_ids: Tensor) -> Tensor:
    """Word index (0-based) of each piece: a piece ending in ``@@`` continues into the next.

    continuation: (V,) bool, token_ids: (B, N) long. Padded positions get indices past the
    last word; callers mask them.
    """
    cont = continuation[token_ids]
    starts = torch.ones_like(cont)
    starts[:, 1:] = ~cont[:, :-1]
    return torch.cumsum(starts.long(), dim=1) - 1


#: each pattern's span [lo, hi] of positions for row i of a sequence of n units, as
#: coefficients of (i, 1, n - 1): lo = a·i + b + c·(n - 1); and its weight (j+1)^3 ("up"),
#: (n-j)^3 ("down") or 1 (paper A §3.2, §4.4; the module doc)
_SPANS = {
    "current": ((1, 0, 0), (1, 0, 0), "one"),
    "previous": ((1, -1, 0), (1, -1, 0), "one"),
    "next": ((1, 1, 0), (1, 1, 0), "one"),
    "left": ((0, 0, 0), (1, -2, 0), "up"),
    "right": ((1, 2, 0), (0, 0, 1), "down"),
    "end": ((0, 0, 0), (0, 0, 1), "up"),
    "start": ((0, 0, 0), (0, 0, 1), "down"),
    "last": ((0, 0, 1), (0, 0, 1), "one"),
}


def pattern_matrix(names, lengths: Tensor, N: int, word_ids: Tensor | None = None) -> Tensor:
    """(B, H, N, N) float32 matrices of patterns ``names`` (token-based, or word-based with
    ``word_ids``): the fused path's fixed heads (one matmul with the values per layer) and
    a check of the O(n) code. A fixed number of tensor ops whatever B, N and the number of
    patterns: every pattern is a span [lo, hi] per row (:data:`_SPANS`) with weights 1,
    (j+1)^3 or (n-j)^3, normalised per row; an empty span falls back to the token itself.
    Cubes are of (j+1)/n and (n-j)/n (at most 1: float32 keeps them exact to 2^-24 relative,
    where (j+1)^3 itself would reach 8.6e9 at n = 2048). Rows and columns of padding are 0."""
    lengths = lengths.view(-1)
    B = lengths.size(0)
    if word_ids is None:
        return _span_matrix(names, lengths, N)
    words = _Words(word_ids, lengths)
    per_word = _span_matrix(names, words.count.view(-1), N)                     # (B, H, N, N) over word slots
    H = per_word.size(1)
    rows = words.slot.view(B, 1, N, 1).expand(B, H, N, N)
    per_piece = per_word.gather(2, rows)                                       # row of each piece's word
    cols = words.slot.view(B, 1, 1, N).expand(B, H, N, N)
    share = per_piece.gather(3, cols) / words.size.gather(1, words.slot).view(B, 1, 1, N)
    real = words.valid.view(B, 1, N, 1) * words.valid.view(B, 1, 1, N)
    return share * real


@functools.lru_cache(maxsize=64)
def _span_table(names: tuple[str, ...], device: torch.device, like: type) -> tuple[Tensor, Tensor, Tensor]:
    """The patterns' spans (H, 6) and weight kinds (1, H, 1, 1) ``up`` and ``down``, made once
    per device: built for every batch, they were three copies from the host, each of which
    waits on a GPU for every kernel queued before it. ``like`` (the lengths' tensor type)
    keeps a tensor subclass's constants apart (tests/simdevice.py); made outside inference
    mode, so that a translation's first batch does not leave training inference tensors."""
    del like
    with torch.inference_mode(False):
        spans = torch.tensor([(*_SPANS[name][0], *_SPANS[name][1]) for name in names], device=device)
        weight_kind = [_SPANS[name][2] for name in names]
        up = torch.tensor([kind == "up" for kind in weight_kind], device=device).view(1, -1, 1, 1)
        down = torch.tensor([kind == "down" for kind in weight_kind], device=device).view(1, -1, 1, 1)
    return spans, up, down


def _span_matrix(names, lengths: Tensor, N: int) -> Tensor:
    """:func:`pattern_matrix` over tokens for sequences of ``lengths`` (B,) units."""
    device = lengths.device
    spans, up, down = _span_table(tuple(names), device, type(lengths))
    pos = torch.arange(N, device=device)
    n = lengths.to(device).view(-1, 1, 1, 1)                                     # (B, 1, 1, 1)
    i, j = pos.view(1, 1, N, 1), pos.view(1, 1, 1, N)
    coeff = spans.view(1, len(names), 6, 1, 1).unbind(2)
    lo = coeff[0] * i + coeff[1] + coeff[2] * (n - 1)                          # (B, H, N, 1)
    hi = coeff[3] * i + coeff[4] + coeff[5] * (n - 1)
    support = (j >= lo) & (j <= hi) & (j < n)
    scale = n.clamp_min(1).float()
    cubes_up, cubes_down = ((j + 1) / scale).pow(3), ((n - j) / scale).pow(3)   # (B, 1, 1, N)
    weights = torch.where(up, cubes_up, torch.where(down, cubes_down, torch.ones_like(cubes_up)))
    spanned = torch.where(support, weights, 0.0)
    total = spanned.sum(-1, keepdim=True)
    itself = (j == i).float().expand_as(spanned)
    matrix = torch.where(total > 0, spanned / total.clamp_min(1e-30), itself)
    return matrix * (i < n)


def dense_patterns(names, lengths: Tensor, N: int, word_ids: Tensor | None = None) -> Tensor:
    """The (B, H, N, N) attention matrices of the fixed patterns, for export and tests.

    Computed by the O(n) code applied to one-hot values (row i of A = A applied to the
    identity), so exported matrices are exactly what the model uses.
    """
    B, H = lengths.size(0), len(names)
    eye = torch.eye(N, device=lengths.device).view(1, N, 1, N).expand(B, N, H, N)
    return apply_patterns(names, eye, lengths, word_ids).permute(0, 2, 1, 3)
