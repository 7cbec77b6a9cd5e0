"""Head spec grammar: one string describes every encoder layer's self-attention heads.

The same string is used in configs (``enc_heads: 7Ftoken+1L``), on the command line
(``-enc_heads``, ``headlab params --heads``) and in checkpoints (it is a model option).

Grammar (whitespace is ignored)::

    spec   := group ("," group)*
    group  := [REPEAT "*"] "(" layer ")"  |  [REPEAT "*"] layer
    layer  := term ("+" term)* ("|" MIXER)*
    term   := [COUNT] KIND

* ``KIND`` is a name registered with :func:`register_head_kind` (``L``, ``Lwide``,
  ``Ftoken``, ``Fword``, ...), ``MIXER`` one registered with :func:`register_head_mixer`
  (``gate``). Names are case-sensitive; ``COUNT`` defaults to 1.
* A spec with a single group and no ``REPEAT`` is used for every encoder layer
  (``7Ftoken+1L`` = paper A's model). Otherwise the groups, expanded by their repeats,
  must give exactly one layer per encoder layer: ``8L,8L,4*(7Ftoken+1L)`` or
  ``6*(7Ftoken+1L)``.
* Heads are numbered 1.. in the order of the terms (``7Ftoken+1L``: heads 1-7 are the
  fixed patterns 1-7 of paper A §3.2, head 8 is learned, as in paper A Table 4).
* ``|gate`` etc. add a layer-level mixer acting on the stacked head outputs.

Paper A's names: ``8L``, ``7Ftoken+1L``, ``7Fword+1L``, ``1L``, ``1Lwide``, ``8Ftoken``,
``8Fword``.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from headlab.errors import ConfigError

#: kind name -> HeadGroup subclass (see headlab.heads.base)
HEAD_KINDS: dict[str, type] = {}
#: mixer name -> HeadMixer subclass
HEAD_MIXERS: dict[str, type] = {}


def register_head_kind(name: str):
    """Class decorator (OpenNMT-style) registering a head kind under ``name``."""
    def wrap(cls):
        if name in HEAD_KINDS and HEAD_KINDS[name] is not cls:
            raise ValueError(f"head kind {name!r} is already registered")
        HEAD_KINDS[name] = cls
        cls.kind_name = name
        return cls
    return wrap


def register_head_mixer(name: str):
    """Class decorator registering a layer-level head mixer (gates, DHICM, ...)."""
    def wrap(cls):
        if name in HEAD_MIXERS and HEAD_MIXERS[name] is not cls:
            raise ValueError(f"head mixer {name!r} is already registered")
        HEAD_MIXERS[name] = cls
        cls.mixer_name = name
        return cls
    return wrap


@dataclass(frozen=True)
class Term:
    count: int
    kind: str

    def __str__(self) -> str:
        return f"{self.count}{self.kind}"


@dataclass(frozen=True)
class LayerSpec:
    terms: tuple[Term, ...]
    mixers: tuple[str, ...] = field(default=())

    @property
    def num_heads(self) -> int:
        return sum(t.count for t in self.terms)

    def __str__(self) -> str:
        return "+".join(map(str, self.terms)) + "".join("|" + m for m in self.mixers)


_TERM = re.compile(r"^(\d*)([A-Za-z_][A-Za-z0-9_]*)$")
_GROUP = re.compile(r"^(?:(\d+)\*)?(?:\((.*)\)|(.*))$")


def _ensure_registered() -> None:
    # the built-in kinds register themselves on import
    import headlab.heads.kinds  # noqa: F401
    import headlab.heads.mixers  # noqa: F401


def _suggest(name: str, choices) -> str:
    same_case = [c for c in choices if c.lower() == name.lower()]
    close = same_case or difflib.get_close_matches(name, list(choices), n=1, cutoff=0.4)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return hint + "known: " + ", ".join(sorted(choices))


def _bad(spec: str, term: str, why: str) -> ConfigError:
    return ConfigError(f"bad head spec {spec!r}: term {term!r}: {why}", key="enc_heads")


def _parse_layer(spec: str, text: str) -> LayerSpec:
    parts = text.split("|")
    terms = []
    for raw in parts[0].split("+"):
        match = _TERM.match(raw)
        if not match:
            raise _bad(spec, raw, "expected [COUNT]KIND, e.g. '7Ftoken' or '1L' "
                                  "(paper A: 8L, 7Ftoken+1L, 7Fword+1L, 1L, 1Lwide, 8Ftoken, 8Fword)")
        count = int(match.group(1)) if match.group(1) else 1
        kind = match.group(2)
        if kind not in HEAD_KINDS:
            raise _bad(spec, raw, f"unknown head kind {kind!r}; " + _suggest(kind, HEAD_KINDS))
        if count < 1:
            raise _bad(spec, raw, "a head count must be at least 1")
        HEAD_KINDS[kind].check_count(count, lambda why, raw=raw: _bad(spec, raw, why))
        terms.append(Term(count, kind))
    mixers = []
    for raw in parts[1:]:
        if raw not in HEAD_MIXERS:
            raise _bad(spec, "|" + raw, f"unknown head mixer {raw!r}; " + _suggest(raw, HEAD_MIXERS))
        mixers.append(raw)
    return LayerSpec(tuple(terms), tuple(mixers))


def parse_spec(spec: str, num_layers: int | None = None) -> list[LayerSpec]:
    """Parse ``spec`` into one :class:`LayerSpec` per encoder layer.

    ``num_layers`` (the encoder depth) expands a single-layer spec and checks per-layer
    specs; without it a single-layer spec gives a one-element list.
    """
    _ensure_registered()
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"empty head spec {spec!r}; e.g. '8L' or '7Ftoken+1L'", key="enc_heads")
    text = re.sub(r"\s+", "", spec)
    groups = _split_groups(spec, text)
    layers: list[LayerSpec] = []
    repeated = len(groups) > 1
    for group in groups:
        match = _GROUP.match(group)
        repeat = int(match.group(1)) if match.group(1) else 1
        repeated |= match.group(1) is not None
        body = match.group(2) if match.group(2) is not None else match.group(3)
        if repeat < 1:
            raise _bad(spec, group, "a repeat count must be at least 1")
        if not body or "(" in body or ")" in body:
            raise _bad(spec, group, "expected LAYER or N*(LAYER), e.g. '6*(7Ftoken+1L)'")
        layers += [_parse_layer(spec, body)] * repeat
    if num_layers is not None:
        if not repeated:
            layers = layers * num_layers
        elif len(layers) != num_layers:
            raise ConfigError(f"bad head spec {spec!r}: it describes {len(layers)} layers but "
                              f"the encoder has {num_layers}; give one layer per encoder layer "
                              f"or a single layer spec used for all", key="enc_heads")
    return layers


def _split_groups(spec: str, text: str) -> list[str]:
    """Split on commas outside parentheses."""
    groups, depth, start = [], 0, 0
    for pos, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth < 0:
            raise _bad(spec, text, "unbalanced ')'")
        if char == "," and depth == 0:
            groups.append(text[start:pos])
            start = pos + 1
    if depth:
        raise _bad(spec, text, "unbalanced '('")
    groups.append(text[start:])
    for group in groups:
        if not group:
            raise _bad(spec, text, "empty layer between commas")
    return groups
