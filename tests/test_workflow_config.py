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


def test_bogus_head_spec_preset_or_option_fails_before_any_job(tmp_path, mirror):
    config = write_config(tmp_path, mirror)
    for override, message in [
        ('studies={"baseline": {"heads": ["7Fbogus+1L"]}}',
         "[studies.baseline.heads[0]] bad head spec '7Fbogus+1L'"),
        ('studies={"paper_A": {"preset": "tinyy"}}',
         "[studies.paper_A.preset] unknown model preset 'tinyy' (did you mean 'tiny'?)"),
        ('studies={"paper_A": {"lowres": {"overrides": {"dropuot": [0.3]}}}}',
         "[studies.paper_A.lowres.overrides.dropuot] unknown OpenNMT-py train option 'dropuot'; did you mean 'dropout'?"),
    ]:
        result = snakemake("--cores", "1", "--configfile", str(config), "--config", override)
        assert result.returncode != 0
        out = result.stdout + result.stderr
        assert "config error: " + message in out, out[-2000:]
        assert "Building DAG" not in out and not (tmp_path / "results").exists()
