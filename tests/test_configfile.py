"""A config file snakemake cannot read (YAML syntax error, empty, missing) and a run with no
config: one line naming the file and line, or saying which config to pass."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from headlab.errors import ConfigError
from headlab.workflow.configfile import read
from test_workflow import ROOT, snakemake_env

BAD = {
    "syntax.yaml": ("studies:\n  baseline:\n    heads: [8L\n  x: 1\n", r"syntax\.yaml:4: YAML syntax error: expected"),
    "tab.yaml": ("a: 1\n\tb: 2\n", r"tab\.yaml:2: YAML syntax error: found character '\\t'"),
    "empty.yaml": ("", r"empty\.yaml:1: the config is empty"),
    "comments.yaml": ("# nothing yet\n", r"comments\.yaml:1: the config is empty"),
    "list.yaml": ("- a\n- b\n", r"list\.yaml:1: a config must map sections to settings, not be a list"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_an_unreadable_config_is_one_error_naming_file_and_line(name, tmp_path):
    text, expected = BAD[name]
    (tmp_path / name).write_text(text)
    with pytest.raises(ConfigError, match=expected):
        read(str(tmp_path / name))


def test_a_missing_config_file_says_which_to_pass(tmp_path):
    with pytest.raises(ConfigError, match=r"missing\.yaml: no such config file; pass --configfile config/config.yaml"):
        read(str(tmp_path / "missing.yaml"))


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
@pytest.mark.parametrize("name", ["syntax.yaml", "empty.yaml", "missing.yaml"])
def test_make_run_stops_at_a_bad_config_with_one_line(name, tmp_path):
    path = tmp_path / name
    if name in BAD:
        path.write_text(BAD[name][0])
    # -o: the set-up stamp is taken as up to date (make test has just run set-up)
    result = subprocess.run(["make", "-s", "-o", ".venv/.headlab-installed", "run", f"CONFIG={path}"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if not line.startswith("make")]
    assert result.returncode != 0
    assert len(lines) == 1 and lines[0].startswith(f"headlab: config error: {path}"), lines


def test_snakemake_without_a_config_outside_the_repository_says_which_to_pass(tmp_path):
    # the embedded default is relative to the working directory
    result = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"), "-n"],
                            cwd=tmp_path, capture_output=True, text=True, env=snakemake_env(), timeout=300)
    assert result.returncode != 0
    assert "no config: pass --configfile config/config.yaml" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
