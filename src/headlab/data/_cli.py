"""The one error policy shared by the data subcommands' ``main`` functions."""
from __future__ import annotations

import sys
from typing import Callable

from headlab.errors import HeadlabError


def run(entry: Callable[[], int | None], command: str) -> int:
    """Run ``entry``; a :class:`HeadlabError` becomes one line ``headlab COMMAND: <message>``
    and exit 1, as :func:`headlab.cli.main` says it for every other subcommand (here too when
    a data step's ``main`` is called on its own, as the workflow's tests do)."""
    try:
        return int(entry() or 0)
    except HeadlabError as err:
        print(f"headlab {command}: {err}", file=sys.stderr)
        return 1
