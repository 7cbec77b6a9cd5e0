"""--config values get the schema's types before validation (snakemake parses nested
values with YAML's base loader: every number arrives as a string)."""
from __future__ import annotations

from pathlib import Path

import pytest

from headlab.workflow.config_types import coerce_overrides, load_schema
from headlab.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = load_schema(ROOT / "config/schema.yaml")


def _coerced(config, overrides):
    coerce_overrides(config, overrides, SCHEMA)
    return config


def test_numbers_booleans_and_lists_get_their_schema_types():
    over = {"studies": {"baseline": {"sizes": ["5000", "full"], "seeds": ["1", "2"]}},
            "data": {"offline": "true"}, "evaluation": {"significance": "0.01", "bootstrap_samples": "100"}}
    config = {"studies": {"baseline": {"sizes": ["5000", "full"], "seeds": ["1", "2"], "preset": "mini"}},
              "data": {"offline": "true", "mirror": "x"},
              "evaluation": {"significance": "0.01", "bootstrap_samples": "100"}}
    out = _coerced(config, over)
    assert out["studies"]["baseline"]["sizes"] == [5000, "full"]
    assert out["studies"]["baseline"]["seeds"] == [1, 2]
    assert out["data"]["offline"] is True and out["data"]["mirror"] == "x"
    assert out["evaluation"] == {"significance": 0.01, "bootstrap_samples": 100}


def test_strings_stay_strings_and_only_overridden_values_are_touched():
    config = {"studies": {"baseline": {"heads": ["8L"], "layers": ["2+2"], "preset": "123"}}, "results": 2024}
    out = _coerced(config, {"studies": {"baseline": {"heads": ["8L"]}}, "results": 2024})
    assert out["studies"]["baseline"]["preset"] == "123"   # not from --config: left alone
    assert out["results"] == "2024"                         # snakemake made a top-level int


def test_free_form_onmt_overrides_read_as_yaml_scalars():
    over = {"training": {"overrides": {"train_steps": "600", "param_init": "0.0",
                                       "optim": "adam"}}}
    out = _coerced({"training": {"overrides": dict(over["training"]["overrides"])}}, over)
    assert out["training"]["overrides"] == {"train_steps": 600, "param_init": 0.0,
                                            "optim": "adam"}


@pytest.mark.parametrize("over, key", [
    ({"studies": {"baseline": {"sizes": ["5k"]}}}, "studies.baseline.sizes[0]"),
    ({"studies": {"baseline": {"seeds": ["1", "one"]}}}, "studies.baseline.seeds[1]"),
    ({"training": {"threads": "two"}}, "training.threads"),
    ({"data": {"offline": "maybe"}}, "data.offline"),
])
def test_a_value_that_cannot_be_coerced_names_its_key(over, key):
    import copy
    with pytest.raises(ConfigError) as err:
        _coerced(copy.deepcopy(over), over)
    assert f"[{key}]" in str(err.value)


def test_null_removes_a_key_where_the_schema_allows_no_null():
    over = {"studies": {"paper_A": "null", "baseline": {"data": {"multi30k": "null", "mine": ["de-en"]}}},
            "data": {"mirror": "null"}}
    config = {"studies": {"paper_A": "null", "baseline": {"data": {"multi30k": "null", "mine": ["de-en"]},
                                                          "preset": "mini"}},
              "data": {"mirror": "null"}}
    out = _coerced(config, over)
    assert out["studies"] == {"baseline": {"data": {"mine": ["de-en"]}, "preset": "mini"}}
    assert out["data"] == {"mirror": None}  # null is a value there: no download mirror
