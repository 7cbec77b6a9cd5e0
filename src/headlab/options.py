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
