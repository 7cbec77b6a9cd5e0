"""One ``headlab`` argparse parser for sphinx-argparse, built from the subcommands' own parsers.

Each subcommand builds its parser inside ``main(argv)`` (:mod:`headlab.cli`), so the parser is
caught, not rebuilt: while ``main`` runs, ``parse_args`` raises with the parser in hand, before
any argument is read or any work is done. ``train``, ``translate`` and ``build-vocab`` parse
with OpenNMT-py's parser (a thousand options); for them the page lists headlab's own options
(:mod:`headlab.engine.opts`) and says how to see the rest.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re

#: commands run by OpenNMT-py's own parser -> headlab's option groups added to it
ONMT_COMMANDS = {"train": ("model_opts", "train_opts"), "translate": ("translate_opts",), "build-vocab": ()}
#: more options than this: OpenNMT-py's parser, whatever the command
MANY_OPTIONS = 150


class _Caught(BaseException):
    """Not an Exception: a subcommand's ``except Exception`` must not swallow it."""

    def __init__(self, parser):
        self.parser = parser


def _catch(parser, *args, **kwargs):
    raise _Caught(parser)


def _catch_parser(name: str, module: str):
    mod = importlib.import_module(module)
    entry = getattr(mod, "main_" + name.replace("-", "_"), None) or mod.main
    saved = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    argparse.ArgumentParser.parse_args = argparse.ArgumentParser.parse_known_args = _catch
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            entry([])
    except _Caught as caught:
        return caught.parser
    except Exception:   # noqa: BLE001  (documented below from its one-line help)
        return None
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = saved
    return None


def _plain(text):
    """Option help is plain text, but sphinx-argparse reads it as reST, where ``L = a * b``
    opens an emphasis and ``w_k`` is a link: escape what reST would read."""
    if not isinstance(text, str):
        return text
    for char in "\\*`|_":
        text = text.replace(char, "\\" + char)
    return text


def _no_roles(text):
    """sphinx-argparse parses descriptions outside Sphinx, where ``:mod:`x``` fails: keep
    the target as literal text."""
    if not isinstance(text, str):
        return text
    return re.sub(r":[\w:]+:`~?([^`]+)`", r"``\1``", text)


def _escape_help(parser) -> None:
    """Escape every option's help; descriptions are docstrings (reST) without Sphinx roles."""
    parser.description, parser.epilog = _no_roles(parser.description), _no_roles(parser.epilog)
    for action in parser._actions:
        action.help = _plain(action.help)
        for sub in getattr(action, "_name_parser_map", {}).values():
            _escape_help(sub)
        for choice in getattr(action, "_choices_actions", []):
            choice.help = _plain(choice.help)
    for group in parser._action_groups:
        group.description = _plain(group.description)


def _onmt_parser(name: str, help_: str):
    import configargparse

    from headlab.engine import opts

    onmt = "onmt_" + name.replace("-", "_")
    parser = configargparse.ArgumentParser(
        prog=f"headlab {name}",
        description=f"{help_}. Every option of OpenNMT-py's ``{onmt}`` is accepted too "
                    f"(``{onmt} --help`` lists them); below are the options headlab adds.")
    for group in ONMT_COMMANDS.get(name, ()):
        getattr(opts, group)(parser)
    return parser


def cli_parser() -> argparse.ArgumentParser:
    from headlab.cli import COMMANDS

    top = argparse.ArgumentParser(prog="headlab", description="The ``headlab`` command: one entry "
                                  "point, lazily imported subcommands (``headlab --help`` lists them).")
    commands = top.add_subparsers(title="commands", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        parser = _catch_parser(name, module)
        if name in ONMT_COMMANDS or parser is None or len(parser._actions) > MANY_OPTIONS:
            parser = _onmt_parser(name, help_) if name in ONMT_COMMANDS else None
        stand_in = commands.add_parser(name, help=help_, description=help_)
        if parser is not None:
            _escape_help(parser)
            parser.prog = f"headlab {name}"
            commands._name_parser_map[name] = parser
        else:
            stand_in.epilog = f"See ``headlab {name} --help``."
    return top
