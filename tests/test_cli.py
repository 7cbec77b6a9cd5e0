"""One CLI style: every subcommand's usage names it; headlab's own subcommands spell options
``--long-name`` (the old ``-long_name`` still works, with a note); the OpenNMT-py wrappers'
help shows headlab's options first and says how to see OpenNMT-py's."""
from __future__ import annotations

import re

import pytest

from headlab.cli import COMMANDS, main
from headlab.options import CommandParser

ONMT_WRAPPERS = {"train", "translate", "build-vocab"}


def _help(command: str, capsys) -> str:
    try:
        code = main([command, "--help"])
    except SystemExit as stop:          # argparse's own --help
        code = stop.code
    assert code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_names_itself_and_has_one_option_style(command, capsys):
    text = _help(command, capsys)
    assert text.startswith(f"usage: headlab {command} "), text[:200]
    if command in ONMT_WRAPPERS:
        # headlab's options, not OpenNMT-py's thousand lines, and the way to those
        assert len(text.splitlines()) < 150 and f"headlab {command} --help-onmt" in text
    else:
        single_dash = re.findall(r"^\s+(-[a-z][a-z_]+)\b", text, re.M)
        assert single_dash == [], f"headlab {command}: options spelled the OpenNMT-py way: {single_dash}"


#: the tools run as ``python -m`` (the GPU sitting's and the workflow's own): their help too
MODULE_TOOLS = ("headlab.workflow.gpu_plan", "headlab.workflow.rehearsal", "headlab.workflow.runlock",
                "headlab.workflow.sitting", "headlab.workflow.sitting_probe", "headlab.workflow.sitting_clock",
                "headlab.workflow.gpu_runner")


def _words(text: str) -> str:
    return " ".join(text.replace("``", "").split())


@pytest.mark.parametrize("command", sorted(COMMANDS) + list(MODULE_TOOLS))
def test_a_help_that_opens_with_the_modules_docstring_holds_its_whole_first_paragraph(command, capsys):
    """A description cut at the docstring's first line ends mid-sentence (``headlab
    gpu-bundle --help``: "...everything a GPU sitting needs that the offline")."""
    import importlib

    module = importlib.import_module(COMMANDS[command][0] if command in COMMANDS else command)
    if command in COMMANDS:
        text = _help(command, capsys)
    else:
        with pytest.raises(SystemExit):
            module.main(["--help"])
        text = capsys.readouterr().out
    first_line = _words(module.__doc__.splitlines()[0])
    if first_line in _words(text):
        assert _words(module.__doc__.split("\n\n")[0]) in _words(text), text[:600]


def test_onmt_help_is_there_on_request(capsys):
    assert main(["train", "--help-onmt"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("usage: headlab train ") and "-train_steps" in text and len(text.splitlines()) > 500


def test_old_spellings_still_work_with_a_note(capsys):
    parser = CommandParser("score", "test")
    parser.add_argument("--model", required=True)
    parser.add_argument("--max-sents", type=int)
    parser.add_argument("--gpu", type=int, default=-1)
    args, extra = parser.parse_known_args(["-model", "m.pt", "-max_sents=3", "--gpu", "-1", "-beam_size", "2"])
    assert (args.model, args.max_sents, args.gpu) == ("m.pt", 3, -1)
    assert extra == ["-beam_size", "2"]          # not ours: left to OpenNMT-py, unrenamed
    assert capsys.readouterr().err.splitlines() == ["headlab score: note: -model is now spelled --model",
                                                    "headlab score: note: -max_sents is now spelled --max-sents"]


def test_every_option_says_what_it_is_for():
    import ast
    from pathlib import Path

    package = Path(__file__).resolve().parents[1] / "src" / "headlab"
    silent = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            method, first = getattr(node.func, "attr", ""), node.args[0]
            flag = first.value if isinstance(first, ast.Constant) else ""
            # add_argument, or configargparse's alias (OpenNMT-py style: group.add("--x", "-x"))
            is_option = method == "add_argument" or (method == "add" and str(flag).startswith("-"))  # not set.add
            if is_option and not any(keyword.arg == "help" for keyword in node.keywords):
                silent.append(f"{path.relative_to(package)}:{node.lineno}")
    assert silent == []


@pytest.mark.parametrize("argv, message", [
    (["bleu", "--hyp", "{tmp}/missing.hyp", "--ref", "{tmp}/missing.ref", "--out", "{tmp}/out/bleu.json"],
     "headlab bleu: {tmp}/missing.hyp: No such file or directory"),
    (["vocab", "--train", "{tmp}/missing.src", "{tmp}/missing.tgt", "--out", "{tmp}/out/vocab.txt"],
     "headlab vocab: {tmp}/missing.src: cannot read the training file: no such file"),
    (["learning-curve", "--log", "{tmp}/notes.txt", "--out", "{tmp}/out/curve.csv"],
     "headlab learning-curve: {tmp}/notes.txt: no training step or validation in it: not an OpenNMT-py training "
     "log"),
    # the data steps' own error policy names the command too (it said only "headlab:")
    (["preprocess", "tokenize", "--lang", "en", "--in", "{tmp}/latin1.txt", "--out", "{tmp}/out/tok.en"],
     "headlab preprocess: {tmp}/latin1.txt:2: invalid UTF-8"),
])
def test_a_missing_or_wrong_input_file_is_one_line_and_writes_nothing(argv, message, tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("some notes\nnot a log\n")
    (tmp_path / "latin1.txt").write_bytes("fine\nd\u00e9j\u00e0\n".encode("latin-1"))
    assert main([part.format(tmp=tmp_path) for part in argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message.format(tmp=tmp_path)) and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()


def test_a_missing_file_the_command_line_did_not_name_keeps_its_traceback(monkeypatch):
    """Only a path the user gave is their input; a file of headlab's own that is missing is a bug."""
    import headlab.eval.bleu as bleu

    def broken(argv):
        open("/nonexistent/headlab-resource.json")

    monkeypatch.setattr(bleu, "main", broken)
    with pytest.raises(FileNotFoundError):
        main(["bleu", "--hyp", "h", "--ref", "r", "--out", "o"])


@pytest.mark.parametrize("argv, option, value, low", [
    (["preprocess", "tokenize", "--lang", "en", "--in", "raw.en", "--out", "{tmp}/out/tok.en"], "--jobs", "0", 1),
    (["preprocess", "bpe-learn", "--merges", "10", "--in", "raw.en", "--codes", "{tmp}/out/codes"],
     "--min-frequency", "0", 1),
    (["preprocess", "bpe-learn", "--in", "raw.en", "--codes", "{tmp}/out/codes"], "--merges", "0", 1),
    (["parse", "--in", "raw.en", "--out", "{tmp}/out/parses.jsonl"], "--batch-size", "0", 1),
    (["params", "--preset", "mini", "--layers", "2+2", "--out", "{tmp}/out/params.json"], "--src-vocab", "0", 1),
    (["params", "--preset", "mini", "--layers", "2+2", "--out", "{tmp}/out/params.json"], "--tgt-vocab", "-1", 1),
])
def test_a_count_below_its_bound_is_refused_before_anything_runs(argv, option, value, low, tmp_path, capsys):
    """Accepted before: --jobs 0 or -2 ran one process without a word, params counted the
    same parameters for a vocabulary of 0 or -4 words as for 4, spaCy took a batch of 0."""
    with pytest.raises(SystemExit) as caught:
        main([part.format(tmp=tmp_path) for part in argv] + [option, value])
    assert caught.value.code == 2
    assert f"argument {option}: {value}: must be at least {low}" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
