"""User-facing errors: one class, one clear message naming the file, line or key."""
from __future__ import annotations


class HeadlabError(Exception):
    """An error caused by the user's input (data, config, options), not by a bug.

    The CLI prints ``headlab: <message>`` and exits 1, without a traceback.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 key: str | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        if key is not None:
            where += f"[{key}] "
        super().__init__(where + message)
        self.path, self.line, self.key = path, line, key
        self.message = message      # without the file, line and key: for re-raising under another key


class ConfigError(HeadlabError):
    """Bad workflow or model configuration."""


class DataError(HeadlabError):
    """Bad or missing data (corpora, checksums, suites)."""
