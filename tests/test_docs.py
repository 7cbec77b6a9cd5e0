"""The documentation site (docs/): it builds with warnings as errors, its generated pages hold
what the code and config/schema.yaml hold, and the tutorial's code runs."""
from __future__ import annotations

import html
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hangguard import hang_guard

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))

from gen_compat import applied_patches  # noqa: E402
from gen_config import _rows, config_pages  # noqa: E402

pytest.importorskip("myst_parser", reason="the docs extra is not installed (make setup installs it)")
pytest.importorskip("sphinxarg", reason="the docs extra is not installed (make setup installs it)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("docs") / "html"
    # its own process: the build imports every subcommand (OpenNMT-py patched included)
    run = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                          str(DOCS), str(out)], capture_output=True, text=True, cwd=ROOT, timeout=hang_guard(600))
    assert run.returncode == 0, f"sphinx-build failed:\n{run.stdout}\n{run.stderr}"
    return out


def text_of(page: Path) -> str:
    """The page's text without tags (code spans split at spaces into <span>s)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_every_config_key_is_documented(site):
    import yaml

    schema = yaml.safe_load((ROOT / "config/schema.yaml").read_text(encoding="utf-8"))
    reference = text_of(site / "configuration.html")
    for key, node in schema["properties"].items():
        if key == "studies":
            for study, sub in node["properties"].items():
                page = text_of(site / "studies" / f"{study}.html")
                missing = [row[0] for row in _rows(f"studies.{study}", sub, schema) if row[0] not in page]
                assert not missing, f"studies/{study}.html lacks {missing}"
        else:
            missing = [row[0] for row in _rows(key, node, schema) if row[0] not in reference]
            assert not missing, f"configuration.html lacks {missing}"
    assert "training.jobs_per_gpu" in reference          # a key the generator must not lose
    assert set(config_pages(ROOT / "config/schema.yaml")) >= {"reference", "studies.paper_A"}


def test_every_head_kind_and_mixer_is_listed(site):
    from headlab.heads import HEAD_KINDS, HEAD_MIXERS

    page = (site / "heads.html").read_text(encoding="utf-8")
    for name in [*HEAD_KINDS, *HEAD_MIXERS]:
        if name not in TUTORIAL_KINDS:
            assert f'<span class="pre">{name}</span>' in page, name
    assert "FixedTokenHeads" in page and "HardConcreteGate" in page


def test_engine_patches_in_apply_order(site):
    page = text_of(site / "engine.html")
    names = applied_patches(ROOT / "src/headlab/engine/compat.py")
    assert "_patch_checkpoint_loading" in names
    positions = [page.find(f"headlab.engine.compat.{name}(") for name in names]
    assert -1 not in positions, [n for n, p in zip(names, positions) if p == -1]
    assert positions == sorted(positions)


def test_every_subcommand_has_its_usage(site):
    from headlab.cli import COMMANDS

    page = text_of(site / "cli.html")
    for name in COMMANDS:
        assert f"headlab {name}" in page, name
    assert "--enc_heads" in page                            # headlab's options of `headlab train`


def test_tutorial_page_shows_its_code(site):
    page = text_of(site / "tutorial" / "add-head-kind.html")
    assert "class MeanHeads(HeadGroup)" in page and "def model_demo()" in page


# -- the tutorial's code -------------------------------------------------------------------
TUTORIAL_KINDS = ("Mean", "Band")


@pytest.fixture
def tutorial():
    from headlab.heads import HEAD_KINDS

    spec = importlib.util.spec_from_file_location("docs_tutorial_my_head", DOCS / "tutorial" / "my_head.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        # other test files in this process check that every registered kind is covered
        for name in TUTORIAL_KINDS:
            HEAD_KINDS.pop(name, None)


def test_tutorial_registers_kinds_and_runs_a_layer(tutorial):
    from headlab.heads import HEAD_KINDS

    assert HEAD_KINDS["Mean"] is tutorial.MeanHeads and HEAD_KINDS["Band"] is tutorial.BandHeads
    assert tutorial.layer_demo().shape == (2, 5, 32)


def test_tutorial_model_forward(tutorial):
    assert tutorial.model_demo().shape == (2, 4, 40)
