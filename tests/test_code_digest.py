"""A change to the code that renders a study or scores a translation reruns exactly what it
renders or scores (headlab.workflow.code_digest): the digests are params of those rules, so
Snakemake's params check sees what its code trigger (the rule's own text) cannot."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from headlab.cli import COMMANDS
from headlab.errors import HeadlabError
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


#: every rule running a headlab command, by what reruns it when its code changes:
#: ``model_code(M)``, the code M runs for the model's heads (code_digest.model_digest) ...
MODEL_RULES = {"translate": "headlab.engine.run", "forced_score": "headlab.eval.forced",
               "export_attention": "headlab.engine.export", "atlas_model": "headlab.atlas.model",
               "profile_heads": "headlab.syntax.run", "params": "headlab.engine.params"}
#: ... ``module_code(M...)``, M's closure (code_digest.module_digest) ...
MODULE_RULES = {"bleu": ("headlab.eval.bleu",), "compare": ("headlab.eval.compare",),
                "distil_accuracy": ("headlab.eval.contrastive",), "mucow_accuracy": ("headlab.eval.contrastive",),
                "distil_parses": ("headlab.eval.sva", "headlab.eval.suites"),    # distil-parse runs these
                "suite_distil": ("headlab.eval.suite_split",), "suite_mucow": ("headlab.eval.suite_split",),
                "treebank_text": ("headlab.syntax.run",), "treebank_parse": ("headlab.syntax.run",),
                "postprocess": ("headlab.data.preprocess",), "learning_curve": ("headlab.engine.logs",),
                "atlas_index": ("headlab.report.atlas",), "parser_f1": ("headlab.syntax.evalb",),
                "publish": ("headlab.workflow.publish",), "gates": ("headlab.heads.gates",)}
#: ... the study's rendering code (code_digest.study_digest) ...
STUDY_RULES = {"study_stage", "study_table", "study_figure", "study_effects", "study_readme", "effects_summary"}
#: ... or nothing: what prepares a model's training data or trains it (a change there would
#: retrain every model below it; a model records its trainer: engine.trained_code)
UNDIGESTED = {"fetch", "prepare", "prepare_local", "tokenize", "truecase_train", "truecase", "bpe_learn",
              "bpe_learn_side", "bpe_apply", "vocab", "vocab_separate", "parse", "featurize",
              "feature_vocab", "finetune_config", "train", "average_checkpoints"}


def _rule_blocks() -> dict[str, str]:
    import re

    from test_workflow import ROOT
    rules = "".join(path.read_text() for path in sorted((ROOT / "rules").glob("*.smk")))
    return {re.split(r"[:\s]", block, maxsplit=2)[1]: block for block in re.split(r"\n(?=(?:rule|checkpoint) )", rules)
            if block.startswith(("rule ", "checkpoint "))}


def test_every_rule_running_a_headlab_command_reruns_when_the_code_it_runs_changes():
    import re

    blocks = _rule_blocks()
    commands = {name: re.search(r'"(?:OMP_NUM_THREADS=\S+ )?headlab ([a-z-]+)', block)
                for name, block in blocks.items()}
    running = {name for name, found in commands.items() if found}
    assert running == set(MODEL_RULES) | set(MODULE_RULES) | STUDY_RULES | UNDIGESTED
    for name, module in MODEL_RULES.items():
        assert COMMANDS[commands[name][1]][0] == module, name              # the command's own module
        assert f'code=model_code("{module}")' in blocks[name], name
    for name, modules in MODULE_RULES.items():
        if name != "distil_parses":
            assert (COMMANDS[commands[name][1]][0],) == modules, name
        assert "code=module_code(" + ", ".join(f'"{module}"' for module in modules) + ")" in blocks[name], name
    for name in STUDY_RULES:
        assert re.search(r"RENDERED|RENDER_CODE|study_digest\(", blocks[name]), name
    for name in UNDIGESTED:
        assert "code=" not in blocks[name], name


#: (command module, a model's heads) pairs whose digests the cases below change
RUNS = [(module, heads) for module in ("headlab.engine.run", "headlab.engine.export", "headlab.syntax.run",
                                       "headlab.atlas.model")
        for heads in ("8L", "7Ftoken+1L", "8DEA", "8RHEdea", "2LPEA+6L@dec=7L+1L")]
EVERY = set(RUNS)


def _runs(*modules, heads=("8L", "7Ftoken+1L", "8DEA", "8RHEdea", "2LPEA+6L@dec=7L+1L")):
    return {(module, name) for module in modules for name in heads}


@pytest.mark.parametrize("changed, rerun", [
    ("heads/kinds.py", EVERY),                                       # learned heads: every model
    ("heads/patterns.py", EVERY),                                    # the fixed kinds, imported by every layer
    ("heads/sea.py", _runs("headlab.engine.run", "headlab.engine.export", "headlab.syntax.run",
                           "headlab.atlas.model", heads=("8DEA", "8RHEdea", "2LPEA+6L@dec=7L+1L"))),
    ("heads/rhe.py", _runs("headlab.engine.run", "headlab.engine.export", "headlab.syntax.run",
                           "headlab.atlas.model", heads=("8RHEdea",))),
    ("engine/export.py", _runs("headlab.engine.export", "headlab.syntax.run", "headlab.atlas.model")),  # what they read
    ("syntax/profile.py", _runs("headlab.syntax.run", "headlab.atlas.model")),
    ("atlas/probe.py", _runs("headlab.atlas.model")),
    ("engine/compat.py", EVERY),                                     # OpenNMT-py as patched: all of it
    ("naming.py", set()),                                            # paths: no number
    ("engine/trained_code.py", set()),                               # the trainer's bookkeeping
    ("studies/effects.py", set()),
])
def test_a_changed_file_changes_the_model_digests_of_exactly_the_commands_and_heads_that_run_it(source, changed,
                                                                                                rerun):
    before = {run: code_digest.model_digest(*run, root=source) for run in RUNS}
    _append(source / changed)
    code_digest.model_digest.cache_clear()        # one process (a DAG build) reads the code once
    after = {run: code_digest.model_digest(*run, root=source) for run in RUNS}
    assert {run for run in RUNS if before[run] != after[run]} == rerun


def test_the_model_digest_reads_the_heads_of_the_path_and_errs_on_bad_ones():
    assert code_digest.model_digest("headlab.engine.run", "8L") == code_digest.model_digest("headlab.engine.run",
                                                                                            "8L@dec=8L@cross=8L")
    assert code_digest.model_digest("headlab.engine.run", "8L") != code_digest.model_digest("headlab.engine.run", "8DEA")
    with pytest.raises(ValueError, match="no headlab module 'headlab.engine.rum'"):
        code_digest.model_digest("headlab.engine.rum", "8L")
    with pytest.raises(HeadlabError, match="unknown head kind 'Q'"):
        code_digest.model_digest("headlab.engine.run", "8Q")


def test_an_unknown_module_is_an_error_naming_it():
    with pytest.raises(ValueError, match="no headlab module 'headlab.eval.blue'"):
        code_digest.module_digest("headlab.eval.blue")
