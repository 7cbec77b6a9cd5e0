"""The built-in head kinds and mixers, declared: the module that defines each, and what a
spec check needs to know of it (the sites it serves, whether it reads word boundaries or
the parse, how many heads it may have), known without importing that module.

The modules build torch modules, and importing torch costs a process 1-2 CPU-s. The
workflow checks every head spec of a config when it builds the DAG, in every snakemake
start (a dry run, every job of a SLURM run), and decides from these facts which models
read featured sources; nothing there runs a head. So the registry
(:mod:`headlab.heads.spec`) reads a built-in kind's facts here, and imports its module when
a model is built. ``register_head_kind`` gives the class these facts as its attributes
(``sites``, ``needs_words``, ``needs_syntax``; ``replaces_output`` for a mixer), and the
class body does not set them: one place says them. A kind registered elsewhere (a
plugin, the docs' tutorial) declares them in its own class body, as before.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

ALL_SITES = ("enc", "dec", "cross")
ENCODER = ("enc",)

#: paper A's fixed patterns in its order (head k of ``kFtoken``/``kFword`` is the k-th);
#: :mod:`headlab.heads.patterns` computes them
FIXED_PATTERNS = ("current", "previous", "next", "left", "right", "end", "start", "last")


@dataclass(frozen=True)
class Declared:
    """One kind's or mixer's entry: its module, and the facts a spec check reads."""

    module: str
    sites: tuple[str, ...] = ALL_SITES
    #: kinds: reads ``ctx.word_ids`` (the source's word-boundary column)
    needs_words: bool = False
    #: kinds: reads the source parse (``ctx.side``; paper C)
    needs_syntax: bool = False
    #: kinds: the most heads one term may have (None: any number), and why
    most_heads: int | None = None
    most_heads_why: str = ""
    #: mixers: replaces the layer's output projection (it must come last)
    replaces_output: bool = False
    #: mixers: the fewest heads the layer must have, and why
    fewest_heads: int = 1
    fewest_heads_why: str = ""

    #: the facts a registered class takes as its attributes
    ATTRIBUTES = ("sites", "needs_words", "needs_syntax", "replaces_output")

    def check_count(self, count: int, bad: Callable[[str], Exception]) -> None:
        if self.most_heads is not None and count > self.most_heads:
            raise bad(f"{self.most_heads_why}, not {count}")

    def check_layer(self, layer, bad: Callable[[str], Exception]) -> None:
        if layer.num_heads < self.fewest_heads:
            raise bad(self.fewest_heads_why)


_FIXED = dict(sites=ENCODER, most_heads=len(FIXED_PATTERNS),
              most_heads_why=f"paper A defines {len(FIXED_PATTERNS)} fixed patterns ({', '.join(FIXED_PATTERNS)})")
_SYNTAX = dict(sites=ENCODER, needs_words=True, needs_syntax=True)

#: kind name -> its declaration
KINDS = {
    "L": Declared("headlab.heads.kinds"),
    "Lwide": Declared("headlab.heads.kinds"),
    # the patterns look at following tokens (not causal) and at positions of the queries'
    # own sentence (not a cross-attention)
    "Ftoken": Declared("headlab.heads.kinds", **_FIXED),
    "Fword": Declared("headlab.heads.kinds", needs_words=True, **_FIXED),
    "DEA": Declared("headlab.heads.sea", **_SYNTAX),
    "LPEA": Declared("headlab.heads.sea", **_SYNTAX),
    "RelPos": Declared("headlab.heads.relpos", sites=ENCODER),
    "Local": Declared("headlab.heads.localness", sites=ENCODER),
    # RHE labels each head per sentence from the parse, whatever its biased attention
    "RHEdea": Declared("headlab.heads.rhe", **_SYNTAX),
    "RHElpea": Declared("headlab.heads.rhe", **_SYNTAX),
    "RHErel": Declared("headlab.heads.rhe", **_SYNTAX),
    "RHEloc": Declared("headlab.heads.rhe", **_SYNTAX),
}

#: mixer name -> its declaration
MIXERS = {
    "gate": Declared("headlab.heads.mixers"),
    "dhicm": Declared("headlab.heads.dhicm", replaces_output=True, fewest_heads=2,
                      fewest_heads_why="dhicm weighs heads against each other: the layer needs at least 2 heads"),
}
