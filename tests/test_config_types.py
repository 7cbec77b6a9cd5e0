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


def test_a_head_mask_stays_the_string_it_was_written_as():
    """``enc_head_mask: "01001100.00000000"`` (the docs' spelling, paper D's pruned models): a
    leading zero keeps it a string, from a config file or --config (YAML would read a float)."""
    mask = "01001100.00000000"
    over = {"studies": {"baseline": {"overrides": {"enc_head_mask": mask, "dropout": "0.1"}}}}
    out = _coerced({"studies": {"baseline": {"overrides": dict(over["studies"]["baseline"]["overrides"])}}}, over)
    assert out["studies"]["baseline"]["overrides"] == {"enc_head_mask": mask, "dropout": 0.1}
    several = {"studies": {"baseline": {"overrides": {"enc_head_mask": "10010000.11111111"}}}}
    assert _coerced({"studies": {"baseline": {"overrides": {"enc_head_mask": "10010000.11111111"}}}},
                    several) == several
    # a config file's quoted value is a string whatever it reads as
    written = {"training": {"overrides": {"enc_head_mask": "11111111", "train_steps": 600}}}
    coerce_overrides(written, written, SCHEMA, typed=True)
    assert written["training"]["overrides"] == {"enc_head_mask": "11111111", "train_steps": 600}


def test_a_head_mask_of_another_type_is_one_line_naming_its_key():
    from headlab.heads.prune import parse_head_mask

    assert parse_head_mask(11111111, [8]) == [[1] * 8]
    with pytest.raises(ConfigError) as err:
        parse_head_mask(1001100.0, [8, 8], key="studies.baseline.overrides.enc_head_mask")
    assert str(err.value).startswith("[studies.baseline.overrides.enc_head_mask] head mask 1001100.0 is a float")


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
