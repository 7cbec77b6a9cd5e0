"""Head spec grammar: one string describes the heads of every layer of one attention site.

There are three sites (:data:`SITES`): encoder self-attention (``-enc_heads``), decoder
self-attention (``-dec_heads``) and decoder cross-attention (``-cross_heads``), each with
its own spec. The same strings are used in configs, on the command line
(``headlab params --heads``) and in checkpoints (they are model options).

Grammar (whitespace is ignored)::

    spec   := group (("," | ".") group)*
    group  := [REPEAT] "*" "(" layer ")"  |  [REPEAT "*"] layer
    layer  := term ("+" term)* (("|" | "~") MIXER)*
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
* ``|gate`` etc. add a layer-level mixer acting on the stacked head outputs; ``~`` is the
  same as ``|`` and ``.`` the same as ``,`` (model paths use them: no shell reads a pipe,
  no cluster job's wildcard list is split at a comma).
* ``*(LAYER)`` without a number fills the layers the other groups leave (none or more):
  ``*(8L),8L|dhicm`` is DHICM on the last layer whatever the depth (paper B §4.3). At most
  one such group.
* Kinds and mixers say which sites they serve (``sites``): paper A's fixed patterns read
  the whole source sentence, so they are encoder-only; learned heads, gates and DHICM
  serve all three sites.

Paper A's names: ``8L``, ``7Ftoken+1L``, ``7Fword+1L``, ``1L``, ``1Lwide``, ``8Ftoken``,
``8Fword``.
"""
from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import MutableMapping
from dataclasses import dataclass, field

from headlab.errors import ConfigError
from headlab.heads import builtin
from headlab.heads.builtin import Declared

#: attention sites and the option naming each one's head spec
SITES = {"enc": "enc_heads", "dec": "dec_heads", "cross": "cross_heads"}
SITE_NAMES = {"enc": "encoder self-attention", "dec": "decoder self-attention",
              "cross": "decoder cross-attention"}


class _Registry(MutableMapping):
    """Name -> class of the kinds (or mixers) specs may name. A built-in one is declared in
    :mod:`headlab.heads.builtin`: its name is known, and :meth:`facts` answers, before its
    module is imported; looking its class up imports the module. A class registered any
    other way (a plugin, a test's) is its own declaration."""

    def __init__(self, what: str, declared: dict[str, Declared]):
        self.what, self.declared, self.loaded = what, dict(declared), {}

    def __getitem__(self, name: str) -> type:
        if name not in self.loaded and name in self.declared:
            importlib.import_module(self.declared[name].module)
            if name not in self.loaded:
                raise LookupError(f"{self.declared[name].module} does not register the {self.what} {name!r} "
                                  f"that headlab.heads.builtin declares in it")
        return self.loaded[name]

    def __setitem__(self, name: str, cls: type) -> None:
        self.loaded[name] = cls

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self.loaded.pop(name, None)
        self.declared.pop(name, None)

    def __contains__(self, name) -> bool:
        return name in self.loaded or name in self.declared

    def __iter__(self):
        return iter(dict.fromkeys([*self.declared, *self.loaded]))

    def __len__(self) -> int:
        return len(set(self.declared) | set(self.loaded))

    def facts(self, name: str):
        """What a spec check reads of ``name`` (``sites``, ``needs_words``, ``needs_syntax``,
        ``check_count``; a mixer's ``replaces_output``, ``check_layer``), without importing
        a built-in's module: its declaration, else its registered class."""
        return self.declared[name] if name in self.declared else self.loaded[name]

    def register(self, name: str, cls: type) -> type:
        if name in self.loaded and self.loaded[name] is not cls:
            raise ValueError(f"{self.what} {name!r} is already registered")
        declared = self.declared.get(name)
        if declared is not None:
            if cls.__module__ != declared.module:
                raise ValueError(f"{self.what} {name!r} is declared in {declared.module} "
                                 f"(headlab.heads.builtin), not {cls.__module__}")
            own = [key for key in Declared.ATTRIBUTES if key in vars(cls)]
            if own:
                raise ValueError(f"{self.what} {name!r}: {', '.join(own)} come from its declaration in "
                                 f"headlab.heads.builtin, not from the class body")
            for key in Declared.ATTRIBUTES:
                setattr(cls, key, getattr(declared, key))
        self.loaded[name] = cls
        return cls


#: kind name -> HeadGroup subclass (see headlab.heads.base)
HEAD_KINDS = _Registry("head kind", builtin.KINDS)
#: mixer name -> HeadMixer subclass
HEAD_MIXERS = _Registry("head mixer", builtin.MIXERS)


def register_head_kind(name: str):
    """Class decorator (OpenNMT-style) registering a head kind under ``name``."""
    def wrap(cls):
        HEAD_KINDS.register(name, cls)
        cls.kind_name = name
        return cls
    return wrap


def register_head_mixer(name: str):
    """Class decorator registering a layer-level head mixer (gates, DHICM, ...)."""
    def wrap(cls):
        HEAD_MIXERS.register(name, cls)
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
_GROUP = re.compile(r"^(?:(\d*)\*)?(?:\((.*)\)|(.*))$")


def _suggest(name: str, choices) -> str:
    same_case = [c for c in choices if c.lower() == name.lower()]
    close = same_case or difflib.get_close_matches(name, list(choices), n=1, cutoff=0.4)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return hint + "known: " + ", ".join(sorted(choices))


def _bad(spec: str, term: str, why: str, site: str = "enc") -> ConfigError:
    return ConfigError(f"bad head spec {spec!r}: term {term!r}: {why}", key=SITES.get(site, "enc_heads"))


def _parse_layer(spec: str, text: str, site: str) -> LayerSpec:
    parts = text.replace("~", "|").split("|")
    terms = []
    for raw in parts[0].split("+"):
        match = _TERM.match(raw)
        if not match:
            raise _bad(spec, raw, "expected [COUNT]KIND, e.g. '7Ftoken' or '1L' "
                                  "(paper A: 8L, 7Ftoken+1L, 7Fword+1L, 1L, 1Lwide, 8Ftoken, 8Fword)", site)
        count = int(match.group(1)) if match.group(1) else 1
        kind = match.group(2)
        if kind not in HEAD_KINDS:
            raise _bad(spec, raw, f"unknown head kind {kind!r}; " + _suggest(kind, HEAD_KINDS), site)
        if count < 1:
            raise _bad(spec, raw, "a head count must be at least 1", site)
        facts = HEAD_KINDS.facts(kind)
        _check_site(facts, f"head kind {kind!r}", site, lambda why, raw=raw: _bad(spec, raw, why, site))
        facts.check_count(count, lambda why, raw=raw: _bad(spec, raw, why, site))
        terms.append(Term(count, kind))
    layer = LayerSpec(tuple(terms))
    mixers = []
    for raw in parts[1:]:
        if raw not in HEAD_MIXERS:
            raise _bad(spec, "|" + raw, f"unknown head mixer {raw!r}; " + _suggest(raw, HEAD_MIXERS), site)
        facts = HEAD_MIXERS.facts(raw)
        bad = lambda why, raw=raw: _bad(spec, "|" + raw, why, site)  # noqa: E731
        _check_site(facts, f"head mixer {raw!r}", site, bad)
        facts.check_layer(layer, bad)
        if mixers and getattr(HEAD_MIXERS.facts(mixers[-1]), "replaces_output", False):
            raise bad(f"{mixers[-1]!r} replaces the output projection, so it must be the last mixer")
        mixers.append(raw)
    return LayerSpec(tuple(terms), tuple(mixers))


def _check_site(facts, what: str, site: str, bad) -> None:
    sites = getattr(facts, "sites", tuple(SITES))
    if site not in sites:
        raise bad(f"{what} cannot be used in {SITE_NAMES.get(site, site)} (it serves: "
                  f"{', '.join(SITE_NAMES[s] for s in sites)})")


def parse_spec(spec: str, num_layers: int | None = None, site: str = "enc") -> list[LayerSpec]:
    """Parse ``spec`` into one :class:`LayerSpec` per layer of attention site ``site``.

    ``num_layers`` (the encoder or decoder depth) expands a single-layer spec, sizes a
    ``*(LAYER)`` fill group and checks per-layer specs; without it a single-layer spec
    gives a one-element list (and a fill group one layer).
    """
    key = SITES.get(site)
    if key is None:
        raise ConfigError(f"unknown attention site {site!r}; known: {', '.join(SITES)}")
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(f"empty head spec {spec!r}; e.g. '8L' or '7Ftoken+1L'", key=key)
    text = re.sub(r"\s+", "", spec)
    groups = _split_groups(spec, text, site)
    parsed: list[tuple[int | None, LayerSpec]] = []     # (repeat, layer); None = fill
    repeated = len(groups) > 1
    for group in groups:
        match = _GROUP.match(group)
        digits = match.group(1)
        repeat = None if digits == "" else int(digits) if digits else 1
        repeated |= digits is not None
        body = match.group(2) if match.group(2) is not None else match.group(3)
        if repeat is not None and repeat < 1:
            raise _bad(spec, group, "a repeat count must be at least 1", site)
        if not body or "(" in body or ")" in body:
            raise _bad(spec, group, "expected LAYER, N*(LAYER) or *(LAYER), e.g. '6*(7Ftoken+1L)'", site)
        parsed.append((repeat, _parse_layer(spec, body, site)))
    fills = [layer for repeat, layer in parsed if repeat is None]
    if len(fills) > 1:
        raise _bad(spec, text, "at most one '*(LAYER)' group may fill the remaining layers", site)
    fixed = sum(repeat for repeat, _ in parsed if repeat is not None)
    fill = 1 if num_layers is None else num_layers - fixed
    if fills and fill < 0:
        raise ConfigError(f"bad head spec {spec!r}: the other groups already describe {fixed} "
                          f"layers, more than the {num_layers} layers of the {SITE_NAMES[site]}", key=key)
    layers = [layer for repeat, layer in parsed for _ in range(fill if repeat is None else repeat)]
    if num_layers is not None:
        if not repeated:
            layers = layers * num_layers
        elif len(layers) != num_layers:
            raise ConfigError(f"bad head spec {spec!r}: it describes {len(layers)} layers but "
                              f"the {SITE_NAMES[site]} has {num_layers}; give one layer per layer, "
                              f"a single layer spec used for all, or a '*(LAYER)' group", key=key)
    return layers


def _split_groups(spec: str, text: str, site: str = "enc") -> list[str]:
    """Split on commas outside parentheses."""
    groups, depth, start = [], 0, 0
    for pos, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth < 0:
            raise _bad(spec, text, "unbalanced ')'", site)
        if char in ",." and depth == 0:
            groups.append(text[start:pos])
            start = pos + 1
    if depth:
        raise _bad(spec, text, "unbalanced '('", site)
    groups.append(text[start:])
    for group in groups:
        if not group:
            raise _bad(spec, text, "empty layer between commas", site)
    return groups

def _any_kind(heads: str, flag: str) -> bool:
    from headlab.naming import parse_heads_name

    for site, spec in parse_heads_name(str(heads)).items():
        for layer in parse_spec(spec, None, site=site):
            if any(getattr(HEAD_KINDS.facts(t.kind), flag, False) for t in layer.terms):
                return True
    return False


def kinds_used(heads: str) -> set[str]:
    """The kinds and mixers of a model path's head specs (``ENC[@dec=..][@cross=..]``, the
    sites not named being :data:`headlab.naming.STOCK_HEADS`), at every site."""
    from headlab.naming import parse_heads_name

    return {name for site, spec in parse_heads_name(str(heads)).items() for layer in parse_spec(spec, None, site=site)
            for name in (*(term.kind for term in layer.terms), *layer.mixers)}


def needs_syntax(heads: str) -> bool:
    """True if a model path's head specs (``ENC[@dec=..][@cross=..]``, or one spec) use a
    head kind whose class sets ``needs_syntax = True``: such a model trains and translates
    on the featured source files."""
    return _any_kind(heads, "needs_syntax")


def needs_words(heads: str) -> bool:
    """True if a head kind of the specs reads word boundaries (``needs_words``: Fword and the
    syntax kinds): such a model's source carries the word-boundary column
    (:data:`headlab.heads.side.WORD_COLUMN`)."""
    return _any_kind(heads, "needs_words")


def feature_columns(heads: str) -> tuple[str, ...]:
    """The source-feature columns of a model with these head specs (``side.model_columns``)."""
    from headlab.heads.side import model_columns
    return model_columns(needs_words(heads), needs_syntax(heads))
