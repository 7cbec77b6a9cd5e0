"""Synthetic parses for the syntax kinds' benchmarks: a random binary tree and random
dependency heads per sentence (the shapes matter, not the trees)."""
from __future__ import annotations


def random_facts(n_words: int, gen) -> dict[str, list[int]]:
    """Per-word parse facts (headlab.syntax.trees.word_facts) of a random binary
    constituency tree over ``n_words`` words and random dependency heads."""
    import torch
    from nltk import Tree

    from headlab.syntax.trees import word_facts

    def tree(lo, hi):                       # words lo..hi-1
        if hi - lo == 1:
            return Tree("X", [f"w{lo}"])
        cut = int(torch.randint(lo + 1, hi, (1,), generator=gen))
        return Tree("X", [tree(lo, cut), tree(cut, hi)])

    heads = torch.randint(0, n_words, (n_words,), generator=gen).tolist()
    return word_facts(tree(0, n_words), heads)


def synthetic_side(word_ids, lengths, gen):
    """ctx.side columns (headlab.syntax.trees.FEATURES) of random parses
    (:func:`random_facts`), the per-word facts copied onto each piece. Costs as real
    parses do (same shapes)."""
    import torch

    from headlab.syntax.trees import FEATURES

    B, N = word_ids.shape
    side = {name: torch.zeros(B, N, dtype=torch.long) for name in FEATURES}
    for b in range(B):
        n_words = int(word_ids[b, int(lengths[b]) - 1]) + 1
        facts = random_facts(n_words, gen)
        pieces = word_ids[b].clamp_max(n_words - 1)
        for name in FEATURES:
            side[name][b] = torch.tensor(facts[name])[pieces]
    return side
