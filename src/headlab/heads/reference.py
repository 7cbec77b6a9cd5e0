"""Dense n x n reference of paper A's fixed patterns, written straight from §3.2.

Slow (Python loops, exact ``fractions.Fraction``) and independent of
:mod:`headlab.heads.patterns`; the tests check the O(n) code against it. Same edge-case
rules as documented there.
"""
from __future__ import annotations

from fractions import Fraction


def _cube_span(first: int, last: int, weight) -> dict[int, Fraction]:
    """Normalised weights over positions first..last (inclusive); empty dict if none."""
    span = range(first, last + 1)
    total = sum(weight(j) for j in span)
    return {j: Fraction(weight(j), total) for j in span} if total else {}


def pattern_row(name: str, i: int, n: int) -> dict[int, Fraction]:
    """Row i of pattern ``name`` for a sequence of n units: {position: weight}."""
    if name == "current":
        row = {i: Fraction(1)}
    elif name == "previous":
        row = {i - 1: Fraction(1)} if i - 1 >= 0 else {}
    elif name == "next":
        row = {i + 1: Fraction(1)} if i + 1 <= n - 1 else {}
    elif name == "left":          # f(j) = (j+1)^3 / sum_{0..i-2} (j+1)^3
        row = _cube_span(0, i - 2, lambda j: (j + 1) ** 3)
    elif name == "right":         # flipped: position j plays the role of n-1-j
        row = _cube_span(i + 2, n - 1, lambda j: (n - j) ** 3)
    elif name == "end":
        row = _cube_span(0, n - 1, lambda j: (j + 1) ** 3)
    elif name == "start":
        row = _cube_span(0, n - 1, lambda j: (n - j) ** 3)
    elif name == "last":
        row = {n - 1: Fraction(1)}
    else:
        raise KeyError(name)
    return row or {i: Fraction(1)}          # empty span: attend to the token itself


def token_matrix(name: str, n: int) -> list[list[Fraction]]:
    matrix = [[Fraction(0)] * n for _ in range(n)]
    for i in range(n):
        for j, weight in pattern_row(name, i, n).items():
            matrix[i][j] = weight
    return matrix


def word_groups(tokens: list[str]) -> list[list[int]]:
    """Piece positions of each word: a piece ending in '@@' joins the next one."""
    groups: list[list[int]] = []
    joined = False
    for pos, token in enumerate(tokens):
        if joined:
            groups[-1].append(pos)
        else:
            groups.append([pos])
        joined = token.endswith("@@")
    return groups


def word_matrix(name: str, groups: list[list[int]]) -> list[list[Fraction]]:
    """Word-based pattern on pieces: every piece of word u gets word u's row; an attended
    word's weight is spread uniformly over its pieces."""
    n = sum(map(len, groups))
    matrix = [[Fraction(0)] * n for _ in range(n)]
    for u, pieces in enumerate(groups):
        row = pattern_row(name, u, len(groups))
        for i in pieces:
            for w, weight in row.items():
                for j in groups[w]:
                    matrix[i][j] = weight / len(groups[w])
    return matrix
