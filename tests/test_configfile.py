"""A config file snakemake cannot read (YAML syntax error, empty, missing) and a run with no
config: one line naming the file and line, or saying which config to pass."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from headlab.errors import ConfigError
from headlab.workflow.configfile import read
from test_workflow import ROOT, SNAKEMAKE, snakemake_env
from hangguard import hang_guard

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
                            cwd=tmp_path, capture_output=True, text=True, env=snakemake_env(), timeout=hang_guard(300))
    assert result.returncode != 0
    assert "no config: pass --configfile config/config.yaml" in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr


# a key given twice in one mapping: PyYAML (and so snakemake) keeps the last one silently
DUPLICATE = "translation:\n  beam_size: 5\n  max_length: 100\n  beam_size: 1\n"
DUPLICATE_LINE = (r"dup\.yaml:4: \[translation\.beam_size\] key 'beam_size' is given twice "
                  r"\(first at line 2\)")


def test_a_duplicate_key_is_one_error_naming_file_line_and_key(tmp_path):
    (tmp_path / "dup.yaml").write_text(DUPLICATE)
    with pytest.raises(ConfigError, match=DUPLICATE_LINE):
        read(str(tmp_path / "dup.yaml"))


def test_a_duplicate_key_in_an_overlay_stops_the_configfile_check(tmp_path):
    (tmp_path / "dup.yaml").write_text(DUPLICATE)
    result = subprocess.run([sys.executable, "-m", "headlab.workflow.configfile", "config/config.yaml",
                             str(tmp_path / "dup.yaml")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = (result.stdout + result.stderr).splitlines()
    assert result.returncode == 1 and len(lines) == 1, lines
    assert re.match(r"headlab: config error: \S*" + DUPLICATE_LINE, lines[0]), lines


def _snakemake_lines(*configfiles, tmp_path) -> tuple[int, list[str]]:
    result = subprocess.run([*SNAKEMAKE, "-n", "--configfile", *configfiles,
                             "--config", f"results={tmp_path / 'results'}"],
                            capture_output=True, text=True, env=snakemake_env(), timeout=hang_guard(300), cwd=ROOT)
    lines = [line for line in (result.stdout + result.stderr).splitlines() if not line.startswith("Using profile")]
    return result.returncode, lines


@pytest.mark.parametrize("where", ["overlay", "config"])
def test_a_duplicate_key_stops_snakemake_before_any_job(where, tmp_path):
    dup = tmp_path / "dup.yaml"
    if where == "overlay":
        dup.write_text(DUPLICATE)
        files = ["config/config.yaml", str(dup)]
    else:   # the shipped config with one of its keys given again in its own mapping
        text = (ROOT / "config/config.yaml").read_text()
        dup.write_text(text.replace("\ntranslation:\n", "\ntranslation:\n  beam_size: 1\n", 1))
        files = [str(dup)]
    rc, lines = _snakemake_lines(*files, tmp_path=tmp_path)
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"headlab: config error: {dup}:") and "[translation.beam_size]" in lines[0], lines
    assert "is given twice" in lines[0] and not (tmp_path / "results").exists()


# schema errors: one line naming the source file and line, the key path, the value, what is allowed
SCHEMA_ERRORS = {
    "no seeds": ("studies:\n  baseline:\n    seeds: []\n",
                 "overlay.yaml:3: [studies.baseline.seeds] [] is not allowed: at least 1 item"),
    "negative seed": ("studies:\n  baseline:\n    seeds: [-1]\n",
                      "overlay.yaml:3: [studies.baseline.seeds[0]] -1 is not allowed: at least 1"),
    "no encoder layer": ("studies:\n  baseline:\n    layers: ['0+1']\n",
                         "overlay.yaml:3: [studies.baseline.layers[0]] '0+1' is not allowed: ENCODER+DECODER"),
    "beam 0": ("translation:\n  beam_size: 0\n",
               "overlay.yaml:2: [translation.beam_size] 0 is not allowed: at least 1"),
    "misspelt study key": ("studies:\n  baseline:\n    seedz: [2]\n",
                           "overlay.yaml:3: [studies.baseline.seedz] unknown key 'seedz'; did you mean 'seeds'?"),
    "misspelt study": ("studies:\n  paper_a:\n    seeds: [2]\n",
                       "overlay.yaml:2: [studies.paper_a] unknown key 'paper_a'; did you mean 'paper_A'?"),
    "null preset": ("studies:\n  paper_A:\n    preset: null\n",
                    "overlay.yaml:3: [studies.paper_A.preset] 'preset' is a required property"),
    "compile mode": ("training:\n  compile: fast\n",
                     "overlay.yaml:2: [training.compile] 'fast' is not allowed: "),
}


@pytest.mark.parametrize("case", sorted(SCHEMA_ERRORS))
def test_a_schema_error_is_one_line_naming_file_line_key_and_value(case, tmp_path):
    text, expected = SCHEMA_ERRORS[case]
    (tmp_path / "overlay.yaml").write_text(text)
    rc, lines = _snakemake_lines("config/config.yaml", str(tmp_path / "overlay.yaml"), tmp_path=tmp_path)
    assert rc == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"headlab: config error: {tmp_path}/{expected}"), lines
