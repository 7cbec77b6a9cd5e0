"""The ``--configfile`` files read as snakemake will read them, first, by ``make run``.

Snakemake parses its config files before the Snakefile runs, so the workflow cannot improve
its messages: a YAML syntax error or an empty file is "Config file is not valid JSON or
YAML" / "... must be given as JSON or YAML with keys at top level" (neither file nor line),
and a file that does not exist is a 26-line traceback. Here each is one line naming the
file and line::

    python -m headlab.workflow.configfile config/config.yaml config/wide.yaml
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from headlab.errors import ConfigError, HeadlabError

DEFAULT = "config/config.yaml"


def read(path: str) -> dict:
    """The config mapping of one file; :class:`ConfigError` naming file and line otherwise."""
    if not Path(path).is_file():
        raise ConfigError(f"no such config file; pass --configfile {DEFAULT} (the embedded default) "
                          f"or a config of your own (CONFIG=... for make)", path=path)
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        what = err.problem or err.context
        if err.context and err.problem and err.context_mark:
            what += f" ({err.context} at line {err.context_mark.line + 1})"
        raise ConfigError(f"YAML syntax error: {what}", path=path, line=mark.line + 1 if mark else None) from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise ConfigError(f"not a YAML file: {str(err).splitlines()[0]}", path=path) from None
    if data is None:
        raise ConfigError(f"the config is empty; a config maps sections (corpora, studies, ...) to their "
                          f"settings, as {DEFAULT} does", path=path, line=1)
    if not isinstance(data, dict):
        raise ConfigError(f"a config must map sections to settings, not be a {type(data).__name__}",
                          path=path, line=1)
    return data


def main(argv: list[str]) -> int:
    if not argv:
        print(f"headlab: config error: no config file given; pass --configfile {DEFAULT}", file=sys.stderr)
        return 1
    for path in argv:
        try:
            read(path)
        except HeadlabError as err:
            print(f"headlab: config error: {err}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
