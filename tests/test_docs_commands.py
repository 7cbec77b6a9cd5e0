"""Every snakemake command the docs show, read as snakemake reads it (its own argument parser,
no run): ``--config`` (and ``--set-threads``) take every word after them, so a target written
after them is taken for a config entry and the command fails ("Config entries have to be
defined as name=value pairs"); each config entry names a key of the schema; each config file
and profile the command names ships."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml
from snakemake.cli import get_argument_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PAGES = [page for page in PAGES if "_build" not in page.parts and "_generated" not in page.parts]
#: names the docs use for a file of the reader's own
PLACEHOLDERS = {"CONFIG", "my.yaml", "mine.yaml"}


def _commands() -> list[tuple[str, str]]:
    """(page, command) for each snakemake command in a fenced block or an inline code span."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        spans = [block.replace("\\\n", " ") for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.S)]
        lines = [line for span in spans for line in _logical_lines(span)]
        lines += re.findall(r"(?<!`)`([^`\n]*snakemake [^`\n]*)`(?!`)", re.sub(r"```.*?```", "", text, flags=re.S))
        for line in lines:
            line = line.split(" #")[0].strip()
            match = re.search(r"(?:^|&& |; )((?:\.venv/bin/)?snakemake\s+\S.*)$", line)
            if match and "..." not in match[1] and "…" not in match[1]:
                found.append((page.relative_to(ROOT).as_posix(), match[1].split(" && ")[0].split("; ")[0]))
    return found


def _logical_lines(block: str) -> list[str]:
    """A block's lines, a quoted argument over several lines joined into one."""
    lines, pending = [], ""
    for line in block.splitlines():
        pending = f"{pending} {line.strip()}" if pending else line
        if pending.count("'") % 2 == 0:
            lines.append(pending)
            pending = ""
    return lines + ([pending] if pending else [])


COMMANDS = _commands()


def test_the_docs_show_snakemake_commands():
    assert len(COMMANDS) >= 15 and any("--config" in command for _, command in COMMANDS)


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{page}:{i}" for i, (page, _) in enumerate(COMMANDS)])
def test_a_documented_snakemake_command_reads_as_it_means(page, command):
    # `--cores N`: the reader's number
    words = ["2" if word == "N" else word for word in shlex.split(command)[1:]]
    args = get_argument_parser().parse_args(words)
    keys = set(yaml.safe_load((ROOT / "config/schema.yaml").read_text())["properties"])
    for entry in args.config or []:
        key = entry.split("=", 1)[0]
        assert "=" in entry and key in keys, f"{page}: {command!r}: {entry!r} is read as a config entry"
    for path in args.configfile or []:
        assert str(path) in PLACEHOLDERS or (ROOT / path).is_file(), f"{page}: {command!r}: no {path}"
    for profile in args.profile or []:
        assert (ROOT / profile).is_dir(), f"{page}: {command!r}: no profile {profile}"
