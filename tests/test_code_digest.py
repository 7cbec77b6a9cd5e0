"""A change to the code that renders a study or scores a translation reruns exactly what it
renders or scores (headlab.workflow.code_digest): the digests are params of those rules, so
Snakemake's params check sees what its code trigger (the rule's own text) cannot."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from headlab.cli import COMMANDS
from headlab.studies import STUDIES
from headlab.workflow import code_digest

PACKAGES = sorted(code_digest.package_of(study) for study in STUDIES.values())


@pytest.fixture()
def source(tmp_path) -> Path:
    """A copy of the installed package's source to change."""
    copy = tmp_path / "headlab"
    shutil.copytree(code_digest.SOURCE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _digests(root: Path) -> dict:
    return {name: code_digest.study_digest(name, root) for name in [*PACKAGES, None]}


def _append(path: Path, text: str = "\n# changed\n") -> None:
    path.write_text(path.read_text() + text)


def test_every_registered_study_has_a_package_of_its_own():
    assert len(set(PACKAGES)) == len(STUDIES) and {"paper_A", "paper_D"} <= set(PACKAGES)
    assert code_digest.study_digest("paper_A") == code_digest.study_digest("paper_A", code_digest.SOURCE)


@pytest.mark.parametrize("changed, rerendered", [
    ("studies/paper_A/claims.py", {"paper_A"}),
    ("studies/paper_D/reference.csv", {"paper_D"}),       # a paper's number corrected
    ("studies/effects.py", {*PACKAGES, None}),              # every study's claims and the summary
    ("report/build.py", {*PACKAGES, None}),
    ("eval/significance.py", {*PACKAGES, None}),
    ("syntax/profile.py", {*PACKAGES, None}),               # what the renderers read with
    ("engine/logs.py", {*PACKAGES, None}),
    ("engine/export.py", {"paper_B"}),                      # its figures load the attention exports
    ("heads/patterns.py", set()),                            # a head kind: a model's code, no rendering
    ("workflow/gpu_runner.py", set()),
    ("__init__.py", set()),                                  # the package's version and warning filters
])
def test_a_changed_file_changes_the_digests_of_exactly_the_studies_it_renders(source, changed, rerendered):
    before = _digests(source)
    _append(source / changed)
    after = _digests(source)
    assert {name for name in before if before[name] != after[name]} == rerendered


@pytest.mark.parametrize("spelling", ["import headlab.studies.paper_A.grid", "from headlab.studies import paper_A",
                                      "from headlab.studies.paper_A.grid import eight_fixed"])
def test_a_study_importing_another_studys_package_is_rerendered_with_it(source, spelling):
    before = _digests(source)
    _append(source / "studies/paper_D/outputs.py", f"\ndef _uses():\n    {spelling}  # noqa\n")
    moved = _digests(source)
    _append(source / "studies/paper_A/grid.py")
    after = _digests(source)
    assert {name for name in moved if moved[name] != after[name]} == {"paper_A", "paper_D"}
    assert moved["paper_B"] == before["paper_B"]


def test_the_digest_reads_content_not_time(source):
    before = _digests(source)
    claims = source / "studies/paper_A/claims.py"
    text = claims.read_bytes()
    claims.write_bytes(text)                               # a fresh clone's new mtimes
    assert _digests(source) == before
    assert claims in code_digest.code_files("paper_A", source)
    assert not [p for p in code_digest.code_files("paper_A", source) if "__pycache__" in p.parts]


def test_an_unknown_study_package_is_an_error_naming_it(source):
    with pytest.raises(ValueError, match="no study package .*paper_Z"):
        code_digest.study_digest("paper_Z", source)


SCORERS = ("bleu", "compare", "contrastive")


@pytest.mark.parametrize("changed, rescored", [
    ("eval/bleu.py", {"bleu", "compare"}),             # compare-mt's rows carry sacreBLEU's scores
    ("eval/mucow.py", {"contrastive"}),
    ("eval/common.py", set(SCORERS)),                   # reading aligned files
    ("io.py", set(SCORERS)),
    ("eval/significance.py", set()),                     # the claims' statistics: study_digest's
    ("eval/sva.py", {"contrastive"}),
    ("engine/compat.py", set()),
    ("studies/effects.py", set()),
])
def test_a_changed_scorer_changes_the_digests_of_exactly_the_commands_that_import_it(source, changed, rescored):
    before = {command: code_digest.module_digest(COMMANDS[command][0], root=source) for command in SCORERS}
    _append(source / changed)
    after = {command: code_digest.module_digest(COMMANDS[command][0], root=source) for command in SCORERS}
    assert {command for command in SCORERS if before[command] != after[command]} == rescored


def test_the_closure_follows_imports_inside_functions_and_from_imports_of_modules(tmp_path):
    root = tmp_path / "headlab"
    (root / "eval").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "eval/__init__.py").write_text("")
    (root / "eval/top.py").write_text("def run():\n    from headlab.eval import helper\n    return helper.x\n")
    (root / "eval/helper.py").write_text("from headlab.io import atomic_write\nx = 1\n")
    (root / "io.py").write_text("def atomic_write(path): ...\n")
    (root / "unused.py").write_text("")
    (root / "eval/relative.py").write_text("from . import helper\nfrom ..naming import path\n")
    (root / "naming.py").write_text("")
    files = {path.relative_to(root).as_posix() for path in code_digest.module_files(["headlab.eval.top"], root)}
    assert files == {"eval/__init__.py", "eval/top.py", "eval/helper.py", "io.py"}    # the root __init__: not
    files = {path.relative_to(root).as_posix() for path in code_digest.module_files(["headlab.eval.relative"], root)}
    assert files == {"eval/__init__.py", "eval/relative.py", "eval/helper.py", "io.py", "naming.py"}
    assert code_digest.module_files(["headlab.eval.top"], root, skip={"headlab.eval.helper"}) == [
        root / "eval/__init__.py", root / "eval/top.py"]


#: the rules that run a scorer, and the modules their digest covers
SCORING_RULES = {"bleu": ("headlab.eval.bleu",), "compare": ("headlab.eval.compare",),
                 "distil_accuracy": ("headlab.eval.contrastive",), "mucow_accuracy": ("headlab.eval.contrastive",),
                 "distil_parses": ("headlab.eval.sva", "headlab.eval.suites")}    # distil-parse runs these


def test_every_rule_running_a_scorer_takes_its_digest():
    import re

    from test_workflow import ROOT
    rules = "".join((ROOT / "rules" / name).read_text() for name in ("evaluate.smk", "analyse.smk"))
    blocks = {block.split(":")[0][len("rule "):]: block for block in re.split(r"\n(?=rule )", rules)
              if block.startswith("rule ")}
    scoring = {name for name, block in blocks.items()
               if any(re.search(rf'"headlab {command}\b', block) for command in SCORERS)}
    assert scoring == set(SCORING_RULES)
    for name, modules in SCORING_RULES.items():
        assert "module_digest(" + ", ".join(f'"{module}"' for module in modules) + ")" in blocks[name], name
    assert rules.count("module_digest(") == len(SCORING_RULES)


def test_an_unknown_module_is_an_error_naming_it():
    with pytest.raises(ValueError, match="no headlab module 'headlab.eval.blue'"):
        code_digest.module_digest("headlab.eval.blue")
