"""Shared test fixtures."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: --cpu-durations: what each test costs in CPU (tests/cputime.py)
pytest_plugins = ("cputime",)

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs a worker per core: one torch thread each, or they oversubscribe
    os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return ROOT


@pytest.fixture
def one_thread():
    """Tiny models run fastest on one thread (on a shared machine especially)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def mirror() -> Path:
    """The offline data mirror (../shared/data beside the checkout, or $HEADLAB_DATA_MIRROR)."""
    path = Path(os.environ.get("HEADLAB_DATA_MIRROR", ROOT.parent / "shared" / "data"))
    if not (path / "MANIFEST.tsv").exists():
        pytest.skip(f"data mirror not found at {path}")
    return path


#: the test files that run whole workflows, slowest first. pytest-xdist hands out files in
#: collection order (the Makefile passes --no-loadscope-reorder: by default it orders them by
#: their number of tests), so these start first and the workers end together, instead of
#: one worker starting the SLURM run (10 minutes) when the other is nearly done.
SLOW_FIRST = ("test_slurm.py", "test_workflow.py", "test_paper_B.py", "test_gpu_configs_on_cpu.py",
              "test_paper_C.py", "test_gpu_bundle.py", "test_paper_D.py", "test_workflow_config.py",
              "test_atlas.py", "test_atlas_browser.py", "test_exact_resume.py", "test_retrain_on_change.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: index for index, name in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


#: written by the SLURM fixture (tests/test_slurm.py) when it started the daemons: they are
#: stopped when the whole session ends, not when its module does. With SLURM's client
#: installed and its controller down, every later `snakemake` start waits 9 s: the SLURM
#: executor plugin asks `scontrol show config` for MinJobAge when it is imported, whichever
#: executor runs, and scontrol retries the controller until its MessageTimeout.
SLURM_STARTED_BY_TESTS = Path("/var/lib/headlab-slurm/started-by-tests")


@pytest.fixture(scope="session")
def slurm_started_by_tests() -> Path:
    return SLURM_STARTED_BY_TESTS


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):
        return  # a pytest-xdist worker: the controller ends the session after all of them
    if SLURM_STARTED_BY_TESTS.exists():
        subprocess.run(["bash", str(ROOT / "tests/slurm/down.sh")], capture_output=True, timeout=120)
        SLURM_STARTED_BY_TESTS.unlink(missing_ok=True)
