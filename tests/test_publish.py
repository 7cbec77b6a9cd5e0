"""headlab publish: refuses an unfinished study, naming what is missing, and writes nothing."""
from __future__ import annotations

import pytest

from headlab.cli import main
from headlab.errors import ConfigError
from headlab.workflow.publish import publish

CONFIG = {"corpora": {"multi30k": {"tests": ["test_2016_flickr"]}},
          "studies": {"baseline": {"data": {"multi30k": ["de-en"]}, "layers": ["1+1"], "heads": ["8L"],
                                   "preset": "tiny"}}}


def test_unfinished_study_is_refused(tmp_path):
    (tmp_path / "results/tables").mkdir(parents=True)
    (tmp_path / "results/tables/baseline.csv").write_text("system,test\n")
    with pytest.raises(ConfigError, match=r"\[baseline\] study 'baseline' has not finished: \d+ files missing, "
                                          r"first .*results/tables/baseline\.md"):
        publish(CONFIG, "baseline", tmp_path / "results", tmp_path / "published/tables")
    assert not (tmp_path / "published").exists() or not list((tmp_path / "published").iterdir())


def test_unknown_study_names_the_configured_ones(tmp_path, capsys):
    import json
    assert main(["publish", "--study", "paper_A", "--results", str(tmp_path), "--config-json", json.dumps(CONFIG),
                 "--out", str(tmp_path / "out")]) == 1
    assert "study 'paper_A' is not in the config; configured: baseline" in capsys.readouterr().err


@pytest.mark.parametrize("given, says", [
    ("config.json", "--config-json takes the config itself as JSON text, as the workflow passes it, not a file "
                    "name: 'config.json' is not JSON (Expecting value: line 1 column 1 (char 0))"),
    ('["studies"]', "--config-json must be a JSON object (keys of the config), got '[\"studies\"]'"),
    ("{}", "[studies] study 'baseline' is not in the config; configured: none"),
])
def test_a_config_json_that_is_no_config_is_one_line(given, says, tmp_path, capsys):
    """The workflow passes the config itself; a file name typed by hand was json's
    traceback, a list an AttributeError (the commands of every study table and the atlas
    read their --config-json the same way)."""
    assert main(["publish", "--study", "baseline", "--results", str(tmp_path), "--config-json", given,
                 "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.splitlines() == [f"headlab publish: {says}"]
    assert not (tmp_path / "out").exists()
