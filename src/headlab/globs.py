"""Whether two ``fnmatch`` patterns can match one string: an ``atlas.models`` pattern against
a model a search names only once its stages have run (:meth:`headlab.studies.base.Study.later_models`),
whose unknown part is a placeholder.

A pattern is a sequence of tokens: a star over a set of characters (``*``: any; the
placeholder :data:`HEAD_MASK`: 0, 1 and ``.``) or one character of a set (a literal, ``?``,
a class ``[...]``). Two patterns overlap when the product of their automata reaches both
ends."""
from __future__ import annotations

from collections import deque

#: in a later model's path, the head mask a search chooses (paper D's pruned fine-tunes):
#: any run of ``0``, ``1`` and ``.`` (:func:`headlab.heads.prune.mask_string`)
HEAD_MASK = "\ue000"

_ANY = (frozenset(), True)                  # (characters, negated): every character
_STARS = {"*": _ANY, HEAD_MASK: (frozenset("01."), False)}


def tokens(pattern: str) -> list[tuple]:
    """``pattern`` as fnmatch reads it: ``("star", chars, negated)`` (runs of ``*``
    collapsed) and ``("one", chars, negated)``."""
    out: list[tuple] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char in _STARS:
            token = ("star", *_STARS[char])
            if not out or out[-1] != token:
                out.append(token)
        elif char == "?":
            out.append(("one", *_ANY))
        elif char == "[" and (end := _class_end(pattern, index)) is not None:
            body = pattern[index + 1:end]
            negated = body.startswith("!")
            out.append(("one", _members(body[1:] if negated else body), negated))
            index = end
        else:
            out.append(("one", frozenset(char), False))
        index += 1
    return out


def _class_end(pattern: str, start: int) -> int | None:
    """Index of the ``]`` closing the class opened at ``start`` (fnmatch's rules: a ``]``
    right after ``[`` or ``[!`` is a member), or None: the ``[`` is then a literal."""
    index = start + 1
    if index < len(pattern) and pattern[index] == "!":
        index += 1
    if index < len(pattern) and pattern[index] == "]":
        index += 1
    end = pattern.find("]", index)
    return None if end < 0 else end


def _members(body: str) -> frozenset:
    chars, index = set(), 0
    while index < len(body):
        if index + 2 < len(body) and body[index + 1] == "-":
            chars.update(chr(code) for code in range(ord(body[index]), ord(body[index + 2]) + 1))
            index += 3
        else:
            chars.add(body[index])
            index += 1
    return frozenset(chars)


def _share(first: tuple, second: tuple) -> bool:
    """Can one character belong to both sets (each ``(chars, negated)``)?"""
    (chars_a, negated_a), (chars_b, negated_b) = first, second
    if negated_a and negated_b:
        return True         # the complement of two finite sets is never empty
    if negated_a:
        return bool(chars_b - chars_a)
    if negated_b:
        return bool(chars_a - chars_b)
    return bool(chars_a & chars_b)


def overlap(first: str, second: str) -> bool:
    """Is there a string that both patterns match?"""
    left, right = tokens(first), tokens(second)
    seen, todo = {(0, 0)}, deque([(0, 0)])
    while todo:
        i, j = todo.popleft()
        if i == len(left) and j == len(right):
            return True
        steps = []
        if i < len(left) and left[i][0] == "star":
            steps.append((i + 1, j))                # the star reads nothing more
        if j < len(right) and right[j][0] == "star":
            steps.append((i, j + 1))
        # one character read by both: a star keeps its place, a single character moves on
        if i < len(left) and j < len(right) and _share(left[i][1:], right[j][1:]):
            step = (i + (left[i][0] == "one"), j + (right[j][0] == "one"))
            if step != (i, j):
                steps.append(step)
        for state in steps:
            if state not in seen:
                seen.add(state)
                todo.append(state)
    return False
