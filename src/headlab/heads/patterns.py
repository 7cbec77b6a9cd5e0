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

import torch
from torch import Tensor

#: pattern names in paper A's order (head k of ``kF...`` is PATTERNS[k-1])
PATTERNS = ("current", "previous", "next", "left", "right", "end", "start", "last")
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


def _gather_time(x: Tensor, index: Tensor) -> Tensor:
    """x: (B, g, N, d), index: (B, g, N) -> out[b, h, i] = x[b, h, index[b, h, i]]."""
    return x.gather(2, index.unsqueeze(-1).expand(*index.shape, x.size(-1)))


def apply_patterns(names, v: Tensor, lengths: Tensor, word_ids: Tensor | None = None) -> Tensor:
    """Patterns ``names[h]`` applied to ``v[:, :, h]``; v: (B, N, H, d) -> (B, N, H, d) float32.

    Row i of head h is sum_j A_h[i, j] v[:, j, h] with A_h as in the module doc; rows of
    padded positions are 0. With ``word_ids`` (B, N) the word-based variant is computed.
    """
    v = v.float()       # float32 whatever the input (mixed precision): sums of (j+1)^3-weighted values
    if word_ids is not None:
        return _word_patterns(names, v, lengths, word_ids)
    B, N, H, d = v.shape
    # head-major inside: every head a contiguous (N, d) block, so selecting heads and
    # scanning along time are block copies (token-major per-head slices are much slower
    # to select on CPU); one transposing copy in, one out
    vh = v.transpose(1, 2).contiguous()                                # (B, H, N, d)
    pos = torch.arange(N, device=v.device)
    n = lengths.to(v.device).view(B, 1)
    valid = (pos.unsqueeze(0) < n).to(v.dtype)                        # (B, N)
    # heads are selected with split + cat (block copies both ways); index_select's
    # backward (index_add) is ~10x slower on CPU
    per_head = vh.split(1, dim=1)
    outs, order = [], []
    for kind in (_SHIFT, _PREFIX, _SUFFIX):
        heads = [h for h, name in enumerate(names) if name in kind]
        if not heads:
            continue
        order += heads
        looks = [_lookup(names[h], pos, n) for h in heads]
        index = torch.stack([idx for idx, _ in looks], 1)             # (B, g, N)
        sub = vh if len(heads) == H else torch.cat([per_head[h] for h in heads], 1)
        if kind is _SHIFT:          # one-position patterns: a single gather
            outs.append(_gather_time(sub, index))
            continue
        use = torch.stack([u for _, u in looks], 1).unsqueeze(-1)     # (B, g, N, 1)
        j = pos.unsqueeze(0).to(v.dtype)
        w = ((n - j) if kind is _SUFFIX else (j + 1)).clamp_min(0).pow(3) * valid   # 0 at padding
        weighted = sub * w.view(B, 1, N, 1)
        if kind is _SUFFIX:
            # suffix sum from k = prefix sum of the reversed sequence at N-1-k: no
            # subtraction (no cancellation), and no flip back
            num, den, index = weighted.flip(2).cumsum(2), w.flip(1).cumsum(1), N - 1 - index
        else:
            num, den = weighted.cumsum(2), w.cumsum(1)
        num = _gather_time(num, index)
        den = den.unsqueeze(1).expand_as(index).gather(2, index).unsqueeze(-1)
        outs.append(torch.where(use, num / den.clamp_min(1e-30), sub))
    if order == list(range(H)):
        out = outs[0] if len(outs) == 1 else torch.cat(outs, 1)
    else:                           # back to the heads' own order (paper A numbering)
        pieces = [p for out in outs for p in out.split(1, dim=1)]
        out = torch.cat([pieces[order.index(h)] for h in range(H)], 1)
    return (out * valid.view(B, 1, N, 1)).transpose(1, 2)


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


def _word_patterns(names, v: Tensor, lengths: Tensor, word_ids: Tensor) -> Tensor:
    B, N, H, d = v.shape
    lengths = lengths.to(v.device)
    valid = torch.arange(N, device=v.device).unsqueeze(0) < lengths.unsqueeze(1)
    slot = torch.where(valid, word_ids.to(v.device), torch.zeros_like(word_ids)).clamp(0, N - 1)
    validf = valid.to(v.dtype)
    # word u's value = mean of its pieces' values (weight spread uniformly over pieces)
    counts = torch.zeros(B, N, device=v.device).scatter_add_(1, slot, validf)
    index = slot.view(B, N, 1, 1).expand(B, N, H, d)
    sums = torch.zeros_like(v).scatter_add(1, index, v * validf.view(B, N, 1, 1))
    word_values = sums / counts.clamp_min(1).view(B, N, 1, 1)
    num_words = torch.where(lengths > 0, (slot * valid).max(1).values + 1, torch.zeros_like(lengths))
    per_word = apply_patterns(names, word_values, num_words)
    return per_word.gather(1, index) * validf.view(B, N, 1, 1)


def dense_patterns(names, lengths: Tensor, N: int, word_ids: Tensor | None = None) -> Tensor:
    """The (B, H, N, N) attention matrices of the fixed patterns, for export and tests.

    Computed by the O(n) code applied to one-hot values (row i of A = A applied to the
    identity), so exported matrices are exactly what the model uses.
    """
    B, H = lengths.size(0), len(names)
    eye = torch.eye(N, device=lengths.device).view(1, N, 1, N).expand(B, N, H, N)
    return apply_patterns(names, eye, lengths, word_ids).permute(0, 2, 1, 3)
