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

import json
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from headlab.errors import ConfigError
from headlab.workflow import bundle, gpu_runner

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_side_of_the_shipped_bundle_config_is_model_work(tmp_path):
    """Two dry runs of config/multi30k-gpu.yaml + config/gpu-sitting.yaml: the whole plan
    less what the CPU-side preparation runs holds only rules of GPU_RULES (a rule missing
    there, such as study_effects once, failed the build after its minutes of preparation)."""
    results = str(tmp_path / "results")
    stats = bundle.gpu_side(bundle.CONFIGS, [f"{results}/published/{t}" for t in bundle.TARGETS], results=results)
    assert stats["train"] == 3 and "prepare" not in stats and "onmt_config" not in stats
    bundle.check_gpu_side(stats)


def test_a_bundle_of_the_full_gpu_config_is_refused_before_any_preparation(tmp_path):
    """The full GPU config scores MuCoW with spaCy after translating: it is for a GPU box
    with the whole environment, and gpu-bundle says so at once, naming the rule."""
    with pytest.raises(ConfigError, match=r"rule\(s\) mucow_accuracy would still run"):
        bundle.build(tmp_path / "b", configfiles=["config/multi30k-gpu.yaml"],
                     targets=["tables", "paper_A", "paper_B", "paper_C", "paper_D"])
    assert not (tmp_path / "b").exists()


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


@pytest.mark.slow
def test_the_shipped_bundle_runs_its_sitting_on_the_cpu(tmp_path):
    manifest = bundle.build(tmp_path / "gpu-bundle", python_version="3.12", cores=2)
    assert manifest["size_mib"] <= 55 and [m["heads"] for m in manifest["models"]] == ["8L", "7Ftoken+1L", "8Ftoken"]
    assert not any(w.startswith(("torch-", "numpy-")) for w in manifest["wheels"])
    copy = tmp_path / "elsewhere" / "b"
    shutil.copytree(tmp_path / "gpu-bundle", copy)
    out, work = tmp_path / "out", tmp_path / "work"
    command = [sys.executable, str(copy / "run.py"), "--device", "cpu", "--work", str(work)]
    # a CPU shared with the other test files: translation gets most of the budget
    first = subprocess.run(command + ["--budget", "200", "--eval-reserve", "100", "--out", str(out)],
                           capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["headlab-sitting.tar.gz", "status.json"]
    status = json.loads((out / "status.json").read_text())
    assert status["calls"][0]["phases"].keys() == {"install", "train", "evaluate"} and status["published"]
    with tarfile.open(out / "headlab-sitting.tar.gz") as tar:
        published = "results/published/gpu-sitting"
        rows = tar.extractfile(f"{published}/T1_deep.csv").read().decode().splitlines()
        provenance = json.load(tar.extractfile(f"{published}/provenance.json"))
        names = tar.getnames()
    assert [row.split(",")[0] for row in rows[1:]] == ["8L", "7Ftoken+1L", "8Ftoken"]
    assert provenance["common_step"] in status["models"]["8L"]["checkpoints"]
    assert provenance["headlab commit"] == manifest["commit"] and provenance["test"]["sentences"] == 16
    assert "logs/gpu-tests.jsonl" in names and "train-logs/8L.log" in names and not any(n.endswith(".pt") for n in names)
    # a second call on the same machine: the remainder only, the models untouched
    second = subprocess.run(command + ["--budget", "40", "--out", str(tmp_path / "out2")],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    later = json.loads((tmp_path / "out2/status.json").read_text())
    assert second.returncode == 0 and later["calls"][-1]["phases"].keys() == {"remainder"}
    assert {k: v["checkpoints"] for k, v in later["models"].items()} == \
        {k: v["checkpoints"] for k, v in status["models"].items()}
