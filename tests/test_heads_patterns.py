"""Paper A §3.2 fixed patterns: hand-computed rows (Fig. 1 sentence), O(n) == dense reference."""
from fractions import Fraction as Fr

import numpy as np
import pytest
import torch

from headlab.heads import reference as R
from headlab.heads.patterns import (PATTERNS, apply_patterns, dense_patterns,
                                    word_ids_from_continuation)

FIG1 = "a master of science fic@@ tion .".split()      # n = 7 pieces, 6 words
N = len(FIG1)


def token_rows():
    return dense_patterns(PATTERNS, torch.tensor([N]), N)[0].double().numpy()


def word_rows():
    cont = torch.tensor([t.endswith("@@") for t in FIG1])
    wid = word_ids_from_continuation(cont, torch.arange(N).unsqueeze(0))
    assert wid.tolist() == [[0, 1, 2, 3, 4, 4, 5]]
    return dense_patterns(PATTERNS, torch.tensor([N]), N, wid)[0].double().numpy()


def f(*xs):
    return np.array([float(Fr(x)) for x in xs])


# (pattern, row i, expected row) -- token-based, paper A Fig. 1 upper row
TOKEN_CASES = [
    ("current", 3, f(0, 0, 0, 1, 0, 0, 0)),
    ("previous", 3, f(0, 0, 1, 0, 0, 0, 0)),
    ("previous", 0, f(1, 0, 0, 0, 0, 0, 0)),                 # no previous: itself
    ("next", 4, f(0, 0, 0, 0, 0, 1, 0)),
    ("next", 6, f(0, 0, 0, 0, 0, 0, 1)),                     # no next: itself
    ("left", 4, f("1/36", "8/36", "27/36", 0, 0, 0, 0)),       # (j+1)^3 over j=0..2
    ("left", 2, f(1, 0, 0, 0, 0, 0, 0)),                     # j=0 only
    ("left", 1, f(0, 1, 0, 0, 0, 0, 0)),                     # empty span: itself
    ("right", 2, f(0, 0, 0, 0, "27/36", "8/36", "1/36")),      # (7-j)^3 over j=4..6
    ("right", 4, f(0, 0, 0, 0, 0, 0, 1)),
    ("right", 5, f(0, 0, 0, 0, 0, 1, 0)),                    # empty span: itself
    ("end", 0, f(*[f"{(j + 1) ** 3}/784" for j in range(7)])),
    ("end", 5, f("1/784", "8/784", "27/784", "64/784", "125/784", "216/784", "343/784")),
    ("start", 2, f("343/784", "216/784", "125/784", "64/784", "27/784", "8/784", "1/784")),
    ("last", 0, f(0, 0, 0, 0, 0, 0, 1)),
]

# word-based, Fig. 1 lower row: "fic@@ tion" is one word; its weight is split 1/2 + 1/2
WORD_CASES = [
    ("current", 5, f(0, 0, 0, 0, "1/2", "1/2", 0)),           # 'tion' attends to its word
    ("previous", 5, f(0, 0, 0, 1, 0, 0, 0)),                 # 'tion' -> 'science'
    ("previous", 4, f(0, 0, 0, 1, 0, 0, 0)),                 # 'fic@@' -> 'science' too
    ("previous", 6, f(0, 0, 0, 0, "1/2", "1/2", 0)),          # '.' -> 'fiction'
    ("next", 3, f(0, 0, 0, 0, "1/2", "1/2", 0)),              # 'science' -> 'fiction'
    ("next", 4, f(0, 0, 0, 0, 0, 0, 1)),                     # 'fic@@' -> '.'
    ("left", 6, f("1/100", "8/100", "27/100", "64/100", 0, 0, 0)),
    ("left", 5, f("1/36", "8/36", "27/36", 0, 0, 0, 0)),
    ("right", 1, f(0, 0, 0, "27/36", "4/36", "4/36", "1/36")),  # words 3..5, (6-u)^3
    ("right", 4, f(0, 0, 0, 0, "1/2", "1/2", 0)),             # empty span: its own word
    ("end", 0, f("1/441", "8/441", "27/441", "64/441", "125/882", "125/882", "216/441")),
    ("start", 6, f("216/441", "125/441", "64/441", "27/441", "4/441", "4/441", "1/441")),
    ("last", 4, f(0, 0, 0, 0, 0, 0, 1)),
]


@pytest.mark.parametrize("name,i,expected", TOKEN_CASES)
def test_fig1_token_rows(name, i, expected):
    np.testing.assert_allclose(token_rows()[PATTERNS.index(name), i], expected, atol=1e-7)


@pytest.mark.parametrize("name,i,expected", WORD_CASES)
def test_fig1_word_rows(name, i, expected):
    np.testing.assert_allclose(word_rows()[PATTERNS.index(name), i], expected, atol=1e-7)


def test_rows_are_distributions():
    for rows in (token_rows(), word_rows()):
        np.testing.assert_allclose(rows.sum(-1), 1.0, atol=1e-6)


def test_reference_agrees_with_hand_rows():
    assert R.token_matrix("left", 7)[4][:3] == [Fr(1, 36), Fr(8, 36), Fr(27, 36)]
    groups = R.word_groups(FIG1)
    assert groups == [[0], [1], [2], [3], [4, 5], [6]]
    assert R.word_matrix("end", groups)[0][4] == Fr(125, 882)


def _random_batch(seed, B=6, N=11, vocab=9):
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, N + 1, (B,), generator=gen)
    lengths[0], lengths[1], lengths[2] = 1, 2, N                      # short and full rows
    ids = torch.randint(0, vocab, (B, N), generator=gen)
    cont = torch.zeros(vocab, dtype=torch.bool)
    cont[: vocab // 2] = True                                        # ids < 4 end in '@@'
    return lengths, ids, cont, gen


def _reference(names, lengths, ids, cont, N, word):
    out = np.zeros((len(lengths), len(names), N, N))
    for b, n in enumerate(lengths.tolist()):
        toks = [("x@@" if cont[t] else "x") for t in ids[b, :n].tolist()]
        for h, name in enumerate(names):
            m = R.word_matrix(name, R.word_groups(toks)) if word else R.token_matrix(name, n)
            out[b, h, :n, :n] = np.array(m, dtype=float)
    return out


@pytest.mark.parametrize("word", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_linear_time_equals_dense_reference(word, seed):
    lengths, ids, cont, gen = _random_batch(seed)
    B, N = ids.shape
    wid = word_ids_from_continuation(cont, ids) if word else None
    expected = _reference(PATTERNS, lengths, ids, cont, N, word)
    # the attention matrices themselves
    dense = dense_patterns(PATTERNS, lengths, N, wid).double().numpy()
    np.testing.assert_allclose(dense, expected, atol=1e-5)
    # and the O(n) head outputs on random values, padded rows zero
    v = torch.randn(B, N, len(PATTERNS), 5, generator=gen)            # token-major layout
    fast = apply_patterns(PATTERNS, v, lengths, wid).double().numpy()
    slow = expected @ v.double().numpy().transpose(0, 2, 1, 3)        # (B, H, N, 5)
    np.testing.assert_allclose(fast, slow.transpose(0, 2, 1, 3), atol=1e-5)


def test_long_sentence_precision():
    # (j+1)^3 reaches ~8.6e9 at n=2048: prefix sums must not lose the small terms
    n = 2048
    v = torch.randn(1, 2, n, 3, dtype=torch.float64)
    out = apply_patterns(("left", "right"), v.float().transpose(1, 2), torch.tensor([n])).transpose(1, 2)
    j = torch.arange(n, dtype=torch.float64)
    i = 100
    w = (j[: i - 1] + 1) ** 3
    np.testing.assert_allclose(out[0, 0, i].double().numpy(), (w @ v[0, 0, : i - 1]) / w.sum(), rtol=1e-4)
    i = n - 100
    w = (n - j[i + 2:]) ** 3
    np.testing.assert_allclose(out[0, 1, i].double().numpy(), (w @ v[0, 1, i + 2:]) / w.sum(), rtol=1e-4)


def test_autograd_keeps_no_n_by_n_tensor():
    # linear memory: nothing of n x n elements is saved for backward (n = 1024)
    n, largest = 1024, []

    def pack(t):
        largest.append(t.numel())
        return t

    v = torch.randn(1, n, len(PATTERNS), 4, requires_grad=True)
    wid = (torch.arange(n) // 2).unsqueeze(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = apply_patterns(PATTERNS, v, torch.tensor([n])) + apply_patterns(PATTERNS, v, torch.tensor([n]), wid)
    out.sum().backward()
    assert max(largest) <= n * len(PATTERNS) * 4 and out.numel() == n * len(PATTERNS) * 4
