"""The head-kinds table, from the registries of :mod:`headlab.heads`."""
from __future__ import annotations

import inspect

SITE_LABELS = {"enc": "encoder", "dec": "decoder self", "cross": "cross"}


def _summary(cls) -> str:
    # a class without its own docstring would show its base class's
    doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "") or f"see `{cls.__module__}`"
    first = doc.split("\n\n")[0].replace("\n", " ").strip()
    return first.replace("|", "\\|")


def _row(name: str, cls, extra: str) -> str:
    # relative to headlab.heads, where every built-in kind lives: a narrower column
    where = f"{cls.__module__}.{cls.__qualname__}".removeprefix("headlab.heads.")
    sites = ", ".join(SITE_LABELS.get(site, site) for site in cls.sites)
    return f"| `{name}` | {sites} | {extra} | {_summary(cls)} | `{where}` |"


def heads_page() -> str:
    from headlab.heads import HEAD_KINDS, HEAD_MIXERS

    lines = ["| kind | sites | reads | what | class |", "|---|---|---|---|---|"]
    for name, cls in sorted(HEAD_KINDS.items()):
        reads = [word for word, flag in (("words", cls.needs_words), ("parse", cls.needs_syntax)) if flag]
        lines.append(_row(name, cls, ", ".join(reads) or "-"))
    lines.append("")
    lines += ["| mixer | sites | output | what | class |", "|---|---|---|---|---|"]
    for name, cls in sorted(HEAD_MIXERS.items()):
        lines.append(_row(name, cls, "replaces `final_linear`" if cls.replaces_output else "-"))
    lines.append("")
    return "\n".join(lines)


PLUG_IN = "How kinds plug in"


def plug_in_page() -> str:
    """The "How kinds plug in" section of :mod:`headlab.heads`' docstring, as reST (the rest
    of that docstring is a plain-text file list, which reST would misread)."""
    import headlab.heads

    doc = inspect.getdoc(headlab.heads) or ""
    _, found, rest = doc.partition(PLUG_IN)
    if not found:       # the docstring was rewritten: show it as it is
        return "```text\n" + doc + "\n```\n"
    body = rest.lstrip().split("\n", 1)[1] if rest.lstrip().startswith("-") else rest
    return "```{eval-rst}\n" + body.strip("\n") + "\n```\n"
