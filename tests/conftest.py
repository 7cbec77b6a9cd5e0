"""Shared test fixtures."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

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
