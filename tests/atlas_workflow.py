"""The atlas the workflow writes, built once per test session and shared by the test files
that read it (``tests/test_atlas.py``'s end-to-end test, the browser test): the rules on
the smoke config, a stock 8L model and DHICM at every site, ``atlas.models: all`` (about a
minute on 2 cores).

Under pytest-xdist each worker is a process of its own: the first to get the lock runs
snakemake into the session's shared temporary folder, the others wait and reuse it."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

DHICM = "*8L.8L~dhicm@dec=*8L.8L~dhicm@cross=*8L.8L~dhicm"
SPECS = ("8L", DHICM)
MODEL_DIR = "multi30k/en-de/300/tiny/default/2+1/{}/seed1"


def _shared_root(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    # under xdist every worker's base is a child of the session's: share the parent
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build(tmp_path_factory, mirror) -> Path:
    """The run's folder (``results/atlas`` under it), run on the first call of the session
    (each test module's ``atlas_run`` fixture calls it); fails the test if snakemake fails."""
    from filelock import FileLock
    from test_workflow import run_workflow, write_config

    root = _shared_root(tmp_path_factory) / "atlas-workflow"
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root) + ".lock"):
        done, failed = root / "done", root / "failed"
        if failed.exists():
            pytest.fail(f"the atlas workflow run failed earlier in this session: {failed.read_text()[-3000:]}")
        if not done.exists():
            config = write_config(root, mirror, **{
                "studies": {"baseline": {"data": {"multi30k": ["en-de"]}, "sizes": [300], "layers": ["2+1"],
                                         "heads": list(SPECS), "preset": "tiny", "seeds": [1]}},
                "atlas": {"models": "all", "valid_sentences": 12, "treebank_sentences": 30, "examples": 2}})
            # the target before --configfile, which takes every path after it
            result = run_workflow("--cores", "2", str(root / "results/atlas/index.html"), "--configfile", str(config),
                               timeout=1500)
            if result.returncode != 0:
                failed.write_text(result.stderr[-5000:])
                pytest.fail(result.stderr[-5000:])
            done.write_text("ok\n")
    return root
