"""A trained model records the code that trained it (headlab.engine.trained_code), and the
workflow names the models whose code has changed since, the files, and the command that
retrains them (the end-to-end case: tests/test_workflow.py's smoke run)."""
from __future__ import annotations

import json
import shutil

import pytest

from headlab.engine import trained_code
from headlab.sourcecode import SOURCE

BASE = {"enc": "8L", "dec": "8L", "cross": "8L"}
MODEL = "results/models/multi30k/de-en/300/tiny/default/1+1/{heads}/seed1"


@pytest.fixture
def source(tmp_path):
    """A copy of the package, to change one file in."""
    copy = tmp_path / "src" / "headlab"
    shutil.copytree(SOURCE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def _edit(root, name):
    path = root / name
    path.write_text(path.read_text() + "\n# edited\n")


def _trained(tmp_path, heads, root, from_step=0):
    """A model folder as `headlab train` leaves it: its record and final checkpoint."""
    folder = tmp_path / MODEL.format(heads=heads)
    trained_code.record(folder, {**BASE, "enc": heads}, from_step, root)
    (folder / "model.pt").write_bytes(b"")
    return folder


def test_a_training_records_the_trainer_and_the_modules_of_the_kinds_its_specs_name():
    base = trained_code.training_files(BASE)
    assert {"engine/run.py", "engine/encoder.py", "heads/executor.py", "heads/kinds.py", "heads/patterns.py"} <= set(base)
    assert all(name.split("/")[0] in ("heads", "engine") for name in base)     # no paths, errors, options
    # nor what computes no number: the record itself, the lock, the device checks, the config writer
    assert not {"engine/trained_code.py", "engine/train_lock.py", "engine/devices.py", "engine/config.py"} & set(base)
    assert "engine/opts.py" in base                                           # the options' defaults
    # the executor imports RHE's module in the functions only RHE kinds call: not an 8L model's code
    assert not {"heads/sea.py", "heads/rhe.py", "heads/relpos.py", "heads/localness.py", "heads/mixers.py",
                "heads/dhicm.py"} & set(base)
    assert set(trained_code.training_files({**BASE, "enc": "4DEA+4LPEA"})) - set(base) == {"heads/sea.py"}
    # RHE's module imports the kinds it enlivens
    assert set(trained_code.training_files({**BASE, "enc": "8RHEdea"})) - set(base) == {
        "heads/rhe.py", "heads/sea.py", "heads/relpos.py", "heads/localness.py"}
    assert set(trained_code.training_files({**BASE, "cross": "8L|gate"})) - set(base) == {"heads/mixers.py"}
    assert set(trained_code.training_files({**BASE, "dec": "8L|dhicm"})) - set(base) == {"heads/dhicm.py"}
    assert base["heads/kinds.py"] == trained_code.file_digest(SOURCE / "heads/kinds.py")


def test_a_resume_by_other_code_adds_an_entry_and_a_fresh_start_replaces_the_record(tmp_path, source):
    folder = tmp_path / "model"
    trained_code.record(folder, BASE, 0, source)
    first = json.loads((folder / "code.json").read_text())["trainings"]
    assert [entry["from_step"] for entry in first] == [0]
    trained_code.record(folder, BASE, 400, source)           # the same code: nothing to add
    assert json.loads((folder / "code.json").read_text())["trainings"] == first
    _edit(source, "heads/kinds.py")
    trained_code.record(folder, BASE, 800, source)
    trainings = json.loads((folder / "code.json").read_text())["trainings"]
    assert [entry["from_step"] for entry in trainings] == [0, 800]
    assert {name for name in trainings[0]["files"] if trainings[0]["files"][name] != trainings[1]["files"][name]} == {
        "heads/kinds.py"}
    trained_code.record(folder, BASE, 0, source)
    assert [entry["from_step"] for entry in json.loads((folder / "code.json").read_text())["trainings"]] == [0]
    assert not list(folder.glob("*.tmp"))


def test_the_models_trained_by_other_code_are_named_with_the_files_that_changed(tmp_path, source):
    base = _trained(tmp_path, "8L", source)
    dea = _trained(tmp_path, "4DEA+4LPEA", source)
    old = tmp_path / MODEL.format(heads="7Ftoken+1L")
    (old / "ft_enc_head_mask=11110000/step_0").mkdir(parents=True)      # a fine-tune's snapshot: a link
    (old / "ft_enc_head_mask=11110000/step_0/model.pt").write_bytes(b"")
    (old / "model.pt").write_bytes(b"")                                 # trained before records existed
    running = tmp_path / MODEL.format(heads="8Ftoken")
    trained_code.record(running, {**BASE, "enc": "8Ftoken"}, 0, source)  # no final model yet
    assert trained_code.stale_models(tmp_path / "results", source) == ({}, [old])
    _edit(source, "heads/sea.py")
    assert trained_code.stale_models(tmp_path / "results", source) == ({dea: ["heads/sea.py"]}, [old])
    _edit(source, "heads/executor.py")
    (source / "engine/xent.py").unlink()                                # a file gone counts as changed
    stale, _ = trained_code.stale_models(tmp_path / "results", source)
    assert stale == {base: ["engine/xent.py", "heads/executor.py"],
                     dea: ["engine/xent.py", "heads/executor.py", "heads/sea.py"]}
    results = tmp_path / "results"
    lines = trained_code.report(results, lambda: {base, dea, old}, source)
    assert lines[0].startswith("2 trained models of this config ran other code than this checkout's and are not "
                               "retrained")
    assert lines[1:4] == [f"  engine/xent.py: {dea} and 1 more", f"  heads/executor.py: {dea} and 1 more",
                          f"  heads/sea.py: {dea}"]
    assert f"--forcerun $(cat {results / 'stale-models.txt'})  at the end of the snakemake command" in lines[4]
    assert lines[5] == "1 trained model records no code, or not all of it (trained before headlab recorded it, or " \
                       "by other means): not checked"
    assert (results / "stale-models.txt").read_text() == f"{dea / 'onmt.yaml'}\n{base / 'onmt.yaml'}\n"
    # a model this config does not train is counted, not listed: forcing it would fail or do nothing
    lines = trained_code.report(results, lambda: {dea}, source)
    assert lines[0].startswith("1 trained model of this config ran other code than this checkout's and is not")
    assert "1 more trained model that this config does not train ran other code (their own config's run names " \
           "them)" in lines
    assert (results / "stale-models.txt").read_text() == f"{dea / 'onmt.yaml'}\n"
    lines = trained_code.report(results, set, source)
    assert lines[0] == "2 more trained models that this config does not train ran other code (their own config's " \
                       "run names them)"
    assert not (results / "stale-models.txt").exists()          # nothing to force: no list left behind


def test_a_model_trained_in_part_by_other_code_is_not_this_codes(tmp_path, source):
    folder = _trained(tmp_path, "8L", source)
    _edit(source, "heads/kinds.py")
    trained_code.record(folder, BASE, 800, source)        # resumed by the code as it is now
    assert trained_code.stale_models(tmp_path / "results", source)[0] == {folder: ["heads/kinds.py"]}


def test_nothing_is_said_of_a_folder_with_no_model(tmp_path):
    assert trained_code.report(tmp_path / "results", set) == []
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("text", ["", "{", "[]", '{"trainings": []}', '{"trainings": [{"from_step": 0}]}',
                                  '{"trainings": [{"from_step": "0", "files": {}}]}', '{"trainings": [1]}'])
def test_a_broken_record_is_code_unknown_never_this_checkouts(tmp_path, source, text):
    folder = _trained(tmp_path, "8L", source)
    (folder / "code.json").write_text(text)
    assert trained_code.stale_models(tmp_path / "results", source) == ({}, [folder])
    # a resume reads it as no record: its start stays unknown
    trained_code.record(folder, BASE, 400, source)
    trainings = json.loads((folder / "code.json").read_text())["trainings"]
    assert [(entry["from_step"], entry["files"] is None) for entry in trainings] == [(0, True), (400, False)]
    assert trained_code.stale_models(tmp_path / "results", source) == ({}, [folder])


def test_a_resume_of_a_training_that_kept_no_record_is_not_taken_for_this_codes(tmp_path, source):
    folder = tmp_path / MODEL.format(heads="8L")
    trained_code.record(folder, BASE, 400, source)
    (folder / "model.pt").write_bytes(b"")
    assert trained_code.stale_models(tmp_path / "results", source) == ({}, [folder])
