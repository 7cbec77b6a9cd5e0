"""The one error policy shared by the data subcommands' ``main`` functions."""
from __future__ import annotations

import sys
from typing import Callable

from headlab.errors import HeadlabError


def run(entry: Callable[[], int | None]) -> int:
    """Run ``entry``; a :class:`HeadlabError` becomes one line ``headlab: <message>`` and exit 1."""
    try:
        return int(entry() or 0)
    except HeadlabError as err:
        print(f"headlab: {err}", file=sys.stderr)
        return 1
