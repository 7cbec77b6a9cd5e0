"""The study contract (``headlab.studies.base.Study``): what every shipped study provides,
what an incomplete one is refused for, and that planning a run needs no pandas."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from headlab.studies import STUDIES
from headlab.studies.base import CLAIMS, REGISTRY, Study, register_study

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("config/config.yaml", "config/paper.yaml")


def test_every_shipped_study_is_a_registered_study():
    assert set(STUDIES) == {"baseline", "paper_A", "paper_B", "paper_C", "paper_D"}
    for name, study in STUDIES.items():
        assert isinstance(study, Study) and study.name == name
    assert len({study.outdir for study in STUDIES.values()}) == len(STUDIES)


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_each_study_is_a_package_of_its_parts(name):
    study = STUDIES[name]
    parts = ["grid", "outputs", "readme"] + (["claims"] if study.judges_claims else [])
    for part in parts:
        importlib.import_module(f"headlab.studies.{name}.{part}")
    # every output it names has a builder, and none other
    for output in study.output_names():
        assert callable(study.builder(output)), output
    for table in study.tables:
        assert table not in study.figures
    with pytest.raises(KeyError):
        study.builder("no-such-output")


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_a_study_that_judges_claims_builds_them_and_one_that_does_not_refuses(name):
    from headlab.studies import builder

    study = STUDIES[name]
    if study.judges_claims:
        claims = importlib.import_module(f"headlab.studies.{name}.claims")
        assert study.builder(CLAIMS) is claims.effects
    else:
        config = {"studies": {name: {}}, "corpora": {}}
        with pytest.raises(KeyError, match="no output"):
            builder(config, name, CLAIMS, "results")


def _complete(**overrides):
    """A minimal complete study class body, with ``overrides`` replacing or deleting parts."""
    body = {"name": "toy", "outdir": "toy", "tables": ("T1",),
            "models": lambda self, study, root=None: [],
            "files": lambda self, config, study, root: None,
            "builder": lambda self, name: None,
            "readme": lambda self, files, provenance: ""}
    for key, value in overrides.items():
        if value is None:
            body.pop(key)
        else:
            body[key] = value
    return body


def test_a_complete_study_registers_once(monkeypatch):
    monkeypatch.setattr("headlab.studies.base.REGISTRY", dict(REGISTRY))
    from headlab.studies import base

    toy = type("Toy", (Study,), _complete())
    register_study(toy)
    assert isinstance(base.REGISTRY["toy"], toy)
    with pytest.raises(ValueError, match="registered twice"):
        register_study(type("Toy2", (Study,), _complete()))
    with pytest.raises(ValueError, match="both write to 'toy'"):
        register_study(type("Toy3", (Study,), _complete(name="toy3")))


@pytest.mark.parametrize("hook", ["models", "files", "builder", "readme"])
def test_a_study_without_a_required_hook_cannot_be_registered(monkeypatch, hook):
    monkeypatch.setattr("headlab.studies.base.REGISTRY", dict(REGISTRY))
    incomplete = type("Incomplete", (Study,), _complete(**{hook: None}))
    with pytest.raises(TypeError, match=hook):
        register_study(incomplete)


@pytest.mark.parametrize("attribute", ["name", "outdir", "tables"])
def test_a_study_must_name_itself_its_folder_and_its_tables(attribute):
    with pytest.raises(TypeError, match=attribute):
        type("Nameless", (Study,), _complete(**{attribute: None}))


def test_a_study_with_stages_must_say_how_each_is_chosen():
    with pytest.raises(TypeError, match="stage_keys, stage_inputs and select"):
        type("Staged", (Study,), _complete(stages=("stage1",)))


def test_only_study_subclasses_register():
    with pytest.raises(TypeError, match="not a Study subclass"):
        register_study(object)


@pytest.mark.parametrize("config_file", SHIPPED)
def test_planning_a_shipped_config_imports_no_pandas(config_file):
    """The studies' grids, checks and output lists (what the DAG is built from) in a fresh
    interpreter: pandas (and the table builders) are not imported."""
    code = f"""
import json, sys, yaml
import headlab.studies as studies
from headlab.workflow.config_check import check_study
config = yaml.safe_load(open({str(ROOT / config_file)!r}))
planned = 0
for name in config["studies"]:
    importlib = __import__("importlib")
    importlib.import_module(f"headlab.studies.{{name}}.grid")
    check_study(config, name)
    planned += len(studies.study_models(config, name, "results"))
    studies.study_outputs(name, "results")
print(json.dumps({{"planned": planned, "pandas": "pandas" in sys.modules}}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["planned"] > 0
    assert report["pandas"] is False
