"""One option style for headlab's own subcommands: ``--long-name`` (``--model``,
``--max-sents``), as in ``gates``, ``params`` or ``vocab``.

The OpenNMT-py wrappers (``train``, ``translate``, ``build-vocab``) keep OpenNMT-py's
single-dash options (``-config``, ``-model``): they are OpenNMT-py's. Elsewhere, the
single-dash spellings of earlier versions (``score -model``, ``export-attention
-max_sents``) still work, with a note on stderr naming the new one, so scripts and
Snakefiles written for them keep running.
"""
from __future__ import annotations

import argparse
import sys


class CommandParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` for ``headlab COMMAND``: its usage names the command, and an
    old ``-long_name`` spelling of a ``--long-name`` option is accepted with a note."""

    def __init__(self, command: str, description: str | None = None, **kwargs):
        super().__init__(prog=f"headlab {command}", description=description, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self._current_spelling(argv), namespace)

    def _current_spelling(self, argv: list[str]) -> list[str]:
        long_options = {flag for action in self._actions for flag in action.option_strings if flag.startswith("--")}
        current = []
        for token in argv:
            name, equals, value = token.partition("=")
            if name.startswith("-") and not name.startswith("--") and len(name) > 2:
                renamed = "--" + name[1:].replace("_", "-")
                if renamed in long_options:
                    print(f"{self.prog}: note: {name} is now spelled {renamed}", file=sys.stderr)
                    token = renamed + equals + value
            current.append(token)
        return current


def bounded(kind: type, low: float | None = None, high: float | None = None, *, open_low: bool = False,
            open_high: bool = False, also: tuple = (), described: str | None = None):
    """An argparse ``type`` for a number of ``kind`` (int or float) in [``low``, ``high``]
    (an end excluded where ``open_low`` / ``open_high``; None: unbounded), or one of the
    values in ``also`` (``--confidence 0``: none). argparse checks no range, and a number
    outside one fails far from the option (a division by zero, an index error inside
    compare-mt) or, worse, is used silently (a significance level of 2)."""
    def parse(text: str):
        try:
            number = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        inside = ((low is None or (number > low if open_low else number >= low))
                  and (high is None or (number < high if open_high else number <= high)))
        if not inside and number not in also:
            raise argparse.ArgumentTypeError(f"{text}: must be {described or _interval()}")
        return number

    def _interval() -> str:
        if high is None:
            return f"{'above' if open_low else 'at least'} {low}"
        return f"in {'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"

    return parse
