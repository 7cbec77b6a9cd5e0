"""The ``--configfile`` files read as snakemake will read them, first, by ``make run``.

Snakemake parses its config files before the Snakefile runs, so the workflow cannot improve
its messages: a YAML syntax error or an empty file is "Config file is not valid JSON or
YAML" / "... must be given as JSON or YAML with keys at top level" (neither file nor line),
a file that does not exist is a 26-line traceback, and a key given twice in one mapping is
taken silently (PyYAML keeps the last value). Here each is one line naming the file and
line (and the key)::

    python -m headlab.workflow.configfile config/config.yaml config/wide.yaml
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import yaml

from headlab.errors import ConfigError, HeadlabError

DEFAULT = "config/config.yaml"


def read(path: str) -> dict:
    """The config mapping of one file; :class:`ConfigError` naming file and line otherwise."""
    if not Path(path).is_file():
        raise ConfigError(f"no such config file; pass --configfile {DEFAULT} (the embedded default) "
                          f"or a config of your own (CONFIG=... for make)", path=path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        check_duplicate_keys(yaml.compose(text, Loader=yaml.SafeLoader), path)
        data = yaml.safe_load(text)
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


def _mapping_items(node: yaml.MappingNode) -> Iterator[tuple[yaml.Node, yaml.Node]]:
    """The (key, value) nodes of a mapping as written (merge keys ``<<`` left out: YAML lets
    a mapping's own keys override merged ones)."""
    for key_node, value_node in node.value:
        if key_node.tag != "tag:yaml.org,2002:merge":
            yield key_node, value_node


def check_duplicate_keys(node: yaml.Node | None, path: str, prefix: str = "") -> None:
    """:class:`ConfigError` at the second of two equal keys of one mapping, naming its line
    and key path: PyYAML (and so snakemake) would keep the last value without a word."""
    if isinstance(node, yaml.MappingNode):
        first_line: dict[str, int] = {}
        for key_node, value_node in _mapping_items(node):
            key = str(key_node.value)
            key_path = f"{prefix}.{key}" if prefix else key
            line = key_node.start_mark.line + 1
            if key in first_line:
                raise ConfigError(f"key {key!r} is given twice (first at line {first_line[key]}); YAML would "
                                  f"keep the last value silently: keep one", path=path, line=line, key=key_path)
            first_line[key] = line
            check_duplicate_keys(value_node, path, key_path)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            check_duplicate_keys(item, path, f"{prefix}[{index}]")


def line_of(path: str, key_path: list) -> int | None:
    """The line of ``path`` where the value at ``key_path`` (mapping keys and list indices,
    as jsonschema gives them) is written; the line of its deepest written parent when the
    file does not hold it; None when unreadable."""
    try:
        node = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return node_line(node, key_path)


def node_line(node, key_path: list) -> int | None:
    """:func:`line_of` in a composed YAML node (``yaml.compose``)."""
    line = None
    for part in key_path:
        if isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in _mapping_items(node) if str(k.value) == str(part)]
            if not found:
                break
            line, node = found[-1][0].start_mark.line + 1, found[-1][1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


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
