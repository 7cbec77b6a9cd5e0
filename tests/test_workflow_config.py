"""Config handling of the real workflow (snakemake dry runs on the smoke config): --config
values keep their types, config errors stop snakemake before any job, and a study's
tables depend on its own config only."""
from __future__ import annotations

from test_workflow import snakemake, write_config


def test_config_override_with_numbers_keeps_their_types(tmp_path, mirror):
    config = write_config(tmp_path, mirror)
    result = snakemake("-n", "--configfile", str(config),
                       "--config", 'studies={"baseline": {"sizes": [200], "seeds": [3]}}')
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "multi30k/de-en/200/tiny/1+1/8L/seed3/model.pt" in out


def test_config_override_that_cannot_be_coerced_names_the_key(tmp_path, mirror):
    config = write_config(tmp_path, mirror)
    result = snakemake("-n", "--configfile", str(config), "--config", 'studies={"baseline": {"sizes": ["5k"]}}')
    assert result.returncode != 0
    assert "[studies.baseline.sizes[0]] '5k'" in result.stdout + result.stderr
