"""The GPU sitting's bundle (``headlab gpu-bundle``) and runner (``run.py``), on what ships:

- the GPU side of every shipped GPU config is model work only (two dry runs each: the
  whole plan less what the CPU-side preparation runs), so a bundle built from them cannot
  fail its own check after minutes of preparation;
- what the bundle carries: the closure of the GPU side's imports less the machine's
  packages (requirements/gpu-machine.txt), never torch or numpy;
- the runner refuses, in seconds and by name, a wheel that would replace the machine's
  torch or numpy, and still leaves OUT/status.json;
- the shipped bundle, built here and copied elsewhere, runs its whole sitting on the CPU
  (``--device cpu``: the same steps as on a GPU, small settings), then a second call that
  trains nothing (``make gpu-rehearsal`` does the same in a venv of the machine's Python
  3.12, torch 2.11 and numpy 2.5)."""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import re
import json
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest
import yaml

from headlab.errors import ConfigError, HeadlabError
from headlab.studies.published import BY_NEWEST, STATUSES
from headlab.workflow import bundle, gpu_measures, gpu_plan, gpu_runner, sitting
from hangguard import hang_guard

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_side_of_the_shipped_bundle_config_is_model_work(tmp_path):
    """Two dry runs of config/multi30k-gpu.yaml + config/gpu-sitting.yaml: the whole plan
    less what the CPU-side preparation runs holds only rules of GPU_RULES (a rule missing
    there, such as study_effects once, failed the build after its minutes of preparation)."""
    results = str(tmp_path / "results")
    stats = bundle.gpu_side(bundle.CONFIGS, [f"{results}/published/{t}" for t in bundle.TARGETS], results=results)
    assert stats["train"] == 3 and "prepare" not in stats and "onmt_config" not in stats
    bundle.check_gpu_side(stats)


def test_a_bundle_of_the_full_gpu_config_is_refused_before_any_preparation(tmp_path, capsys):
    """The full GPU config scores MuCoW with spaCy after translating: it is for a GPU box
    with the whole environment, and gpu-bundle says so at once, naming the rule. Before
    that, a plan whose throughput is off the newest sitting's clock is warned of."""
    from test_gpu_plan import _clock

    _clock(tmp_path / "published", "A-T1-deep", "2026-12-04-h100-ddddddd", "2026-12-04 10:00:00 UTC",
           {"8L": 95, "7Ftoken+1L": 100, "8Ftoken": 98})
    with pytest.raises(ConfigError, match=r"rule\(s\) mucow_accuracy would still run"):
        bundle.build(tmp_path / "b", configfiles=["config/multi30k-gpu.yaml"], published=tmp_path / "published",
                     targets=["tables", "paper_A", "paper_B", "paper_C", "paper_D"])
    assert not (tmp_path / "b").exists()
    assert ("headlab gpu-bundle: warning: the plan's throughput is stale: throughput.seconds_per_step.3: the plan "
            "says 0.135, the sitting A-T1-deep/2026-12-04-h100-ddddddd measured 0.100 s a step with 3 side by "
            "side") in capsys.readouterr().err.splitlines()


def test_check_gpu_side_names_rules_that_need_cpu_tools():
    bundle.check_gpu_side({"train": 2, "translate": 2, "study_effects": 1, "publish": 1})
    with pytest.raises(ConfigError, match="rule.s. mucow_accuracy, parse would still run on the GPU"):
        bundle.check_gpu_side({"train": 2, "parse": 1, "mucow_accuracy": 1})


def test_the_bundle_carries_what_the_machine_lacks_and_never_torch():
    pins = bundle.runtime_requirements("3.12")
    assert set(pins) == {"opennmt-py", "configargparse", "pyonmttok", "sacremoses", "nltk", "defusedxml"}
    machine = bundle.machine_packages()
    assert machine["torch"] == "2.11.0" and machine["numpy"] == "2.5.2" and "sacrebleu" in machine
    # a machine whose sacrebleu is older than headlab accepts (>= 2.4) gets it carried;
    # one whose numpy is unacceptable is an error: a bundle never replaces numpy
    assert "sacrebleu" in bundle.closure(["sacrebleu>=2.4"], "3.12", {**machine, "sacrebleu": "1.5.1"})
    assert "sacrebleu" not in bundle.closure(["sacrebleu>=2.4"], "3.12", {**machine, "sacrebleu": "2.6.0"})
    with pytest.raises(ConfigError, match="never carries torch"):
        bundle.closure(bundle.GPU_REQUIREMENTS, "3.12", {**machine, "torch": "2.0.0"})


def test_machine_file_errors_name_the_line(tmp_path):
    path = tmp_path / "machine.txt"
    path.write_text("# comment\ntorch==2.11.0\nnumpy >= 2\n")
    with pytest.raises(ConfigError, match=r"machine.txt:3"):
        bundle.machine_packages(path)


def _fake_bundle(folder: Path, wheel: str) -> Path:
    folder.mkdir()
    shutil.copyfile(gpu_runner.__file__, folder / "run.py")
    (folder / "manifest.json").write_text(json.dumps({"commit": "0000000", "models": [], "results": "results"}))
    (folder / "wheels").mkdir()
    with zipfile.ZipFile(folder / "wheels" / wheel, "w") as archive:
        archive.writestr("torch/__init__.py", "")
    return folder


@pytest.mark.parametrize("wheel", ["torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                                   "nvidia_cudnn_cu13-9.19.0.56-py3-none-manylinux_2_27_x86_64.whl",
                                   "innocent-1.0-py3-none-any.whl"])
def test_the_runner_refuses_a_wheel_that_would_replace_torch(wheel, tmp_path):
    fake = _fake_bundle(tmp_path / "bundle", wheel)
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(fake / "run.py"), "--out", str(out), "--work", str(tmp_path / "work")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and f"refusing {wheel}" in result.stdout
    status = json.loads((out / "status.json").read_text())
    assert wheel in status["error"] and not (tmp_path / "work/headlab").exists()   # nothing unpacked


def _stored_tarball(path: Path, files: dict[str, bytes]) -> bytes:
    """A gzip tarball of stored (uncompressed) deflate blocks: its bytes, as written to ``path``."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(raw.getvalue(), compresslevel=0, mtime=0))
    return path.read_bytes()


@pytest.mark.parametrize("damage", ["a byte in a stored block", "cut short", "no gzip", "missing"])
def test_the_runner_refuses_a_damaged_bundle_tarball_by_name(damage, tmp_path):
    """A carried copy damaged where zlib cannot see it (inside a stored block) unpacked
    without an error until the runner read the tarball on to gzip's CRC-32."""
    fake = tmp_path / "bundle"
    fake.mkdir()
    shutil.copy(gpu_runner.__file__, fake / "run.py")
    (fake / "manifest.json").write_text(json.dumps({"commit": "0000000", "models": [], "results": "results"}))
    _stored_tarball(fake / "source.tar.gz", {"headlab/src/headlab/__init__.py": b""})
    whole = bytearray(_stored_tarball(fake / "data.tar.gz", {"data/train.de": b"ein Hund rennt .\n" * 50}))
    if damage == "a byte in a stored block":
        whole[whole.index(b"Hund") + 1] ^= 0b1                 # 'Hund' becomes 'Htnd': still text
        (fake / "data.tar.gz").write_bytes(bytes(whole))
        reason = "CRC check failed"
    elif damage == "cut short":
        (fake / "data.tar.gz").write_bytes(bytes(whole[:len(whole) // 2]))
        reason = "Compressed file ended before the end-of-stream marker was reached"
    elif damage == "no gzip":
        (fake / "data.tar.gz").write_bytes(b"not gzip\n")
        reason = "not a gzip file"
    else:
        (fake / "data.tar.gz").unlink()
        reason = "No such file or directory"
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(fake / "run.py"), "--out", str(out), "--work", str(tmp_path / "work")],
                            capture_output=True, text=True, timeout=60)
    said = "the bundle's data.tar.gz cannot be unpacked ("
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    assert f"run.py: {said}{reason}" in result.stdout and "(make gpu-bundle) and carry it again" in result.stdout
    status = json.loads((out / "status.json").read_text())
    assert status["error"].startswith(f"{said}{reason}") and status["calls"][0]["phases"].keys() == {"install"}
    # a later call on the machine installs again (a bundle carried again), never trains on this one
    assert json.loads((tmp_path / "work/state.json").read_text()).get("installed") is None


def test_the_bundle_overlay_trains_the_slice_seeds_by_its_stop_rule():
    plan = gpu_plan.load()
    overlay = bundle.slice_overlay(gpu_plan.Choice(plan.slice("A-T1-deep"), [2], []))
    study = overlay["studies"]["baseline"]
    assert study["heads"] == ["8L", "7Ftoken+1L", "8Ftoken"] and study["seeds"] == [2]
    assert study["data"] == {"multi30k": ["de-en"]} and study["layers"] == ["6+6"]
    options = overlay["training"]["overrides"]
    assert options["valid_steps"] == options["save_checkpoint_steps"] == 200
    assert options["early_stopping"] == 3 and options["model_selection"] == "valid_loss"


def _config(folder: Path) -> None:
    folder.mkdir(parents=True)
    # what the bundle reads of a model's config (the preparation writes it whole)
    (folder / "onmt.yaml").write_text(f"save_model: {folder / 'model'}\nsave_checkpoint_steps: 200\n"
                                      f"data: {{valid: {{path_src: data/bpe/val.src}}}}\n")


def test_the_sitting_takes_its_dags_models_not_an_earlier_bundles_configs(tmp_path, monkeypatch):
    """The results folder outlives a bundle: beside this slice's configs (paper A's
    low-resource row, seed 2) lie those of earlier bundles of the same heads (paper A's T1
    deep row, its base preset; paper B's 8L, its own preset; seed 1; another pair). Only the
    DAG's models (``snakemake --summary`` of the shipped config with the slice's overlay) may
    train or travel: the heads, seed and pair alone once let paper B's 8L join this sitting
    as a second "8L", whose training the runner lost track of and which outlived it."""
    plan = gpu_plan.load()
    overlay = tmp_path / "slice.yaml"
    overlay.write_text(yaml.safe_dump(bundle.slice_overlay(gpu_plan.Choice(plan.slice("A-lowres"), [2], []))))
    folders = bundle.train_folders([*bundle.CONFIGS, str(overlay)], ["results/gpu-sitting/published/tables"])
    grid = "results/gpu-sitting/models/multi30k/de-en/full/{preset}/6+6/{heads}/{seed}"
    assert sorted(folders) == [grid.format(preset="base_lowres/default", heads=heads, seed="seed2")
                               for heads in ("7Ftoken+1L", "8L")]
    monkeypatch.setattr(bundle, "REPO", tmp_path)
    for preset in ("base_lowres/default", "base/default", "multi30k_paper_B/lambda_kl=0.1"):
        for heads in ("8L", "7Ftoken+1L"):
            for seed in ("seed1", "seed2"):
                _config(tmp_path / grid.format(preset=preset, heads=heads, seed=seed))
    _config(tmp_path / "results/gpu-sitting/models/multi30k/en-de/full/base_lowres/default/6+6/8L/seed2")
    models = bundle.sitting_models("results/gpu-sitting", folders, ["8L", "7Ftoken+1L"])
    assert [(m["heads"], m["seed"], m["name"], m["dir"]) for m in models] == [
        (heads, "seed2", heads, grid.format(preset="base_lowres/default", heads=heads, seed="seed2"))
        for heads in ("8L", "7Ftoken+1L")]
    # the data: this pair's, not an earlier slice's other pair (paper C's en-de parses)
    data = tmp_path / "results/gpu-sitting/data"
    for name in ("multi30k/de-en/full/vocab.txt", "multi30k/de-en/full/raw/test_2016_flickr.tgt",
                 "multi30k/en-de/full/vocab.txt", "multi30k/en-de/full/parses/train.conllu",
                 "raw/multi30k/.verified", "raw/multi30k/train.de.gz"):
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(name)
    assert bundle.data_archive(tmp_path / "data.tar.gz", "results/gpu-sitting", models) == 5
    with tarfile.open(tmp_path / "data.tar.gz") as tar:
        assert sorted(tar.getnames()) == sorted(
            [f"results/gpu-sitting/data/{name}" for name in ("multi30k/de-en/full/vocab.txt", "raw/multi30k/.verified",
                                                            "multi30k/de-en/full/raw/test_2016_flickr.tgt")]
            + [f"{model['dir']}/onmt.yaml" for model in models])


def test_each_model_translates_its_own_source_with_the_options_it_was_trained_with(tmp_path, monkeypatch):
    """As the workflow's translate rule: a syntax model (paper C) reads the test split
    featured by its parser, beside its validation source, with the feature options; a word
    model (Fword) the BPE source with the word column; others the BPE source as it is; a
    chain's fine-tune as its parent. Without this, C-core-base's sitting translated its three
    syntax models from the plain source: each stopped at once, and no model got BLEU."""
    monkeypatch.setattr(bundle, "REPO", tmp_path)
    data = "results/gpu-sitting/data/multi30k/en-de/full"
    test = {"split": "test_2016_flickr", "src": f"{data}/bpe/test_2016_flickr.src"}
    folders = []
    for heads in ("8L", "8RHElpea.*8L", "7Fword+1L"):
        folders.append(f"results/gpu-sitting/models/multi30k/en-de/full/base/default/6+6/{heads}/seed1")
        (tmp_path / folders[-1]).mkdir(parents=True)
        source = f"{data}/feat/depconv/val.src" if "RHE" in heads else f"{data}/bpe/val.src"
        (tmp_path / folders[-1] / "onmt.yaml").write_text(yaml.safe_dump(
            {"data": {"valid": {"path_src": source}}, "save_model": f"{folders[-1]}/model",
             "save_checkpoint_steps": 200}))
    # the models as the bundle reads them from their configs, then a chain's fine-tune
    models = bundle.sitting_models("results/gpu-sitting", folders, ["8L", "8RHElpea,*(8L)", "7Fword+1L"])
    models.append({"name": "gated", "heads": "8L", "chain": {"parent": "8L"}})
    with pytest.raises(HeadlabError, match=r"did not write .*/feat/depconv/test_2016_flickr.src, the featured "
                                           r"test source of 8RHElpea"):
        bundle.translation_inputs(models, test)
    (tmp_path / data / "feat/depconv").mkdir(parents=True)
    (tmp_path / data / "feat/depconv/test_2016_flickr.src").write_text("a│1\n")
    bundle.translation_inputs(models, test)
    assert [(m["name"], m["test_src"], m["translate_args"]) for m in models] == [
        ("8L", test["src"], []),
        ("8RHElpea.*8L", f"{data}/feat/depconv/test_2016_flickr.src",
         ["-n_src_feats", "6", "-transforms", "inferfeats", "headlab_words"]),
        ("7Fword+1L", test["src"], ["-n_src_feats", "1", "-transforms", "inferfeats", "headlab_words",
                                    "-src_feats_defaults", "_"]),
        ("gated", test["src"], [])]


def test_two_sitting_models_of_one_name_are_refused_naming_both(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "REPO", tmp_path)
    folders = [f"results/gpu-sitting/models/multi30k/de-en/full/{preset}/6+6/8L/seed1"
               for preset in ("base/default", "base_lowres/default")]
    for folder in folders:
        _config(tmp_path / folder)
    with pytest.raises(HeadlabError, match=r"two models named 8L: .*/base/default/.*, .*/base_lowres/default/"):
        bundle.sitting_models("results/gpu-sitting", folders, ["8L"])


def test_the_runner_refuses_a_manifest_naming_a_model_twice(tmp_path):
    """Its processes, logs and rows are keyed by the model's name: a second "8L" would
    overwrite the first's files, and its training would outlive the sitting."""
    fake = _fake_bundle(tmp_path / "bundle", "innocent-1.0-py3-none-any.whl")
    manifest = json.loads((fake / "manifest.json").read_text())
    manifest["models"] = [{"name": "8L", "dir": f"results/models/{preset}/8L/seed1"} for preset in ("base", "lowres")]
    (fake / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(fake / "run.py"), "--out", str(out), "--work", str(tmp_path / "work")],
                            capture_output=True, text=True, timeout=60)
    status = json.loads((out / "status.json").read_text())
    assert result.returncode == 1 and result.stdout.count("\n") == 1
    assert status["error"] == ("the manifest names 8L more than once (results/models/base/8L/seed1, "
                               "results/models/lowres/8L/seed1): rebuild the bundle (make gpu-bundle); nothing trained")
    assert not (tmp_path / "work/headlab").exists()


@pytest.mark.parametrize("budget, refused", [(215, True), (570, False)])
def test_a_first_call_too_short_for_the_slices_min_steps_trains_nothing(budget, refused, tmp_path):
    """A call meant for the remainder that finds a fresh machine (the warm one given back)
    has no state: with 215 s it would train ~250 steps and publish rows worth nothing."""
    fake = _fake_bundle(tmp_path / "bundle", "innocent-1.0-py3-none-any.whl")
    manifest = json.loads((fake / "manifest.json").read_text())
    manifest["slice"] = {"name": "A-T1-deep", "min_steps": 1000, "seconds_per_step": 0.135, "startup_s": 55}
    (fake / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(fake / "run.py"), "--out", str(out), "--work", str(tmp_path / "work"),
                             "--budget", str(budget)], capture_output=True, text=True, timeout=60)
    status = json.loads((out / "status.json").read_text())
    if refused:      # 215 - 15 - 110 - 55 = 35 s: ~259 steps of the 1,000
        assert result.returncode == 1
        assert "leaves ~259 training steps, under the slice's min_steps 1000" in status["error"]
        assert "fresh machine" in result.stdout and not (tmp_path / "work/headlab").exists()
    else:            # the window is enough: on to the install (this fake bundle has no source to unpack)
        assert "min_steps" not in status.get("error", "") and "phases" in status["calls"][0]


@pytest.mark.parametrize("figures, refused", [({"budget_s": 570, "pack_s": 15, "eval_reserve_s": 60}, False),
                                              ({"budget_s": 570, "pack_s": 15, "eval_reserve_s": 110}, True),
                                              ({"budget_s": 520, "pack_s": 15, "eval_reserve_s": 60}, True),
                                              ({"budget_s": 570, "pack_s": 65, "eval_reserve_s": 60}, True)])
def test_the_sitting_trains_in_the_window_of_the_plans_sitting_figures(figures, refused, tmp_path):
    """The plan's budget, packing and evaluation reserve are the sitting's own (the manifest
    carries them): a reserve cut to 60 s in config/gpu-plan.yaml leaves 570 - 15 - 60 - 55 =
    440 s, 3,259 steps at 0.135 s, enough for a slice needing 3,000; the runner's own 110 s
    would leave 2,889. A budget or packing raised by 50 s takes the same 50 s away."""
    fake = _fake_bundle(tmp_path / "bundle", "innocent-1.0-py3-none-any.whl")
    manifest = json.loads((fake / "manifest.json").read_text())
    manifest["slice"] = {"name": "A-T1-deep", "min_steps": 3000, "seconds_per_step": 0.135, "startup_s": 55,
                         "sitting": figures}
    (fake / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(fake / "run.py"), "--out", str(out), "--work", str(tmp_path / "work")],
                            capture_output=True, text=True, timeout=60)
    status = json.loads((out / "status.json").read_text())
    assert status["calls"][0]["budget_s"] == figures["budget_s"]
    if refused:
        assert result.returncode == 1 and "leaves ~2889 training steps, under the slice's min_steps 3000" in status["error"]
        assert f"--budget {figures['budget_s']:g} " in status["error"]
    else:
        assert "min_steps" not in status.get("error", "") and "phases" in status["calls"][0]


def test_the_bundle_hands_the_plans_sitting_figures_to_the_runner(tmp_path):
    """What ``make gpu-bundle`` writes into the manifest for the shipped plan's next slice."""
    plan = gpu_plan.load()
    choice = gpu_plan.choose(plan)
    written = bundle.slice_manifest(choice)
    # A-T1-deep keeps 80 s for its evaluation, the sitting's 110 s otherwise
    assert plan.sitting == {"budget_s": 570, "pack_s": 15, "eval_reserve_s": 110}
    # and its trainings' -compile: the plan's, off while it sets none
    assert choice.slice.name == "A-T1-deep" and written["sitting"] == {"budget_s": 570, "pack_s": 15, "eval_reserve_s": 80,
                                                                       "compile": "off"}
    figures = gpu_runner.sitting_figures({"slice": written}, "cuda")
    assert figures["compile"] == "off"
    compiled = gpu_plan.Plan({**plan.data, "sitting": {**plan.sitting, "compile": "default"}}, plan.path)
    assert bundle.slice_manifest(gpu_plan.choose(compiled))["sitting"]["compile"] == "default"
    # a slice's own compile is its sitting's (YAML's bare off: false); nothing published yet
    own = [{**entry, "compile": False} if entry["name"] == "D-gates-8L" else entry for entry in compiled.data["slices"]]
    own_plan = gpu_plan.Plan({**compiled.data, "slices": own}, plan.path)
    for name, mode in (("D-gates-8L", "off"), ("C-core-base", "default")):
        assert bundle.slice_manifest(gpu_plan.choose(own_plan, tmp_path, name))["sitting"]["compile"] == mode
    assert written["train_window_s"] == figures["budget_s"] - figures["pack_s"] - figures["eval_reserve_s"]
    assert gpu_runner.sitting_figures({"slice": written}, "cpu")["eval_reserve_s"] == gpu_runner.EVAL_RESERVE_S["cpu"]
    # the probe side by side after the publication: one seed more of the ready slice that
    # would train the most at once (C-core-base: 4 models, 2 seeds), A's models copied to it
    assert written["probe_side_by_side"] == 8
    # the probe's compile: the workers of one of the 4 trainings C, B and A-lowres run at once
    # (A trains 3, D 1), in whichever slice's sitting it runs
    assert written["compile_side_by_side"] == 4
    assert bundle.slice_manifest(gpu_plan.choose(plan, tmp_path, "D-gates-8L"))["compile_side_by_side"] == 4
    runner = object.__new__(gpu_runner.Sitting)
    runner.manifest, runner.args = {"slice": written}, argparse.Namespace(device="cuda")
    assert runner.crowd_size() == 8
    runner.args.device = "cpu"           # a rehearsal: one copy a core
    assert runner.crowd_size() == gpu_runner.CPU_SETTINGS["side_by_side"] == 2


@pytest.mark.parametrize("budget, refused", [(420, True), (570, False)])
def test_a_chain_s_stages_count_against_the_first_call_s_window(budget, refused, tmp_path):
    """D-gates-8L: the parent trains in what its chain's stages leave (218 of the plan's 445
    s); 420 s would leave it (420 - 125) x 227/445 - 55 = 95.5 s, ~955 steps of its 1,000
    (the whole window less one start-up would be 2,400)."""
    fake = _fake_bundle(tmp_path / "bundle", "innocent-1.0-py3-none-any.whl")
    manifest = json.loads((fake / "manifest.json").read_text())
    manifest["slice"] = {"name": "D-gates-8L", "min_steps": 1000, "seconds_per_step": 0.10, "startup_s": 55,
                         "train_window_s": 445, "chain_stage_s": {"1": 105, "2": 113}}
    (fake / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, str(fake / "run.py"), "--out", str(out), "--work", str(tmp_path / "work"),
                             "--budget", str(budget)], capture_output=True, text=True, timeout=60)
    status = json.loads((out / "status.json").read_text())
    assert ("leaves ~955 training steps, under the slice's min_steps 1000" in status.get("error", "")) is refused
    assert (result.returncode == 1 and not (tmp_path / "work/headlab").exists()) if refused else \
        "phases" in status["calls"][0]


def test_the_bundle_refuses_to_replace_a_folder_that_is_not_a_bundle(tmp_path):
    """``--out .`` or ``--out results`` was wiped whole once the bundle was built; now it is
    refused before any work (a plan that is not there is never read), its files kept."""
    out = tmp_path / "results"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError) as caught:
        bundle.build(out, plan_path=tmp_path / "no-plan.yaml")
    assert str(caught.value) == (f"--out {out}: a folder that is not a bundle (it has no manifest.json) and not "
                                 "empty; the bundle would replace it whole")
    assert (out / "keep.txt").read_text() == "mine"


def test_a_previous_bundle_an_empty_folder_or_none_may_be_the_bundles_folder(tmp_path):
    previous = tmp_path / "gpu-bundle"
    previous.mkdir()
    (previous / "manifest.json").write_text("{}\n")
    (previous / "run.py").write_text("")
    (tmp_path / "empty").mkdir()
    for out in (previous, tmp_path / "empty", tmp_path / "new"):
        bundle.check_out_folder(out)


def test_a_sitting_never_overwrites_a_published_folder(tmp_path):
    first = gpu_runner.sitting_folder(tmp_path, "A-T1-deep", "h100", "65e2124", "2026-11-27")
    assert first == "results/published/A-T1-deep/2026-11-27-h100-65e2124"
    (tmp_path / first).mkdir(parents=True)
    again = gpu_runner.sitting_folder(tmp_path, "A-T1-deep", "h100", "65e2124", "2026-11-27")
    assert again == first + "-2"
    assert gpu_runner.gpu_short_name("NVIDIA H100 80GB HBM3") == "h100" and gpu_runner.gpu_short_name(None) == "cpu"


def _log(steps) -> str:
    return "".join(f"[2026-11-27 14:28:51,511 INFO] Step {step}/100000; acc: 60.0; ppl: {ppl}; xent: {xent}; "
                   f"lr: 0.001; sents: 100; bsz: 3432/3682/264; 11445/12278 tok/s; 280 sec;\n"
                   for step, ppl, xent in steps)


def _logged_models(tmp_path: Path, seed: str, reports) -> list[dict]:
    """8L and 7Ftoken+1L as the sitting's manifest names them, each with a training log of
    ``reports`` (step, tokens/s, cross-entropy) and no checkpoint yet."""
    models = []
    for heads in ("8L", "7Ftoken+1L"):
        folder = tmp_path / "models" / heads
        folder.mkdir(parents=True)
        (folder / "train.log").write_text(_log(reports))
        models.append({"heads": heads, "name": heads, "layers": "6+6", "seed": seed, "pair": "de-en",
                       "corpus": "multi30k", "dir": str(folder), "save_model": str(folder / "model"),
                       "model_dtype": "fp16"})
    return models


def test_a_sitting_short_of_time_publishes_what_it_has_labelled(tmp_path, monkeypatch):
    """No checkpoint loads (the trainings stopped before their first save): the folder still
    holds each model's row with its stop, its learning curve and its speed row, and says
    what it lacks."""
    monkeypatch.chdir(tmp_path)
    models = _logged_models(tmp_path, "seed1", [(50, 1235.8, 7.1), (100, 250.6, 5.5)])
    (tmp_path / "test.src").write_text("ein Satz\n")
    (tmp_path / "test.tgt").write_text("a sentence\n")
    manifest = {"commit": "abcdef0", "models": models,
                "test": {"split": "test_2016_flickr", "pair": "de-en", "src": "test.src", "ref": "test.tgt"},
                "slice": {"name": "A-T1-deep", "study": "paper_A", "table": "T1", "seeds": [1],
                          "rows": {"8L": "T1 deep", "7Ftoken+1L": "T1 deep"}, "stop": {"valid_steps": 200, "patience": 3}}}
    out = tmp_path / "results/published/A-T1-deep/2026-11-27-cpu-abcdef0"
    ident = {"sitting": out.name, "gpu": "cpu", "date": "2026-11-27"}
    publication = sitting.evaluate(manifest, out, "cpu", {}, ident, 30, tmp_path / "logs")
    with open(out / "rows.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(gpu_plan.ROW_COLUMNS) and [r["heads"] for r in rows] == ["8L", "7Ftoken+1L"]
    # not scored: no seed of its model (studies.published averages converged and deadline rows)
    assert {r["status"] for r in rows} == {"partial"}
    assert rows[0]["stop_reason"] == "deadline at step 100; not scored: no checkpoint loads"
    assert rows[0]["row"] == "T1 deep" and rows[0]["seed"] == "1" and rows[0]["bleu"] == ""
    provenance = json.loads((out / "provenance.json").read_text())
    assert provenance["status"] == publication.status() == "partial" and provenance["slice"] == "A-T1-deep"
    assert any("8L: no checkpoint loads" in lack for lack in provenance["lacks"])
    assert any(lack.startswith("BLEU and chrF: no sentence of test_2016_flickr") for lack in provenance["lacks"])
    curve = (out / "learning_curve.8L.csv").read_text().splitlines()
    assert curve[0] == "step,split,xent,ppl,acc,lr" and len(curve) == 3
    assert (out / "throughput.csv").read_text().startswith("gpu,commit,date,slice,sitting,model")
    assert (out / "learning_curves.png").is_file()


def _evaluated(tmp_path, monkeypatch, translated: dict[str, int], failed: dict[str, int],
               stopped: bool = False) -> dict[str, dict]:
    """The rows of a sitting's evaluation of 8L and 7Ftoken+1L (each with a checkpoint chosen
    at step 100) on a 4-sentence test set, where each model's translation gave the first
    ``translated[name]`` sentences (the reference's own) and ``failed`` ended with an error;
    ``stopped``: the call is stopped from outside in the translations (SIGTERM)."""
    monkeypatch.chdir(tmp_path)
    models = _logged_models(tmp_path, "seed1", [(50, 1235.8, 7.1), (100, 250.6, 5.5)])
    refs = ["A man rides a horse .", "Two dogs play in the snow .", "A girl reads a book .", "People walk in a park ."]
    (tmp_path / "test.src").write_text("".join(f"satz {n}\n" for n in range(4)))
    (tmp_path / "test.tgt").write_text("".join(line + "\n" for line in refs))
    manifest = {"commit": "abcdef0", "models": models,
                "test": {"split": "test_2016_flickr", "pair": "de-en", "src": "test.src", "ref": "test.tgt"},
                "slice": {"name": "A-T1-deep", "study": "paper_A", "table": "T1", "seeds": [1],
                          "rows": {"8L": "T1 deep", "7Ftoken+1L": "T1 deep"}, "stop": {"valid_steps": 200, "patience": 3}}}
    monkeypatch.setattr(sitting, "eval_checkpoint", lambda model: {
        "path": f"{model['name']}.pt", "step": 100, "criterion": "lowest validation cross-entropy", "valid_xent": 2.0})
    monkeypatch.setattr(sitting, "params_of", lambda path: None)

    def translate_until(jobs, device, deadline, max_length, logs, failures=None):
        if stopped:
            raise SystemExit("run.py: stopped by SIGTERM: what is done is packed")
        for name, job in jobs.items():
            Path(job["hyp"]).write_text("".join(line + "\n" for line in refs[:translated[name]]))
        failures.update(failed)
        return dict(translated)

    monkeypatch.setattr(sitting, "translate_until", translate_until)
    out = tmp_path / "results/published/A-T1-deep/2026-11-27-cpu-abcdef0"
    ident = {"sitting": out.name, "gpu": "cpu", "date": "2026-11-27"}
    try:
        sitting.evaluate(manifest, out, "cpu", {}, ident, 30, tmp_path / "logs")
    except SystemExit:
        assert stopped
    with open(out / "rows.csv", newline="") as handle:
        return {row["heads"]: row for row in csv.DictReader(handle)}


def test_rows_scored_on_part_of_the_test_set_are_partial_not_seeds(tmp_path, monkeypatch):
    """A translation cut by the evaluation's deadline: every model is scored on the sentences
    all of them translated, and each row says so with status ``partial`` (never averaged
    with other seeds' BLEU on the whole test set, studies.published.seeds_of)."""
    rows = _evaluated(tmp_path, monkeypatch, {"8L": 2, "7Ftoken+1L": 4}, {})
    assert {heads: row["status"] for heads, row in rows.items()} == {"8L": "partial", "7Ftoken+1L": "partial"}
    assert rows["8L"]["stop_reason"] == ("deadline at step 100; scored on the first 2 of 4 test sentences "
                                         "(the evaluation's deadline)")
    assert float(rows["8L"]["bleu"]) == float(rows["7Ftoken+1L"]["bleu"]) == 100.0
    (tmp_path / "whole").mkdir()
    everything = _evaluated(tmp_path / "whole", monkeypatch, {"8L": 4, "7Ftoken+1L": 4}, {})
    assert {row["status"] for row in everything.values()} == {"deadline"}
    assert everything["8L"]["stop_reason"] == "deadline at step 100"


def test_rows_written_before_the_translations_are_no_seeds_until_scored(tmp_path, monkeypatch):
    """A call stopped from outside in its translations leaves the folder as the evaluation's
    first write left it: every row without BLEU and ``partial`` (its training's stop, then
    "not yet scored"), never a seed of its model."""
    rows = _evaluated(tmp_path, monkeypatch, {"8L": 4, "7Ftoken+1L": 4}, {}, stopped=True)
    assert {heads: (row["status"], row["bleu"]) for heads, row in rows.items()} == {
        "8L": ("partial", ""), "7Ftoken+1L": ("partial", "")}
    assert rows["8L"]["stop_reason"] == "deadline at step 100; not yet scored"


def test_a_models_failed_translation_leaves_the_others_scored(tmp_path, monkeypatch):
    """7Ftoken+1L's translation ends with an error: 8L is still scored on the whole test set
    (a deadline row, a seed), 7Ftoken+1L's row says why it is not, and the publication lacks
    it as a failure."""
    rows = _evaluated(tmp_path, monkeypatch, {"8L": 4, "7Ftoken+1L": 0}, {"7Ftoken+1L": 1})
    assert (rows["8L"]["status"], float(rows["8L"]["bleu"])) == ("deadline", 100.0)
    assert rows["7Ftoken+1L"]["status"] == "partial" and rows["7Ftoken+1L"]["bleu"] == ""
    assert rows["7Ftoken+1L"]["stop_reason"] == "deadline at step 100; not scored: its translation ended with status 1"
    provenance = json.loads((tmp_path / "results/published/A-T1-deep/2026-11-27-cpu-abcdef0/provenance.json").read_text())
    assert provenance["lacks_by_cause"]["failed"] == [
        "7Ftoken+1L: translation ended with status 1 (logs/translate.7Ftoken+1L.log)"]
    assert not any(lack.startswith("BLEU") for lack in provenance["lacks_by_cause"]["deadline"])


@pytest.mark.slow
def test_the_shipped_bundle_runs_its_sitting_on_the_cpu(tmp_path):
    """The plan's next slice (nothing published yet: paper A's T1 deep row, seed 1), bundled
    and run on the CPU. What is asserted holds at any machine speed: a publication exists
    and says what it lacks; never that a deadline was met."""
    manifest = bundle.build(tmp_path / "gpu-bundle", published=tmp_path / "published", python_version="3.12",
                            cores=2)
    assert manifest["size_mib"] <= 55 and [m["heads"] for m in manifest["models"]] == ["8L", "7Ftoken+1L", "8Ftoken"]
    assert manifest["slice"]["name"] == "A-T1-deep" and manifest["slice"]["seeds"] == [1]
    assert not any(w.startswith(("torch-", "numpy-")) for w in manifest["wheels"])
    copy = tmp_path / "elsewhere" / "b"
    shutil.copytree(tmp_path / "gpu-bundle", copy)
    out, work = tmp_path / "out", tmp_path / "work"
    command = [sys.executable, str(copy / "run.py"), "--device", "cpu", "--work", str(work)]
    # a CPU shared with the other test files: translation gets half the budget. 120 s reach
    # what this test reads (the CPU profile window is iterations 3-4, marks every 5th);
    # 200 s only trained and translated longer, ~100 core-s of the suite
    first = subprocess.run(command + ["--budget", "120", "--eval-reserve", "60", "--out", str(out)],
                           capture_output=True, text=True, timeout=hang_guard(400), cwd=tmp_path)
    assert sorted(p.name for p in out.iterdir()) == ["headlab-sitting.tar.gz", "status.json"]
    status = json.loads((out / "status.json").read_text())
    assert status["published"], first.stdout[-3000:] + first.stderr[-3000:]
    assert status["calls"][0]["phases"].keys() == {"install", "train", "evaluate"}
    # slowness ends a training at the deadline; ending early with an error is a crash
    assert not {name: rc for name, rc in (status.get("exited") or {}).items() if rc}, first.stdout[-3000:]
    published = status["publication"]
    assert published.startswith("results/published/A-T1-deep/") and published.endswith(f"-cpu-{manifest['commit']}")
    with tarfile.open(out / "headlab-sitting.tar.gz") as tar:
        provenance = json.load(tar.extractfile(f"{published}/provenance.json"))
        names = tar.getnames()
        rows = list(csv.DictReader(tar.extractfile(f"{published}/rows.csv").read().decode().splitlines())) \
            if f"{published}/rows.csv" in names else []
    assert provenance["slice"] == "A-T1-deep" and provenance["status"] in STATUSES
    assert (provenance["status"] == "partial") == bool(provenance["lacks"])
    assert [row["heads"] for row in rows] == ["8L", "7Ftoken+1L", "8Ftoken"], provenance["lacks"]
    for row in rows:
        assert row["status"] in STATUSES and row["sitting"] == status["sitting"]
        # a model without BLEU is named in what the publication lacks
        assert row["bleu"] or any(row["heads"] in lack or "BLEU" in lack for lack in provenance["lacks"])
    assert f"{published}/learning_curve.8L.csv" in names and f"{published}/throughput.csv" in names
    # each model's recipe, recorded on the machine from the bundle's copy of its config and
    # data, is what this checkout's prepared config and files make with the runner's options
    from headlab.workflow import recipe
    from headlab.workflow.gpu_runner import training_overrides
    for row, model in zip(rows, manifest["models"]):
        options = yaml.safe_load((bundle.REPO / model["config"]).read_text())
        expected = recipe.of(recipe.with_overrides(options, training_overrides("cpu")), bundle.REPO)
        assert provenance["models"][model["name"]]["recipe"] == json.loads(json.dumps(expected))
        assert row["recipe"] == recipe.digest(expected) and expected["model_dtype"] == "fp32"
    # every training timed from inside; the first model's profile side by side, if it reached it
    with tarfile.open(out / "headlab-sitting.tar.gz") as tar:
        speed = {row["model"]: row for row in csv.DictReader(
            tar.extractfile(f"{published}/throughput.csv").read().decode().splitlines())}
        clocks = {name: json.load(tar.extractfile(f"logs/clock.{name}.json")) for name in speed
                  if f"logs/clock.{name}.json" in names}
    for name, clock in clocks.items():
        assert float(speed[name]["step_ms"]) > 0 and speed[name]["profile_where"] == (
            "side by side" if "profile" in clock else ""), (name, clock)
    assert set(clocks) - {"8L"} == {name for name, clock in clocks.items() if "profile" not in clock} - {"8L"}
    # every 5th iteration marked in Unix time, split by the side track the runner timed
    # (the suite's CPU stand-ins beside the trainings: one of the two kinds at least)
    call = status["calls"][0]
    assert call["started_at"] < call["started_at"] + call["gpu_tests_started_s"] < time.time()
    for name, clock in clocks.items():
        assert [iteration for iteration, _ in clock.get("marks", [])] == list(range(5, clock["iterations"] + 1, 5))
        assert (speed[name]["step_ms_side_track"] or speed[name]["step_ms_clear"]) if len(clock.get("marks", [])) > 1 \
            else not (speed[name]["step_ms_side_track"] or speed[name]["step_ms_clear"])
    # the GPU plan reads those clocks back (its throughput is checked against them)
    with tarfile.open(out / "headlab-sitting.tar.gz") as tar:
        tar.extractall(tmp_path / "unpacked", filter="data", members=[
            tar.getmember(f"{published}/{name}") for name in ("throughput.csv", "provenance.json")])
    timed = [row for row in speed.values() if row["step_ms"]]
    starts = [float(row["start_first_batch_s"]) for row in timed if row["start_first_batch_s"]]
    assert gpu_measures.measured_speed(tmp_path / "unpacked/results/published") == (
        {3: gpu_measures.Measured(published.removeprefix("results/published/"), provenance["created"], "cpu", 3,
                              max(float(row["step_ms"]) for row in timed) / 1000, max(starts, default=None))}
        if timed else {})
    # received as the next session receives a sitting: the plan then counts its seed
    from headlab.workflow import receive

    received = receive.receive(out / "headlab-sitting.tar.gz", tmp_path / "received")
    assert received == tmp_path / "received" / published.removeprefix("results/published/")
    assert gpu_plan.seed_states(gpu_plan.load().slice("A-T1-deep"), tmp_path / "received").never_run == [2, 3]
    # with the runner's status, whose evaluate phase the plan's evaluation check reads
    assert (received / "status-sitting.json").read_text() == (out / "status.json").read_text()
    evaluation = gpu_measures.measured_evaluation(tmp_path / "received")
    assert (evaluation.evaluated if evaluation else 0) == sum(1 for row in rows if row["bleu"])
    assert ("profile" in clocks.get("8L", {})) == (f"{published}/profile.8L.txt" in names)
    assert "logs/gpu-tests.log" in names and "train-logs/8L.log" in names and not any(n.endswith(".pt") for n in names)
    # a second call on the same machine: the remainder only, the models untouched
    second = subprocess.run(command + ["--budget", "40", "--out", str(tmp_path / "out2")],
                            capture_output=True, text=True, timeout=hang_guard(120), cwd=tmp_path)
    later = json.loads((tmp_path / "out2/status.json").read_text())
    phases = later["calls"][-1]["phases"].keys()
    # first what the first call's deadline cut of the evaluation, if anything: never less
    causes = provenance["lacks_by_cause"]
    assert sorted(provenance["lacks"]) == sorted(sum(causes.values(), [])) and not causes["failed"]
    cut = bool(causes["deadline"])
    assert second.returncode == 0 and phases == ({"evaluate-rest", "remainder"} if cut else {"remainder"})
    with tarfile.open(tmp_path / "out2/headlab-sitting.tar.gz") as tar:
        rows_later = list(csv.DictReader(tar.extractfile(f"{published}/rows.csv").read().decode().splitlines()))
    assert [row["heads"] for row in rows_later] == [row["heads"] for row in rows]
    assert all(after["bleu"] for before, after in zip(rows, rows_later) if before["bleu"])
    assert {k: v["checkpoints"] for k, v in later["models"].items()} == \
        {k: v["checkpoints"] for k, v in status["models"].items()}


def test_the_speed_rows_accumulate_from_every_sitting_folder(tmp_path):
    from headlab.workflow import sitting_speed

    smi = tmp_path / "nvidia-smi.csv"
    smi.write_text("\n$ nvidia-smi ...\n2026/11/27 14:28:51.511, 160.5, 11000, 99\n2026/11/27 14:29:01.511, 170.5, 12000, 99\n")
    summary = sitting_speed.smi_summary(smi)
    assert summary == {"power_w_mean": 165.5, "power_w_max": 170.5, "memory_mib_mean": 11500, "memory_mib_max": 12000.0}
    # 6 x 60M parameters x 12k target tokens/s over the H100's 989.4 TFLOPS
    assert sitting_speed.matrix_share(60_000_000, 12_000, "h100") == round(6 * 60e6 * 12e3 / 989.4e12, 4)
    assert sitting_speed.matrix_share(60_000_000, 12_000, "cpu") == ""
    for sitting_name in ("2026-11-27-h100-aaaaaaa", "2026-11-28-h200-bbbbbbb"):
        ident = {"gpu": sitting_name.split("-")[3], "commit": sitting_name[-7:], "date": sitting_name[:10],
                 "slice": "A-T1-deep", "sitting": sitting_name}
        rows = sitting_speed.speed_rows([{"name": "8L", "params": 60_000_000, "src_tok_s": 11000, "tgt_tok_s": 12000}],
                                        ident, summary, {}, {})
        folder = tmp_path / "published/A-T1-deep" / sitting_name
        folder.mkdir(parents=True)
        sitting_speed.write_rows(folder / "throughput.csv", rows)
    with open(sitting_speed.collect(tmp_path / "published"), newline="") as handle:
        table = list(csv.DictReader(handle))
    assert [(row["gpu"], row["model"]) for row in table] == [("h100", "8L"), ("h200", "8L")]


def test_a_speed_row_counts_the_models_that_trained_at_once_with_it(tmp_path):
    """A chain's stages train one after another (paper D: the parent alone, its gated
    fine-tune alone, then the pruned model and the control): each row's models_side_by_side
    is its stage's, which the GPU plan's throughput is checked against; a slice without a
    chain trains all at once."""
    def speed(models: list[dict], logs: Path = tmp_path / "no-logs", column: str = "models_side_by_side") -> dict:
        manifest = {"slice": {"name": "D-gates-8L"}, "commit": "abcdef0", "models": models}
        out = tmp_path / str(len(list(tmp_path.iterdir())))
        publication = sitting.Publication(out, manifest, {"sitting": "s", "gpu": "h100", "date": "2026-12-01"}, {})
        publication.rows = {model["name"]: {"src_tok_s": 40000} for model in models}
        sitting._speed(publication, manifest, logs, {}, {})
        with open(out / "throughput.csv", newline="") as handle:
            return {row["model"]: row[column] for row in csv.DictReader(handle)}

    chain = [{"name": "8L"}, {"name": "gated", "chain": {"stage": 1}}, {"name": "pruned", "chain": {"stage": 2}},
             {"name": "control", "chain": {"stage": 2}}]
    assert speed(chain) == {"8L": "1", "gated": "1", "pruned": "2", "control": "2"}
    # a compiled sitting's fine-tunes trained eager (run.py's train_args), and their rows say so
    logs = tmp_path / "compiled-logs"
    logs.mkdir()
    (logs / "speed-extra.json").write_text('{"train_compile": "default"}')
    assert speed(chain, logs, "train_compile") == {"8L": "default", "gated": "off", "pruned": "off", "control": "off"}
    assert speed([{"name": "8L"}, {"name": "7Ftoken+1L"}, {"name": "8Ftoken"}]) == dict.fromkeys(
        ["8L", "7Ftoken+1L", "8Ftoken"], "3")


def test_each_model_is_evaluated_at_its_best_validation_checkpoint(tmp_path):
    """Lowest validation cross-entropy among the checkpoints that load (one cut short by the
    stop is passed over); without validation, the newest that loads, and the criterion says so."""
    import torch

    save_model = str(tmp_path / "model")
    for step in (200, 400, 600):
        torch.save({"model": {"w": torch.zeros(2, 3)}, "generator": {"b": torch.zeros(4)}}, f"{save_model}_step_{step}.pt")
    Path(f"{save_model}_step_800.pt").write_bytes(b"cut short")
    model = {"save_model": save_model}
    assert sitting.eval_checkpoint(model)["criterion"].startswith("newest checkpoint")
    assert sitting.eval_checkpoint(model)["step"] == 600
    Path(f"{save_model}.valid.csv").write_text("step,xent,ppl,acc\n200,2.1,8.2,60\n400,1.9,6.7,63\n"
                                               "600,2.0,7.4,62\n800,1.5,4.5,70\n")
    chosen = sitting.eval_checkpoint(model)
    assert (chosen["step"], chosen["valid_xent"], chosen["criterion"]) == (400, 1.9, "lowest validation cross-entropy")
    assert sitting.params_of(chosen["path"]) == 10


def test_a_training_stop_is_read_from_its_log(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    model = {"dir": str(folder)}
    rows = [{"step": s, "split": "train", "xent": x} for s, x in ((100, 5.0), (200, 3.0), (300, 2.5))]
    (folder / "train.log").write_text("[INFO] Training finished after not improving. Early Stop!\n")
    assert sitting.stop_of(model, rows, 0, 3) == ("converged", "no valid improvement for 3 checks (stopped at step 300)")
    (folder / "train.log").write_text("")
    # no exit status of its own: the runner stopped it at the deadline
    assert sitting.stop_of(model, rows, None, 3) == ("deadline", "deadline at step 300")
    # ended by a signal before the deadline (the OOM killer's, a crash): not a deadline row
    assert sitting.stop_of(model, rows, -9, 3) == ("partial", "training killed by signal 9 at step 300 "
                                                              "(before the deadline)")
    # ended by itself, no early stop: every planned step trained (a chain's fine-tune)
    assert sitting.stop_of(model, rows, 0, 3) == ("converged", "trained all its planned steps (step 300)")
    assert sitting.stop_of(model, rows, 1, 3)[0] == "partial"
    rising = rows + [{"step": s, "split": "train", "xent": x} for s, x in ((400, 3.3), (500, 3.9), (600, 4.0))]
    assert sitting.stop_of(model, rising, -15, 3)[0] == "diverged"


def _rehearsal_out(folder: Path, status: dict, files: dict[str, str]) -> Path:
    import io

    folder.mkdir()
    (folder / "status.json").write_text(json.dumps(status))
    with tarfile.open(folder / "headlab-sitting.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return folder


CUT = "BLEU and chrF on test sentences 5-16"


@pytest.mark.parametrize("status, lacks, causes, passes", [
    ("deadline", [], {}, True),
    ("deadline", [CUT], {"deadline": [CUT]}, False),                 # a lack under a status that hides it
    ("partial", [CUT], {"deadline": [CUT], "failed": []}, True),
    ("partial", [CUT], {}, False),                                   # a lack without its cause
    ("partial", [CUT], {"failed": [CUT]}, False)])                   # a failure, not time
def test_the_rehearsal_checks_a_labelled_publication_not_a_deadline(tmp_path, status, lacks, causes, passes):
    """A converged-looking provenance that lacks something is caught: ``lacks`` is non-empty
    exactly when the status is partial, each lack has its cause, and none is a failure. A
    row that does not say how its checkpoint was chosen fails it too."""
    from headlab.workflow import rehearsal

    folder = "results/published/A-T1-deep/2026-11-27-cpu-abcdef0"
    models = {"8L": {"checkpoints": [2, 4]}, "7Ftoken+1L": {"checkpoints": [2, 4]}}
    header = ",".join(gpu_plan.ROW_COLUMNS)
    row = {column: "" for column in gpu_plan.ROW_COLUMNS}
    def rows_csv(selected_by: str) -> list[str]:
        return [header] + [",".join(str({**row, "heads": h, "model": h, "bleu": "1.0", "best_step": "4",
                                         "selected_by": selected_by}[c]) for c in gpu_plan.ROW_COLUMNS)
                           for h in models]
    lines = rows_csv(BY_NEWEST)
    provenance = {"status": status, "lacks": lacks, "lacks_by_cause": causes,
                  "machine": {"torch_file": "/venv/lib/torch/__init__.py"}}
    speed = "gpu,model,models_side_by_side,step_ms,start_first_batch_s\ncpu,8L,2,900.5,31\ncpu,7Ftoken+1L,2,870,30\n"
    first_call = {"phases": {"evaluate": {"wall_s": 40.0}}}
    out = _rehearsal_out(tmp_path / "out", {"published": True, "publication": folder, "models": models,
                                            "calls": [first_call]},
                         {f"{folder}/provenance.json": json.dumps(provenance), f"{folder}/rows.csv": "\n".join(lines),
                          f"{folder}/throughput.csv": speed})
    later = {"models": models, "publication": folder, "calls": [{"phases": {"remainder": {}}}]}
    second = _rehearsal_out(tmp_path / "out2", later, {f"{folder}/provenance.json": json.dumps(provenance),
                                                       f"{folder}/throughput.csv": speed})
    results = dict(rehearsal.checks(out, second, 300, (120, 20), [{"name": "8L"}, {"name": "7Ftoken+1L"}]))
    assert all(results.values()) is passes
    # the second call's speed rows that ended in an error (the probe's measures lost) fail it
    assert results["the second call's speed rows rewritten without an error (status None)"]
    (second / "status.json").write_text(json.dumps({**later, "calls": [{"phases": {"remainder": {}},
                                                                        "speed_rows_rc": 1}]}))
    assert not dict(rehearsal.checks(out, second, 300, (120, 20), [{"name": "8L"}, {"name": "7Ftoken+1L"}]))[
        "the second call's speed rows rewritten without an error (status 1)"]
    scored = [check for check in results if check.startswith("BLEU for 2 of 2 models")]
    assert scored == ["BLEU for 2 of 2 models, each at its own evaluated checkpoint, saying how it was chosen "
                      f"({BY_NEWEST})"] and results[scored[0]]
    unsaid = _rehearsal_out(tmp_path / "unsaid", {"published": True, "publication": folder, "models": models,
                                                  "calls": [first_call]},
                            {f"{folder}/provenance.json": json.dumps(provenance), f"{folder}/throughput.csv": speed,
                             f"{folder}/rows.csv": "\n".join(rows_csv(""))})
    unsaid = dict(rehearsal.checks(unsaid, second, 300, (120, 20), [{"name": "8L"}, {"name": "7Ftoken+1L"}]))
    assert not unsaid["BLEU for 2 of 2 models, each at its own evaluated checkpoint, saying how it was chosen "
                      "(not said)"]
    # what it still lacks is printed, with why; a call that published nothing has no such lines
    assert rehearsal.final_lacks(out) == [(cause, what) for cause, lines in causes.items() for what in lines]
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    (nothing / "status.json").write_text(json.dumps({"models": models, "calls": [{}]}))
    assert rehearsal.final_lacks(nothing) == []


def test_the_rehearsal_checks_the_second_calls_probes_reached_the_speed_rows(tmp_path):
    """The rehearsal's second call runs both probes from the bundle: their figures in its
    speed rows, the plan reading two models side by side (150 ms, overlap 0.8) and one alone
    (80 ms) from them. A probe that ended in an error fails the check, one stopped at its
    time or not run for want of it is said; one whose figures never reached the rows fails."""
    from headlab.workflow import rehearsal

    folder = "results/published/A-T1-deep/2026-11-27-cpu-abcdef0"
    header = ("gpu,model,models_side_by_side,step_ms,mps,step_ms_alone,models_probed_side_by_side,"
              "step_ms_probed_side_by_side,probed_overlap,probed_mps\n")
    speed = header + "cpu,8L,3,900,off,80,2,150,0.8,off\ncpu,8Ftoken,3,870,off,,2,140,0.8,off\n"

    def second(name, call, rows=speed):
        return _rehearsal_out(tmp_path / name, {"publication": folder, "calls": [{}, call]},
                              {f"{folder}/throughput.csv": rows,
                               f"{folder}/provenance.json": '{"created": "2026-11-27 10:00:00 UTC"}'})

    assert rehearsal.probe_check(second("ran", {"crowd_rc": 0, "probe_rc": 0})) == (
        "the second call's probes (side by side status 0; alone status 0): in the speed rows; the plan reads 1, 2 "
        "model(s) at once from them", True)
    text, passed = rehearsal.probe_check(second("crashed", {"crowd_rc": 1, "probe_rc": 0}))
    assert not passed and text.startswith("the second call's probes (side by side status 1; alone status 0)")
    assert rehearsal.probe_check(second("slow", {"crowd_rc": None}))[1] is True      # stopped, then not run
    assert "(side by side stopped at its time; alone not run)" in rehearsal.probe_check(second("slow2", {"crowd_rc": None}))[0]
    lost = second("lost", {"crowd_rc": 0, "probe_rc": 0}, header + "cpu,8L,3,900,off,80,,,,\n")
    assert rehearsal.probe_check(lost) == ("the second call's probes (side by side status 0; alone status 0): in the "
                                          "speed rows, lacking side by side; the plan reads 1 model(s) at once from "
                                          "them", False)
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    (nothing / "status.json").write_text("{}")
    assert rehearsal.probe_check(nothing)[1] is False


def test_the_rehearsal_fails_a_cuda_suite_stand_in_that_failed_under_the_machines_torch(tmp_path):
    """The suite's CPU stand-ins run in the rehearsal's venv, the GPU machine's torch 2.11,
    whose dynamo breaks graphs where this checkout's torch does not (the compiled case counts
    them): a failed one fails the check, by name; those passed or skipped are counted, and a
    suite the calls' time cut before any test finished is said, not a failure."""
    from headlab.workflow import rehearsal

    folder = "results/published/A-T1-deep/2026-11-27-cpu-abcdef0"

    def second(name, suite):
        files = {f"{folder}/provenance.json": "{}"} | ({} if suite is None else {f"{folder}/cuda-suite.csv": suite})
        return _rehearsal_out(tmp_path / name, {"publication": folder, "calls": [{}, {}]}, files)

    head = "test,outcome,when\n"
    case = "tests/gpu/test_gpu.py::test_the_compiled_model_trains_as_the_eager_one[cpu-fixed-bf16]"
    passed = head + f"tests/gpu/test_gpu.py::test_layer_matches_cpu[cpu-enc-4Local--bf16],passed,call\n{case},passed,call\n"
    assert rehearsal.suite_check(second("ok", passed)) == (
        "the CUDA suite's CPU stand-ins under the machine's torch: 2 passed", True)
    failed = head + f"{case},failed,call\ntests/gpu/test_base_size.py::test_x[cpu-enc-8L-bf16],skipped,setup\n"
    assert rehearsal.suite_check(second("failed", failed)) == (
        "the CUDA suite's CPU stand-ins under the machine's torch: 1 skipped; failed: "
        "test_the_compiled_model_trains_as_the_eager_one[cpu-fixed-bf16]", False)
    assert rehearsal.suite_check(second("cut", None)) == (
        "the CUDA suite's CPU stand-ins under the machine's torch: none finished", True)
    nothing = tmp_path / "nothing"
    nothing.mkdir()
    (nothing / "status.json").write_text("{}")
    assert rehearsal.suite_check(nothing)[1] is False


def test_the_rehearsal_reads_the_sittings_clock_back_as_the_plan_does():
    """The sitting's throughput.csv as gpu_measures.measured_speed reads it: the slowest model's
    step with both side by side (900.5 ms), the later first batch (31 s); and what the side
    track cost the trainings (said, not checked: 8L 1,000 ms a step beside the suite, 800
    clear, +25%)."""
    from headlab.workflow import rehearsal

    folder = "results/published/A-T1-deep/2026-11-27-cpu-abcdef0"
    header = "gpu,model,models_side_by_side,step_ms,start_first_batch_s\n"
    assert rehearsal.speed_check(folder, {"created": "2026-11-27 10:00:00 UTC"},
                                 (header + "cpu,8L,2,900.5,31\ncpu,7Ftoken+1L,2,870,30\n").encode()) == (
        "the plan reads the sitting's clock: 2 side by side 0.900 s a step, first batch in 31 s; side track: no "
        "published sitting has split its trainings' steps by what ran beside them yet", True)
    split = "gpu,model,models_side_by_side,step_ms,step_ms_side_track,step_ms_clear\ncpu,8L,2,900.5,1000,800\n"
    assert rehearsal.speed_check(folder, {}, split.encode()) == (
        "the plan reads the sitting's clock: 2 side by side 0.900 s a step, first batch in (not timed); side track: at "
        "A-T1-deep/2026-11-27-cpu-abcdef0, the trainings took 1000 ms a step while the CUDA suite or the bench ran "
        "beside them, 800 ms while neither did (+25%; a mean over 1 models)", True)
    assert rehearsal.speed_check(folder, {}, None) == ("the plan reads the sitting's clock: no throughput.csv "
                                                       "published", False)
    # a sitting whose clock wrote nothing, or nonsense
    assert rehearsal.speed_check(folder, {}, (header + "cpu,8L,2,,\n").encode()) == (
        "the plan reads the sitting's clock: no step_ms", False)
    text, passed = rehearsal.speed_check(folder, {}, (header + "cpu,8L,2,-3,\n").encode())
    assert not passed and text.endswith("A-T1-deep/2026-11-27-cpu-abcdef0/throughput.csv:2: [step_ms] step_ms '-3' "
                                        "is not a positive number")


def test_the_rehearsal_reads_the_sittings_evaluation_back_as_the_plan_does():
    """The call's status as gpu_measures.measured_evaluation reads a received sitting's: the
    evaluate phase (42.5 s) less the atlas (12.5 s), 2 of 3 rows scored."""
    from headlab.workflow import rehearsal

    folder = "results/published/A-T1-deep/2026-11-27-cpu-abcdef0"
    rows = ("heads,bleu\n8L,30.1\n7Ftoken+1L,31.0\n8Ftoken,\n").encode()
    status = {"calls": [{"phases": {"evaluate": {"wall_s": 42.5}}}]}
    provenance = {"created": "2026-11-27 10:00:00 UTC", "atlas": {"wall_s": 12.5}}
    assert rehearsal.evaluation_check(folder, provenance, rows, status) == (
        "the plan reads the sitting's evaluation: 2 rows in 30 s (its head atlas aside)", True)
    assert rehearsal.evaluation_check(folder, provenance, None, status)[1] is False
    assert rehearsal.evaluation_check(folder, provenance, rows, {"calls": [{"phases": {}}]}) == (
        "the plan reads the sitting's evaluation: no evaluate phase or no row scored", False)
    text, passed = rehearsal.evaluation_check(folder, provenance, rows, {"calls": "x"})
    assert not passed and "status-sitting.json: not a runner's status" in text


def test_the_rehearsal_expects_a_row_per_trained_model_and_initial_checkpoint():
    from headlab.workflow import rehearsal

    models = [{"name": "8L"}, {"name": "gated", "chain": {}}, {"name": "pruned", "chain": {"initial_row": "Non-inverted (initial)"}},
              {"name": "control", "chain": {}}]
    assert rehearsal.expected_rows(models, []) == 5
    assert rehearsal.expected_rows(models, ["pruned: not trained (a fine-tune of the chain never started: ...)"]) == 3
    assert rehearsal.expected_rows(models, ["gated: not trained (...)", "control: not trained (...)"]) == 3


def test_the_cuda_suite_so_far_is_published_with_the_sitting(tmp_path):
    logs, out = tmp_path / "logs", tmp_path / "out"
    logs.mkdir()
    out.mkdir()
    (logs / "gpu-tests.jsonl").write_text(
        '{"nodeid": "tests/gpu/a.py::t[cuda]", "when": "call", "outcome": "failed", "seconds": 1}\n'
        '{"nodeid": "tests/gpu/a.py::u[cuda]", "when": "call", "outcome": "passed", "seconds": 1}\n'
        '{"nodeid": "tests/gpu/a.py::t[cuda]", "when": "call", "outcome": "passed", "seconds": 1}\n{"nodeid": "tests/g')
    sitting._suite(out, logs)
    with open(out / "cuda-suite.csv", newline="") as handle:
        assert [(row["test"], row["outcome"]) for row in csv.DictReader(handle)] == \
            [("tests/gpu/a.py::t[cuda]", "passed"), ("tests/gpu/a.py::u[cuda]", "passed")]


def _atlas_model(tmp_path: Path) -> tuple[dict, dict]:
    """A tiny trained-model stand-in as the sitting sees it: its config (the validation data
    it names) and the checkpoint the sitting evaluated."""
    import torch
    import yaml

    from headlab.engine.model import build_model, model_opt, save_checkpoint, toy_vocabs

    folder = tmp_path / "models/8L"
    folder.mkdir(parents=True)
    torch.manual_seed(0)
    vocabs = toy_vocabs(24, share=True)
    opt = model_opt(hidden_size=16, heads=2, enc_heads="2L", transformer_ff=32, enc_layers=1, dec_layers=1,
                    dropout=0.0, attention_dropout=0.0)
    save_checkpoint(build_model(opt, vocabs), opt, vocabs, folder / "model_step_2.pt")
    words = [f"w{i}" for i in range(20)]
    (folder / "val.src").write_text("".join(" ".join(words[i:i + 5]) + "\n" for i in range(8)))
    (folder / "val.tgt").write_text("".join(" ".join(words[i + 2:i + 6]) + "\n" for i in range(8)))
    (folder / "onmt.yaml").write_text(yaml.safe_dump(
        {"data": {"valid": {"path_src": str(folder / "val.src"), "path_tgt": str(folder / "val.tgt")}}}))
    model = {"name": "8L", "heads": "8L", "config": str(folder / "onmt.yaml"), "dir": str(folder)}
    return model, {"path": str(folder / "model_step_2.pt"), "step": 2}


def _publication(tmp_path: Path) -> sitting.Publication:
    manifest = {"commit": "abcdef0", "slice": {"name": "A-T1-deep"}}
    out = tmp_path / "results/published/A-T1-deep/2026-11-27-cpu-abcdef0"
    return sitting.Publication(out, manifest, {"sitting": out.name, "gpu": "cpu", "date": "2026-11-27"}, {})


def test_the_sitting_writes_each_evaluated_models_head_table_for_the_atlas(tmp_path):
    """After the scores, atlas-model on each evaluated checkpoint over the first validation
    sentences (a few on the CPU): ``atlas/<model>/heads.csv`` and ``timing.json`` in the
    sitting folder, which the returned tarball carries (no checkpoint comes back)."""
    import time

    import pandas as pd

    model, evaluated = _atlas_model(tmp_path)
    publication = _publication(tmp_path)
    sitting.head_atlas(publication, [model], {"8L": evaluated}, "cpu", time.monotonic() + 300, tmp_path / "logs")
    folder = publication.out / "atlas/8L"
    heads = pd.read_csv(folder / "heads.csv")
    assert len(heads) == 3 * 2 and heads["entropy"].notna().all()
    assert json.loads((folder / "timing.json").read_text())["sentences"] == sitting.ATLAS_SENTENCES["cpu"]
    assert publication.lacks == [] and publication.extra["atlas"]["models"]["8L"] == {"step": 2, "sentences": 2, "rc": 0}


def test_a_later_calls_evaluation_keeps_the_atlas_an_earlier_call_wrote(tmp_path):
    """A second call completing the evaluation (its translations cut) finds the first call's
    atlas of the same checkpoint: kept, with no time it would need to make it again."""
    model, evaluated = _atlas_model(tmp_path)
    sitting.head_atlas(_publication(tmp_path), [model], {"8L": evaluated}, "cpu", time.monotonic() + 300,
                       tmp_path / "logs")
    later = _publication(tmp_path)
    heads = (later.out / "atlas/8L/heads.csv").read_text()
    sitting.head_atlas(later, [model], {"8L": evaluated}, "cpu", time.monotonic() + 1, tmp_path / "logs")
    assert later.lacks == [] and (later.out / "atlas/8L/heads.csv").read_text() == heads
    assert later.extra["atlas"]["models"]["8L"] == {"step": 2, "sentences": 2, "rc": 0, "earlier_call": True}


def test_a_sitting_short_of_time_skips_the_head_atlas_and_says_so(tmp_path):
    import time

    model, evaluated = _atlas_model(tmp_path)
    publication = _publication(tmp_path)
    no_checkpoint = {**model, "name": "8Ftoken"}
    sitting.head_atlas(publication, [model, no_checkpoint], {"8L": evaluated, "8Ftoken": None}, "cpu",
                       time.monotonic() + sitting.ATLAS_MIN_S["cpu"] - 5, tmp_path / "logs")
    assert not (publication.out / "atlas").exists()
    assert len(publication.lacks) == 1 and publication.lacks[0].startswith("head atlas of 8L: skipped")
    publication.write()
    provenance = json.loads((publication.out / "provenance.json").read_text())
    assert provenance["lacks"] == publication.lacks and provenance["status"] == "partial"
    # time, not a fault: what a later call's evaluation may add
    assert provenance["lacks_by_cause"] == {"deadline": publication.lacks, "failed": [], "not trained": []}
    with pytest.raises(ValueError, match="one of deadline, failed, not trained"):
        publication.lack("slow", "BLEU")


def test_the_rehearsal_checks_every_training_was_timed_and_the_profile_did_not_fail():
    from headlab.workflow import rehearsal

    traced = {"8L": {"iterations": 30, "profile": {"profile_steps": 2}}, "8Ftoken": {"iterations": 28}}
    text, passed = rehearsal.clock_check(traced, ["8L", "8Ftoken"])
    assert passed and text == "every training timed from inside (2 clocks); 8L's profile window traced"
    # a slow machine: the window not reached is said, and not a failure
    assert rehearsal.clock_check({"8L": {"iterations": 2}, "8Ftoken": {}}, ["8L", "8Ftoken"]) == (
        "every training timed from inside (2 clocks); 8L's profile window not reached in 2 iterations", True)
    assert not rehearsal.clock_check({"8L": traced["8L"]}, ["8L", "8Ftoken"])[1]          # 8Ftoken's clock missing
    failed = rehearsal.clock_check({"8L": {"iterations": 9, "profile_error": "RuntimeError: no CUPTI"}}, ["8L"])
    assert failed == ("every training timed from inside (1 clocks); 8L's profile window failed: RuntimeError: "
                      "no CUPTI", False)


def _runner_reading(tmp_path, provenance: dict | None, rc=0) -> gpu_runner.Sitting:
    """A runner whose evaluation just ended with ``rc``, having written ``provenance`` (None: nothing)."""
    runner = object.__new__(gpu_runner.Sitting)
    runner.src, runner.call, runner.procs = tmp_path, {}, {}
    runner.manifest = {"slice": {"name": "A-T1-deep"}, "commit": "abcdef0", "models": []}
    runner.state = {"publication": "results/published/A-T1-deep/2026-11-29-h100-abcdef0", "sitting": "s"}
    folder = tmp_path / runner.published()
    folder.mkdir(parents=True)
    if provenance is not None:
        (folder / "provenance.json").write_text(json.dumps(provenance))
    runner.read_publication(rc, "evaluate")
    return runner


def test_a_later_call_completes_what_the_deadline_cut_never_what_failed(tmp_path):
    """The runner reads the causes the sitting wrote (``lacks_by_cause``), not the words of
    ``lacks``: the deadline's cuts are completed by a later call, a failure or an untrained
    model never; an evaluation stopped before it wrote anything is the deadline's, one that
    ended by itself with an error is a failure."""
    cut = "BLEU and chrF on test sentences 5-16 of test_2016_flickr: not translated before the deadline"
    atlas = "head atlas of 8L: stopped at the deadline (logs/atlas.8L.log)"
    untrained = "control: not trained (a fine-tune of the chain never started: no time left for its stage)"
    causes = {"deadline": [cut, atlas], "failed": [], "not trained": [untrained]}
    runner = _runner_reading(tmp_path / "1", {"status": "partial", "lacks": [untrained, cut, atlas],
                                              "lacks_by_cause": causes})
    assert runner.evaluation_left() == [cut, atlas]
    failed = {**causes, "failed": ["8DEA: translation ended with status 1 (logs/translate.8DEA.log)"]}
    assert _runner_reading(tmp_path / "2", {"lacks": [], "lacks_by_cause": failed}).evaluation_left() == []
    assert _runner_reading(tmp_path / "3", {"lacks": [untrained], "lacks_by_cause": {
        "deadline": [], "failed": [], "not trained": [untrained]}}).evaluation_left() == []
    # a publication of an earlier layout, without causes: nothing is taken for the deadline's
    assert _runner_reading(tmp_path / "4", {"lacks": [cut]}).evaluation_left() == []
    stopped = _runner_reading(tmp_path / "5", None, rc=None)
    provenance = json.loads((tmp_path / "5" / stopped.published() / "provenance.json").read_text())
    assert provenance["status"] == "partial" and provenance["lacks"] == [
        "rows.csv, learning curves, speed rows, BLEU and chrF: the evaluation was stopped at its deadline "
        "before writing anything (logs/evaluate.log)"]
    assert stopped.evaluation_left() == provenance["lacks"] == provenance["lacks_by_cause"]["deadline"]
    crashed = _runner_reading(tmp_path / "6", None, rc=1)
    assert crashed.evaluation_left() == [] and crashed.state["lacks_by_cause"]["failed"] == [
        "rows.csv, learning curves, speed rows, BLEU and chrF: the evaluation ended with status 1 before "
        "writing anything (logs/evaluate.log)"]
    assert crashed.state["error"] == "evaluation ended with status 1: see logs/evaluate.log"


def test_a_later_call_translates_only_the_chunks_an_earlier_one_left(tmp_path, monkeypatch):
    """A second call completing the evaluation that the first call's deadline cut keeps the
    chunks finished from the same checkpoint; another checkpoint translates them again."""
    logs, calls, fail = tmp_path / "logs", tmp_path / "calls.txt", tmp_path / "fail"
    logs.mkdir()
    src = tmp_path / "test.src"
    src.write_text("".join(f"s{i}\n" for i in range(10)))

    def fake(job, chunk, hyp, device, max_length):
        # the source upper-cased; the second chunk fails (a deadline) while `fail` exists
        script = ("import sys, pathlib; src, hyp, calls, fail = map(pathlib.Path, sys.argv[1:]); "
                  "calls.open('a').write(hyp.name + '\\n'); "
                  "sys.exit(1) if fail.exists() and 'chunk1' in hyp.name else hyp.write_text(src.read_text().upper())")
        return [sys.executable, "-c", script, str(chunk), str(hyp), str(calls), str(fail)]

    monkeypatch.setattr(sitting, "translate_command", fake)
    monkeypatch.setitem(sitting.FIRST_CHUNK, "cpu", 4)
    job = {"checkpoint": "model_step_200.pt", "src": str(src), "dtype": "fp32", "hyp": str(tmp_path / "8L.hyp")}
    fail.touch()
    failures = {}
    assert sitting.translate_until({"8L": job}, "cpu", time.monotonic() + 60, 250, logs, failures) == {"8L": 4}
    assert failures == {"8L": 1}         # ended by itself with an error: named, not taken for the deadline
    fail.unlink()
    failures = {}
    assert sitting.translate_until({"8L": job}, "cpu", time.monotonic() + 60, 250, logs, failures) == {"8L": 10}
    assert failures == {}
    assert calls.read_text().split() == ["8L.chunk0.bpe", "8L.chunk1.bpe", "8L.chunk1.bpe"]
    assert Path(job["hyp"]).read_text() == "".join(f"S{i}\n" for i in range(10))
    later = {**job, "checkpoint": "model_step_400.pt"}
    assert sitting.translate_until({"8L": later}, "cpu", time.monotonic() + 60, 250, logs) == {"8L": 10}
    assert calls.read_text().split()[3:] == ["8L.chunk0.bpe", "8L.chunk1.bpe"]


def test_make_gpu_rehearsal_plan_rehearses_every_slice_in_the_plans_order():
    result = subprocess.run(["make", "-n", "gpu-rehearsal-plan"], cwd=bundle.REPO, capture_output=True, text=True,
                            timeout=120)
    slices = re.findall(r"gpu-bundle --out gpu-bundle --slice (\S+)", result.stdout)
    assert result.returncode == 0 and slices == [entry.name for entry in gpu_plan.load().slices] and len(slices) == 5
    assert result.stdout.count("-m headlab.workflow.rehearsal --bundle gpu-bundle") == 5


def _later_call(tmp_path, left: float, first_suite_rc, probe_side_by_side: int | None = 8, device: str = "cuda",
                probe_first: str | None = None, compile_side_by_side: int | None = None):
    """A runner's second call on a fake clock: each step takes what it is given (the rest
    of the CUDA suite 20 s); what ran, with its timeout and command, and the MPS calls."""
    runner = object.__new__(gpu_runner.Sitting)
    runner.args = argparse.Namespace(device=device, budget=left + 15)
    runner.src, runner.logs, runner.resolved = tmp_path, tmp_path / "logs", tmp_path / "manifest.json"
    runner.state_path = tmp_path / "state.json"
    runner.logs.mkdir(parents=True)
    # paper D's shape: the parent trains first, its fine-tune after (a chain's stage 1)
    runner.manifest = {"models": [{"name": "8L", "config": "8L/onmt.yaml"},
                                  {"name": "gated", "config": "gated/onmt.yaml", "chain": {"stage": 1}}],
                       "results": "results", "slice": ({} if probe_side_by_side is None else
                                                        {"probe_side_by_side": probe_side_by_side})
                       | ({} if probe_first is None else {"probe_first": probe_first})
                       | ({} if compile_side_by_side is None else {"compile_side_by_side": compile_side_by_side})}
    runner.state = {"publication": "pub", "sitting": "s", "gpu": "h100",
                    "calls": [{"gpu_tests_rc": first_suite_rc}, {}]}
    runner.call = runner.state["calls"][-1]
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "rows.csv").write_text("model\n8L\n")
    clock = {"left": left}
    ran, commands, mps = [], {}, []
    runner.envs = {}

    def run(name, cmd, timeout, extra_env=None):
        ran.append((name, round(timeout)))
        commands[name] = cmd
        runner.envs[name] = extra_env or {}
        clock["left"] -= min(timeout, 20.0) if name == "gpu-tests-rest" else timeout
        return 0

    runner.left, runner.run = (lambda: clock["left"]), run
    runner.start_mps = lambda record="mps": mps.append(("start", record))
    runner.stop_mps = lambda record="mps": mps.append(("stop", record))
    runner.complete_evaluation = runner.phase = lambda *args: None
    runner.end_phase = lambda *args, **kwargs: None
    runner.remainder()
    return runner, ran, commands, mps


@pytest.mark.parametrize("first_suite_rc", [0, 1, None])
def test_a_later_call_probes_side_by_side_then_alone_before_the_idle_bench(first_suite_rc, tmp_path):
    """The second call (300 s less 15 of packing) after the evaluation's rest: the CUDA suite
    only where the first call's did not pass whole (kept to the 285 s less both probes' 190
    and the 15 s of the speed rows that publish them: the benches' too would leave it under
    30 s), then the probe side by side (8 copies of the first stage's models under MPS,
    recorded apart from the trainings' mode: the plan's seconds a step with one seed more a
    sitting), then the probe alone (one model), which on a GPU then compiles it and takes the
    rest of the call up to its 90 + 150 s (what compiling buys: unmeasured, so before the idle
    bench that earlier sittings measured), then the speed rows, which carry both probes into
    the publication before anything else can cut the call. With the call's time not taken,
    the idle bench follows, each path half of what is left less the speed rows' 15 s, then
    the speed rows again, with it."""
    runner, ran, commands, mps = _later_call(tmp_path, 285.0, first_suite_rc)
    if first_suite_rc == 0:       # passed whole beside the trainings: nothing to run again
        assert ran == [("probe-side-by-side", 100), ("probe", 170), ("speed-rows", 15)]
        assert runner.call["gpu_tests_rest"] == "none: the suite passed whole in an earlier call"
    else:                         # failed, or stopped at the trainings' end: the rest runs first
        assert ran == [("gpu-tests-rest", 80), ("probe-side-by-side", 100), ("probe", 150), ("speed-rows", 15)]
        assert "gpu_tests_rest" not in runner.call
    crowd = commands["probe-side-by-side"]
    assert crowd[crowd.index("--side-by-side") + 1] == "8" and crowd.count("--config") == 1
    assert crowd[crowd.index("--config") + 1] == "8L/onmt.yaml"     # the parent, not its fine-tune
    assert crowd[crowd.index("--out") + 1] == str(runner.logs / gpu_runner.CROWD_FOLDER)
    assert mps == [("start", "crowd_mps"), ("stop", "crowd_mps")] and runner.call["crowd_side_by_side"] == 8
    alone = commands["probe"]
    assert alone[alone.index("--compile"):alone.index("--") + 1] == ["--compile", "default", "--"]
    # the crowd's 8 copies each their share of the cores; the probe alone compiles with the
    # workers one training of the slice's first stage (the parent alone) has beside the runner
    share = {n: str(max(1, gpu_runner.usable_cores() // (n + 1))) for n in (1, 4, 8)}
    assert runner.envs["probe-side-by-side"] == {"OMP_NUM_THREADS": share[8], "MKL_NUM_THREADS": share[8],
                                                 "TORCHINDUCTOR_COMPILE_THREADS": share[8]}
    assert runner.envs["probe"] == {"TORCHINDUCTOR_COMPILE_THREADS": share[1]}
    assert runner.call["probe_compile_threads"] == int(share[1])
    # a bundle that says how many trainings the plan's largest stage runs: one of those's workers
    runner, _, _, _ = _later_call(tmp_path / "planned", 285.0, 0, compile_side_by_side=4)
    assert runner.envs["probe"] == {"TORCHINDUCTOR_COMPILE_THREADS": share[4]}
    # a long call: the probe and its compile end within their 240 s; the idle bench gets the rest
    _, ran, _, _ = _later_call(tmp_path / "long", 500.0, 0)
    assert ran == [("probe-side-by-side", 100), ("probe", 240), ("speed-rows", 15), ("bench-idle-fused", 60),
                   ("bench-idle-blocked", 60), ("speed-rows", 25)]


def test_trainings_side_by_side_share_the_cores_for_their_math_and_their_compile_workers(tmp_path, monkeypatch):
    """Three trainings on 16 cores: 4 threads each (one share kept for the runner), for
    their math and for inductor's compile workers, which would otherwise start one per core
    in each compiling training (48 processes holding torch); the CUDA suite beside them
    compiles with as many workers as one of them; one alone on 2 cores: 1."""
    runner = object.__new__(gpu_runner.Sitting)
    runner.src, runner.procs = tmp_path, {}
    names = ["8L", "7Ftoken+1L", "8Ftoken"]
    runner.prepared = lambda: [{"name": name, "dir": name} for name in names]
    runner.train_args = lambda model: ["train", model["name"]]
    started = {}

    def start(name, cmd, log, extra_env=None):
        started[name] = extra_env
        runner.procs[name] = subprocess.Popen(["true"])
        runner.procs[name].wait()
        return runner.procs[name]

    runner.start, runner.stop = start, (lambda name: None)
    runner.elapsed = lambda: 0.0
    monkeypatch.setattr(gpu_runner, "usable_cores", lambda: 16)
    assert runner.train_stage(names, 100.0, iter(())) == dict.fromkeys(names, 0)
    assert started == dict.fromkeys(names, {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4",
                                            "TORCHINDUCTOR_COMPILE_THREADS": "4"})
    # the CUDA suite beside them compiles its compiled cases with one training's workers
    runner.manifest, runner.logs, runner.call = {"models": [{"name": name} for name in names]}, tmp_path, {}
    runner.test_report, runner.suite_args = (lambda: tmp_path / "report.jsonl"), (lambda: ["pytest"])
    runner.bench_args = lambda name: ["bench", name]
    next(runner.side_track(100.0))
    assert started["gpu-tests"] == {"HEADLAB_TEST_REPORT": str(tmp_path / "report.jsonl"),
                                    "TORCHINDUCTOR_COMPILE_THREADS": "4"}
    monkeypatch.setattr(gpu_runner, "usable_cores", lambda: 2)
    assert gpu_runner.cores_each(1)["TORCHINDUCTOR_COMPILE_THREADS"] == "1" == gpu_runner.cores_each(3)["OMP_NUM_THREADS"]


def test_a_rehearsals_later_call_runs_both_probes_sized_for_two_cores(tmp_path):
    """On a CPU the second call probes too (two copies side by side, 6 steps; one alone, 8
    steps, 2 profiled), each with the rehearsal's OpenNMT-py options after ``--`` (one
    process, fp32, its small buckets and batches, as its trainings had); the first call
    never probes on a CPU (the shipped bundle's test in make test stays as long as it was)."""
    runner, ran, commands, _ = _later_call(tmp_path, 165.0, 0, device="cpu")
    assert [name for name, _ in ran[:2]] == ["probe-side-by-side", "probe"] and ran[0][1] == ran[1][1] == 60
    overrides = ["--", "-world_size", "1", "-gpu_ranks", "-model_dtype", "fp32", "-bucket_size",
                 str(gpu_runner.CPU_SETTINGS["bucket_size"]), "-batch_size", str(gpu_runner.CPU_SETTINGS["batch_size"])]
    crowd, alone = commands["probe-side-by-side"], commands["probe"]
    assert crowd[crowd.index("--side-by-side") + 1] == "2" and crowd[crowd.index("--"):] == overrides
    assert crowd[crowd.index("--steps"):][:4] == ["--steps", "6", "--warmup", "2"]
    # (nothing compiled on two cores)
    assert alone[alone.index("--steps"):] == ["--steps", "8", "--warmup", "2", "--profile-steps", "2", *overrides]
    first = object.__new__(gpu_runner.Sitting)
    first.args = argparse.Namespace(device="cpu")
    first.crowd_probe = first.speed_probe = first.speed_rows = lambda: pytest.fail("a CPU's first call probed")
    first.speed_probe_and_rows()


def test_a_short_later_call_keeps_the_probe_side_by_side_over_the_probe_alone(tmp_path):
    """185 s: the probe side by side (one seed more a sitting for every slice of the queue)
    before the probe alone, which the 85 s it leaves do not hold; a bundle without the
    figure (1: nothing to probe side by side) gives the probe alone its turn, and its
    compile what is left."""
    _, ran, _, _ = _later_call(tmp_path / "a", 185.0, 0)
    assert ran == [("probe-side-by-side", 100), ("speed-rows", 15), ("bench-idle-fused", 28),
                   ("bench-idle-blocked", 28), ("speed-rows", 15)]
    runner, ran, _, mps = _later_call(tmp_path / "b", 185.0, 0, probe_side_by_side=None)
    assert runner.crowd_size() == 1 and not mps
    assert ran == [("probe", 170), ("speed-rows", 15)]


def test_a_short_later_call_runs_first_the_probe_the_published_sittings_measured_longest_ago(tmp_path):
    """The manifest's ``probe_first``: alone, where the published sittings measured the probe
    side by side more recently than a compiled probe alone (or it never). 185 s: the probe
    alone and its compile take 170 s, the 15 s of the speed rows the rest, and the probe side
    by side (100 s) waits for the next sitting, which the bundle then sends crowd first."""
    _, ran, _, mps = _later_call(tmp_path / "a", 185.0, 0, probe_first="alone")
    assert ran == [("probe", 170), ("speed-rows", 15)] and not mps
    _, ran, _, _ = _later_call(tmp_path / "b", 500.0, 0, probe_first="alone")
    assert ran[:3] == [("probe", 240), ("probe-side-by-side", 100), ("speed-rows", 15)]
    _, ran, _, _ = _later_call(tmp_path / "c", 185.0, 0, probe_first="crowd")
    assert ran[0] == ("probe-side-by-side", 100)
    # a suite to finish in 150 s (under both probes' 205 s and its own 30): it keeps back the
    # time of the probe that goes first, 100 s side by side, 90 alone
    for first, kept in (("crowd", 100), ("alone", 90)):
        _, ran, _, _ = _later_call(tmp_path / f"d-{first}", 150.0, 1, probe_first=first)
        assert ran[0] == ("gpu-tests-rest", 150 - kept)
    # no probe side by side to run (1 model): the probe alone goes first whatever the manifest says
    _, ran, _, _ = _later_call(tmp_path / "e", 150.0, 1, probe_side_by_side=1, probe_first="crowd")
    assert ran[0] == ("gpu-tests-rest", 150 - 105) and ran[1][0] == "probe"       # the probe alone and the rows


def test_the_bundle_sends_first_the_probe_the_published_sittings_measured_longest_ago(tmp_path):
    """By the column only each probe fills: ``models_probed_side_by_side`` (side by side),
    ``compile_mode`` (alone, then compiled)."""
    from test_gpu_plan import _clock

    from headlab.workflow import gpu_measures

    def sitting(folder: str, day: int, **cells) -> None:
        _clock(tmp_path, "A-T1-deep", folder, f"2026-12-0{day} 10:00:00 UTC", {"8L": 130.0}, 55, {"8L": cells})

    assert gpu_measures.probe_first(tmp_path) == "crowd"           # neither measured
    sitting("2026-12-01-h100-aaaaaaa", 1)
    assert gpu_measures.probe_first(tmp_path) == "crowd"
    sitting("2026-12-02-h100-bbbbbbb", 2, models_probed_side_by_side=8, step_ms_probed_side_by_side=200.0)
    assert gpu_measures.probe_first(tmp_path) == "alone"           # the compiled probe never
    sitting("2026-12-03-h100-ccccccc", 3, step_ms_alone=100.0, compile_mode="default", compile_s=150.0)
    assert gpu_measures.probe_first(tmp_path) == "crowd"           # side by side longer ago
    sitting("2026-12-04-h100-ddddddd", 4, models_probed_side_by_side=8, step_ms_probed_side_by_side=200.0)
    assert gpu_measures.probe_first(tmp_path) == "alone"
    choice = gpu_plan.choose(gpu_plan.load(), tmp_path / "none")
    assert bundle.slice_manifest(choice, tmp_path)["probe_first"] == "alone"
    # a probe that ran and measured nothing (its crowd out of memory) has had its turn
    (tmp_path / "A-T1-deep" / "2026-12-04-h100-ddddddd" / "status-sitting.json").write_text(
        json.dumps({"calls": [{"gpu_tests_rc": 0}, {"crowd_rc": 1, "probe_rc": 0}]}))
    sitting("2026-12-05-h100-eeeeeee", 5)
    (tmp_path / "A-T1-deep" / "2026-12-05-h100-eeeeeee" / "status-sitting.json").write_text(
        json.dumps({"calls": [{}, {"crowd_rc": 1}]}))
    assert gpu_measures.probe_first(tmp_path) == "alone"
    # both in one sitting (a long call): side by side first again
    sitting("2026-12-06-h100-fffffff", 6, models_probed_side_by_side=8, compile_mode="default")
    assert gpu_measures.probe_first(tmp_path) == "crowd"
    # a plan with no probe side by side (every slice's seeds in one sitting, one model): the probe alone
    lone = gpu_plan.load()
    lone = gpu_plan.Plan({**lone.data, "slices": [{**entry, "seeds": [1], "seeds_per_sitting": 1,
                                                   "models": entry["models"][:1]}
                                                  for entry in lone.data["slices"] if "chain" not in entry]},
                         lone.path)
    assert lone.probe_side_by_side == 1
    assert bundle.slice_manifest(gpu_plan.choose(lone, tmp_path / "none"), tmp_path)["probe_first"] == "alone"


def test_a_row_says_how_its_checkpoint_was_chosen_and_one_no_validation_chose_is_never_averaged(tmp_path,
                                                                                                monkeypatch):
    """8L saved a checkpoint at step 200 but its validation never ran (no history written):
    it is evaluated at its newest checkpoint, and its row says so (``selected_by``); with
    status deadline it is a run at the clock's step, shown apart and never averaged, though
    it has a ``best_step``. 7Ftoken+1L's step 200 was chosen by its validation: one of the seeds."""
    import torch

    from headlab.studies import published

    monkeypatch.chdir(tmp_path)
    models = _logged_models(tmp_path, "seed2", [(100, 1235.8, 7.1), (200, 250.6, 5.5)])
    for model in models:
        torch.save({"model": {"w": torch.zeros(2)}, "generator": {}}, Path(model["dir"]) / "model_step_200.pt")
    (tmp_path / "models/7Ftoken+1L/model.valid.csv").write_text("step,xent,ppl,acc\n200,2.5,12.2,50\n")
    (tmp_path / "test.src").write_text("ein Satz\n")
    (tmp_path / "test.tgt").write_text("a sentence\n")
    # every model translates the test sentence as its reference has it (a row scored on the
    # whole test set: a seed), no atlas: the rows are what this test reads
    def translate_until(jobs, *args, **kwargs):
        for job in jobs.values():
            Path(job["hyp"]).write_text("a sentence\n")
        return dict.fromkeys(jobs, 1)

    monkeypatch.setattr(sitting, "translate_until", translate_until)
    monkeypatch.setattr(sitting, "_atlas_safely", lambda *args, **kwargs: None)
    manifest = {"commit": "abcdef0", "models": models,
                "test": {"split": "test_2016_flickr", "pair": "de-en", "src": "test.src", "ref": "test.tgt"},
                "slice": {"name": "A-T1-deep", "study": "paper_A", "table": "T1", "seeds": [2],
                          "rows": {"8L": "T1 deep", "7Ftoken+1L": "T1 deep"}, "stop": {"valid_steps": 200, "patience": 3}}}
    root = tmp_path / "results/published"
    out = root / "A-T1-deep/2026-11-27-cpu-abcdef0"
    sitting.evaluate(manifest, out, "cpu", {}, {"sitting": out.name, "gpu": "cpu", "date": "2026-11-27"}, 30,
                     tmp_path / "logs")
    with open(out / "rows.csv", newline="") as handle:
        rows = {row["heads"]: row for row in csv.DictReader(handle)}
    assert {heads: (row["status"], row["best_step"], row["selected_by"]) for heads, row in rows.items()} == {
        "8L": ("deadline", "200", published.BY_NEWEST),
        "7Ftoken+1L": ("deadline", "200", published.BY_VALIDATION)}
    frame = published.read(str(root))
    assert dict(zip(frame["heads"], published.at_the_clocks_step(frame))) == {"8L": True, "7Ftoken+1L": False}
