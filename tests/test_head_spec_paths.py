"""Head specs as a user writes them become model paths through ``heads_name``, in every
study that takes them: every construct of the spec grammar (headlab.heads.spec) plans the
model directory its path name says, no path holds a comma, a pipe, a parenthesis or a
space, and two spellings of one model are one model. One dry run covers all three studies."""
from __future__ import annotations

import json
import re

import pytest
import yaml

from headlab.errors import ConfigError
from headlab.naming import heads_name
from test_workflow import ROOT, snakemake

# a 2-layer encoder: each construct of the grammar once (the documented spellings among them)
SPECS = {
    "8L": "8L",                              # one layer spec for every layer
    "7Ftoken + 1L": "7Ftoken+1L",            # terms; whitespace ignored
    "4L|gate": "4L~gate",                    # a mixer
    "8L,4L": "8L.4L",                        # one group per layer
    "2*(2L~gate)": "2*2L~gate",              # a repeated group; ~ for |
    "*(8L),8L|dhicm": "*8L.8L~dhicm",        # a fill group
    "1*8L.Ftoken+7L": "8L.1Ftoken+7L",       # a repeat without parentheses, . for ",", a default count
}
PAPER_A = {"heads": ["8L", "7Ftoken+1L", "4L|gate", "*(8L),8L|dhicm"], "eight_fixed": "8Ftoken,8L|gate"}
PAPER_D = {"heads": "8L,4L", "fixed_heads": "*(7Ftoken+1L),8L|dhicm"}
BAD_PATH = re.compile(r"[,|() ]")


def _config(tmp_path, mirror) -> dict:
    text = (ROOT / "tests/configs/smoke.yaml").read_text()
    config = yaml.safe_load(text.replace("RESULTS_DIR", str(tmp_path / "results")).replace("MIRROR_DIR", str(mirror)))
    config["studies"]["baseline"].update(layers=["2+2"], heads=list(SPECS))
    config["studies"]["paper_A"].update(layers=["2+2"], shallow="2+2", deep="2+2", **PAPER_A)
    del config["studies"]["paper_A"]["lowres"], config["studies"]["paper_A"]["eight_fixed_lowres"]
    shipped = yaml.safe_load((ROOT / "config/config.yaml").read_text())["studies"]["paper_D"]
    config["studies"]["paper_D"] = {**shipped, "preset": "tiny", "seeds": [1], "headline_seeds": [], **PAPER_D}
    return config


def test_every_spec_construct_is_named_by_heads_name_in_every_study(tmp_path, mirror):
    config = _config(tmp_path, mirror)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    # paper D's tables wait for its gates stage (a checkpoint): its fixed-head models as targets
    from headlab.studies.paper_D import outputs as paper_d_outputs
    study = config["studies"]["paper_D"]
    fixed = paper_d_outputs.fixed(paper_d_outputs.Files(config, study, config["results"]))[0]
    result = snakemake("-n", "-p", "--configfile", str(path), "--", "all", *fixed)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    models = str(tmp_path / "results/models")
    trained = set(re.findall(rf"headlab train -config {re.escape(models)}/(\S+)/onmt\.yaml", out))
    expected = {f"multi30k/de-en/300/tiny/default/2+2/{name}/seed1" for name in SPECS.values()}
    expected |= {f"multi30k/de-en/300/tiny/default/2+2/{heads_name(h)}/seed1"
                 for h in [*PAPER_A["heads"], PAPER_A["eight_fixed"]]}
    expected |= {f"multi30k/en-de/full/tiny/default/2+2/{heads_name(h)}/seed1" for h in PAPER_D.values()}
    assert expected - trained == set()
    # snakemake lists files joined by ", " (a comma inside a path has no space after it)
    paths = {p.rstrip(",;'") for p in re.findall(rf"{re.escape(str(tmp_path))}/results/\S*", out)}
    assert [p for p in paths if BAD_PATH.search(p[len(str(tmp_path)):])] == []


def test_the_baseline_table_names_each_model_by_its_path_name(tmp_path):
    from headlab.studies.baseline import outputs as baseline_outputs

    study = {"data": {"multi30k": ["de-en"]}, "layers": ["2+2"], "heads": list(SPECS), "preset": "tiny"}
    config = {"corpora": {"multi30k": {"tests": ["t"]}}, "studies": {"baseline": study}}
    inputs, build = baseline_outputs.baseline(baseline_outputs.Files(config, study, str(tmp_path)))
    for i, path in enumerate(inputs):
        assert not BAD_PATH.search(path[len(str(tmp_path)):])
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(json.dumps({"bleu": float(i), "signature": "s"}))
    table, tidy = build()
    assert list(tidy["heads"]) == list(SPECS.values())
    assert all(f"de-en {name}" in set(tidy["system"]) for name in SPECS.values())


def test_two_spellings_of_one_model_are_a_config_error_naming_the_key():
    from headlab.workflow.config_check import check_head_names

    study = {"heads": ["8L", "8L,4L", "8L.4L"]}
    with pytest.raises(ConfigError, match=r"studies\.baseline\.heads\[2\].*8L,4L"):
        check_head_names({"studies": {"baseline": study}})


# spellings of one architecture: one path name, whatever the depth
SAME = [("*(8L)", "8L", "8L"), ("8L,8L", "2*(8L)", "2*8L"), ("1*(8L),4L", "8L.4L", "8L.4L"),
        ("Ftoken+7L", "1Ftoken + 7L", "1Ftoken+7L"), ("*(4L),4L|dhicm", "*4L.4L~dhicm", "*4L.4L~dhicm")]


@pytest.mark.parametrize("one, other, name", SAME)
def test_spellings_of_one_architecture_have_one_path_name(one, other, name):
    assert heads_name(one) == heads_name(other) == name
    assert heads_name(one, one, one) == heads_name(other, other, other)


def test_a_spec_for_every_layer_is_not_a_spec_for_one_layer():
    # 8L is every layer's spec, 1*(8L) describes one layer (a 1-layer encoder only)
    assert heads_name("8L") != heads_name("1*(8L)") and heads_name("8L") != heads_name("2*(8L)")
    assert heads_name("8L", "*(8L)", "*(8L)") == "8L"    # stock decoder sites are left out


def test_a_fill_spec_alone_trains_the_same_model_as_its_layer(tmp_path, mirror):
    """``*(8L)`` in the baseline and ``8L`` in paper A: one model, trained once."""
    config = _config(tmp_path, mirror)
    config["studies"]["baseline"]["heads"] = ["*(8L)"]
    config["studies"]["paper_A"]["heads"] = ["8L", "7Ftoken+1L"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake("-n", "-p", "--configfile", str(path), "--", "all")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    models = str(tmp_path / "results/models")
    trained = re.findall(rf"headlab train -config {re.escape(models)}/(\S+)/onmt\.yaml", out)
    assert trained.count("multi30k/de-en/300/tiny/default/2+2/8L/seed1") == 1, trained
    assert not [model for model in trained if "*8L/" in model or model.endswith("*8L")], trained


@pytest.mark.parametrize("heads, layers, message", [
    (["8L", "*(8L)"], "2+2", r"\[studies\.baseline\.heads\[1\]\] '\*\(8L\)' names the same model as '8L'"),
    (["4L|gate", "2*(4L|gate)"], "2+2",
     r"\[studies\.baseline\.heads\[1\]\] '2\*\(4L\|gate\)' is the same model as '4L\|gate' "
     r"\(studies\.baseline\.heads\[0\]\) at layers 2\+2"),
])
def test_two_spellings_of_one_model_at_its_depth_are_one_config_error(heads, layers, message):
    from headlab.workflow.config_check import check

    study = {"data": {"multi30k": ["de-en"]}, "layers": [layers], "heads": heads, "preset": "tiny", "seeds": [1],
             "sizes": ["full"], "overrides": {}}
    config = {"corpora": {"multi30k": {"dataset": "multi30k", "train": "train", "valid": "val",
                                       "tests": ["test_2016_flickr"]}},
              "training": {"overrides": {}}, "studies": {"baseline": study}}
    with pytest.raises(ConfigError, match=message):
        check(config)


def test_the_same_model_spelt_differently_in_two_studies_is_one_config_error(tmp_path, mirror):
    config = _config(tmp_path, mirror)
    config["studies"]["baseline"]["heads"] = ["2*(8L)"]           # 8L at a 2-layer encoder
    config["studies"]["paper_A"]["heads"] = ["8L", "7Ftoken+1L"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    result = snakemake("-n", "--configfile", str(path))
    lines = [line for line in (result.stdout + result.stderr).splitlines() if not line.startswith("Using profile")]
    assert result.returncode == 1 and len(lines) == 1, lines
    assert lines[0] == ("headlab: config error: [studies.paper_A.heads[0]] '8L' is the same model as '2*(8L)' "
                        "(studies.baseline.heads[0]) at layers 2+2: every layer has the same heads; write one "
                        "spelling"), lines
