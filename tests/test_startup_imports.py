"""What a job that only reads results imports: torch costs 1 CPU-s a process, and the
tables, figures and READMEs of a study are most of a run's jobs (a fresh interpreter each:
pytest's own has torch loaded)."""
from __future__ import annotations

import subprocess
import sys

from hangguard import hang_guard

PROBE = """
import sys, importlib.metadata
import headlab.engine.export, headlab.studies
from headlab.studies import provenance
facts = provenance({})
print("torch" in sys.modules, facts["torch"] == importlib.metadata.version("torch"), "GPU: " in facts["host"])
"""


def test_study_tables_read_exports_and_write_provenance_without_importing_torch():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "True", "True"]


def test_the_workflow_builds_its_dag_without_importing_torch(tmp_path):
    """Every snakemake start builds the DAG (a dry run, each job of a SLURM run): the head
    specs are checked from their declarations (headlab.heads.builtin) and OpenNMT-py's
    option names come from their cache, so torch (1-2 CPU-s) is not imported. The first
    run fills that cache (it may import torch); the second is measured."""
    from test_workflow import SNAKEMAKE, ROOT, snakemake_env

    # the shipped default config (make run's), into an empty results folder: its whole DAG
    env = {**snakemake_env(), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    command = [*SNAKEMAKE[:1], "-X", "importtime", *SNAKEMAKE[1:], "-n", "--quiet", "rules",
               "--configfile", "config/config.yaml", "--config", f"results={tmp_path / 'results'}"]
    for _ in range(2):
        out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=hang_guard(300))
        assert out.returncode == 0, out.stderr[-3000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    assert {"headlab.heads.spec", "headlab.studies"} <= imported and "torch" not in imported
