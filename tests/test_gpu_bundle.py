"""The GPU bundle (``headlab gpu-bundle``, issue 21 item 6): built here from a small config,
installed into a clean virtual environment that has only what the GPU machine has
(requirements/gpu-machine.txt: torch and friends, taken from this environment), and
checked by the runner's CPU dry run: imports, the GPU suite (skipped without CUDA), and a
plan that holds only GPU-side jobs (the data was prepared here)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from headlab.errors import ConfigError
from headlab.workflow import bundle
from test_workflow import ROOT, write_config

RESULTS = "results/.pytest-gpu-bundle"


def test_closure_skips_the_machines_packages_and_torch():
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    pins = bundle.runtime_requirements(version)
    assert {"snakemake", "pyonmttok", "sacremoses", "compare-mt", "configargparse", "jsonschema"} <= set(pins)
    # the machine's own: torch (CUDA build), numpy, pandas ...; spaCy: parses are data; the
    # packages of OpenNMT-py transforms headlab does not use (headlab.engine.compat)
    assert not {"torch", "numpy", "pandas", "sacrebleu", "spacy", "thinc", "pulp", "headlab", "rapidfuzz",
                "fasttext-wheel", "pyahocorasick"} & set(pins)
    assert pins["snakemake"] == metadata.version("snakemake")


def test_check_gpu_side_names_rules_that_need_cpu_tools():
    bundle.check_gpu_side({"train": 2, "translate": 2, "publish": 1})
    with pytest.raises(ConfigError, match="rule.s. mucow_accuracy, parse would still run on the GPU"):
        bundle.check_gpu_side({"train": 2, "parse": 1, "mucow_accuracy": 1})


def test_results_folder_must_be_relative(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("results: /abs/results\n")
    with pytest.raises(ConfigError, match="must be relative"):
        bundle.results_dir([str(config)])


def _machine_site(folder: Path) -> Path:
    """A folder with links to this environment's copies of the GPU machine's packages
    (torch, numpy, pandas, ...: requirements/gpu-machine.txt) and nothing else."""
    folder.mkdir()
    wanted = bundle.machine_packages()
    for dist in metadata.distributions():
        name = bundle._norm(dist.metadata["Name"])
        if name not in wanted or not dist.files:
            continue
        for top in {Path(str(f)).parts[0] for f in dist.files}:
            source = Path(dist.locate_file(top))
            if source.exists() and top != ".." and not (folder / top).exists() and not top.endswith(".pth"):
                (folder / top).symlink_to(source)
    return folder


@pytest.mark.slow
def test_bundle_installs_into_a_clean_venv_and_its_dry_run_passes(tmp_path, mirror):
    results = ROOT / RESULTS
    shutil.rmtree(results, ignore_errors=True)
    config = write_config(tmp_path, mirror)
    data = yaml.safe_load(config.read_text())
    data["results"] = RESULTS
    # one study, with a syntax model, whose parses and features must be made here
    data["studies"] = {"baseline": {**data["studies"]["baseline"], "data": {"multi30k": ["en-de"]}, "heads": ["8L", "8DEA"]}}
    config.write_text(yaml.safe_dump(data))
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    try:
        manifest = bundle.build(tmp_path / "bundle", configfiles=[str(config)], targets=["tables"],
                                python_version=version, cores=2)
        assert manifest["size_mib"] <= 64
        wheels = " ".join(manifest["wheels"])
        assert "OpenNMT_py-3.5.1-py3-none-any.whl" in wheels and "headlab-0.1.0" in wheels
        assert "torch" not in wheels and "spacy" not in wheels
        plan = manifest["gpu_plan"]
        assert plan["train"] == 2 and plan["publish"] == 1 and set(plan) <= set(bundle.GPU_RULES)
        with tarfile.open(tmp_path / "bundle/data.tar.gz") as tar:
            names = tar.getnames()
        assert any(n.endswith("/feat/depconv/train.src") for n in names)          # features made here
        assert any(n.endswith("raw/multi30k/.verified") for n in names)
        assert not any(n.endswith(".gz") and "/raw/multi30k/" in n for n in names)  # no mirror copies

        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        [site] = (venv / "lib").glob("python3*/site-packages")
        (site / "gpu-machine.pth").write_text(str(_machine_site(tmp_path / "machine")) + "\n")
        out = tmp_path / "out"
        run = subprocess.run([str(venv / "bin/python"), str(tmp_path / "bundle/run.py"), "--dry-run", "--work",
                              str(tmp_path / "work"), "--out", str(out), "--budget", "500"],
                             capture_output=True, text=True, timeout=900, cwd=tmp_path)
        logs = "\n".join(p.read_text()[-2000:] for p in sorted((tmp_path / "work/logs").glob("*.log")))
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:] + logs
        status = json.loads((out / "status.json").read_text())
        assert status["install"]["rc"] == 0 and status["dry_run"]["not_gpu_side"] == []
        assert status["dry_run"]["plan"] == plan and status["dry_run"]["cuda"] is False
        assert (out / "headlab-gpu-results.tar.gz").is_file()

        # the real thing, on the CPU (the config trains on it): a workflow chunk, then OUT
        run = subprocess.run([str(venv / "bin/python"), str(tmp_path / "bundle/run.py"), "--allow-cpu", "--work",
                              str(tmp_path / "work"), "--out", str(out), "--budget", "500"],
                             capture_output=True, text=True, timeout=900, cwd=tmp_path)
        assert run.returncode == 0 and "run.py: all done" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
        with tarfile.open(out / "headlab-gpu-results.tar.gz") as tar:
            provenance = json.load(tar.extractfile(f"{RESULTS}/published/tables/provenance.json"))
            names = tar.getnames()
        assert provenance["headlab commit"] == manifest["commit"]  # no git on the machine: from the bundle
        assert f"{RESULTS}/published/tables/baseline.csv" in names and "logs/workflow-1.log" in names
        assert not any(n.endswith(".pt") for n in names)
        print(f"bundle: {manifest['size_mib']} MiB, {len(manifest['wheels'])} wheels, plan {plan}")
    finally:
        shutil.rmtree(results, ignore_errors=True)
