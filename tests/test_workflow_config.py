"""Config handling of the real workflow (snakemake dry runs on the smoke config): --config
values keep their types, config errors stop snakemake before any job, and a study's
tables depend on its own config only."""
from __future__ import annotations

from pathlib import Path

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


def _pretend_finished(config):
    """Every output of the workflow present and recorded by snakemake (with its params),
    without running a job: empty files from --summary, then --touch."""
    summary = snakemake("--summary", "--configfile", str(config))
    assert summary.returncode == 0, summary.stderr[-3000:]
    for line in summary.stdout.splitlines()[1:]:
        path = Path(line.split("\t")[0])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    touched = snakemake("--touch", "--cores", "1", "--configfile", str(config))
    assert touched.returncode == 0, touched.stderr[-3000:]
    again = snakemake("-n", "--configfile", str(config))
    assert "Nothing to be done" in again.stdout + again.stderr


def _jobs(result) -> dict[str, int]:
    """rule -> count from a dry run's job stats."""
    out = result.stdout + result.stderr
    stats = out[out.index("Job stats:"):].split("\n\n")[0].splitlines()[3:]
    return {rule: int(count) for rule, count in (line.split() for line in stats) if rule != "total"}


def _outputs(result) -> list[str]:
    return [line for line in result.stdout.splitlines() if line.strip().startswith("output:")]


def test_changing_one_study_reruns_nothing_of_another(tmp_path, mirror):
    config = write_config(tmp_path, mirror)
    _pretend_finished(config)
    # the baseline's head spec: its model chain and its one table, nothing of paper_A
    result = snakemake("-n", "--configfile", str(config), "--config", 'studies={"baseline": {"heads": ["1L"]}}')
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = _jobs(result)
    assert jobs["study_table"] == 1 and "study_figure" not in jobs and "study_readme" not in jobs, jobs
    assert not [line for line in _outputs(result) if "/paper_A/" in line]
    # paper_A's Table 5 system: paper_A's outputs only, never the baseline table
    result = snakemake("-n", "--configfile", str(config), "--config", 'studies={"paper_A": {"eight_fixed": "8Fword"}}')
    assert result.returncode == 0, result.stderr[-3000:]
    assert not [line for line in _outputs(result) if "/tables/baseline" in line]
    assert _jobs(result)["study_readme"] == 1
    # a setting every study reads (training) reruns both
    result = snakemake("-n", "--configfile", str(config), "--config", 'training={"threads": 2}')
    outputs = " ".join(_outputs(result))
    assert "tables/baseline.md" in outputs and "paper_A/T1.md" in outputs
