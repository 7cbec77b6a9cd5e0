"""Config handling of the real workflow (snakemake dry runs on the smoke config): --config
values keep their types, config errors stop snakemake before any job, and a study's
tables depend on its own config only."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_workflow import snakemake, write_config


def test_config_override_with_numbers_keeps_their_types(tmp_path, mirror):
    config = write_config(tmp_path, mirror)
    result = snakemake("-n", "--configfile", str(config),
                       "--config", 'studies={"baseline": {"sizes": [200], "seeds": [3]}}')
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "multi30k/de-en/200/tiny/default/1+1/8L/seed3/model.pt" in out


def test_config_override_that_cannot_be_coerced_names_the_key(tmp_path, mirror):
    config = write_config(tmp_path, mirror)
    result = snakemake("-n", "--configfile", str(config), "--config", 'studies={"baseline": {"sizes": ["5k"]}}')
    assert result.returncode != 0
    assert "[studies.baseline.sizes[0]] '5k'" in result.stdout + result.stderr


def test_a_bad_value_is_one_line_naming_the_source_it_came_from(tmp_path, mirror):
    """The merged value's source: the config file, an overlay on it, or --config."""
    config = write_config(tmp_path, mirror)
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("training:\n  threads: two\n")
    for args, source in [((str(config), str(overlay)), str(overlay)),
                         ((str(write_config(tmp_path, mirror, **{"training.threads": "two"})),), str(config))]:
        result = snakemake("-n", "--configfile", *args)
        lines = [line for line in (result.stdout + result.stderr).splitlines() if not line.startswith("Using profile")]
        assert result.returncode == 1
        assert lines == [f"headlab: config error: {source}: [training.threads] cannot read 'two' as integer"]
    result = snakemake("-n", "--configfile", str(config), str(overlay), "--config", "training={'threads': 'x'}")
    assert (result.stdout + result.stderr).splitlines()[-1] == (
        "headlab: config error: --config: [training.threads] cannot read 'x' as integer")


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
    # baseline.md and the baseline's learning curves and README (own outputs of the new model)
    assert jobs["study_table"] == jobs["study_figure"] == jobs["study_readme"] == 1, jobs
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


def _own_corpus(tmp_path, mirror) -> dict:
    """A few thousand Multi30k lines as one's own files, with the defects of issue 16."""
    import gzip

    def lines(split, lang, n):
        with gzip.open(mirror / f"multi30k/{split}.{lang}.gz", "rt", encoding="utf-8") as handle:
            return [next(handle).rstrip("\n") for _ in range(n)]

    de, en = lines("train", "de", 2000), lines("train", "en", 2000)
    de[10] = "   "                                  # blank on one side only
    en[20] = "A\x07 dog\x1b runs."                   # control characters
    de[30], en[30] = "wort " * 5000, "word " * 5000  # 5,000+ tokens
    de[40] = "Ja."                                   # length ratio far outside the norm
    en[40] = " ".join(["a"] * 12)
    folder = tmp_path / "own"
    folder.mkdir()
    (folder / "train.de").write_bytes(("\ufeff" + "\r\n".join(de) + "\r\n").encode())  # BOM + CRLF
    with gzip.open(folder / "train.en.gz", "wt", encoding="utf-8") as handle:
        handle.write("\n".join(en) + "\n")
    vde, ven = lines("val", "de", 100), lines("val", "en", 100)
    (folder / "valid.de").write_text("\n".join(vde) + "\n")
    (folder / "valid.en").write_text("\n".join(ven) + "\n")
    tde, ten = lines("test_2016_flickr", "de", 30), lines("test_2016_flickr", "en", 30)
    (folder / "test.tsv").write_text("".join(f"{s}\t{t}\n" for s, t in zip(tde, ten)))
    return {"dataset": "local", "bpe_merges": 100, "train": "train", "valid": "valid", "tests": ["test"],
            "files": {"train": {"de": str(folder / "train.de"), "en": str(folder / "train.en.gz")},
                      "valid": {"de": str(folder / "valid.de"), "en": str(folder / "valid.en")},
                      "test": {"tsv": str(folder / "test.tsv"), "langs": ["de", "en"]}}}


def _own_config(tmp_path, mirror, **study):
    import yaml

    path = write_config(tmp_path, mirror)
    config = yaml.safe_load(path.read_text())
    config["corpora"] = {"mine": _own_corpus(tmp_path, mirror)}
    config["studies"] = {"baseline": {"data": {"mine": ["en-de"]}, "layers": ["1+1"], "heads": ["7Ftoken+1L"],
                                      "preset": "tiny", **study}}
    path.write_text(yaml.safe_dump(config))
    return path


def test_own_corpus_pair_and_size_are_checked_before_any_job(tmp_path, mirror):
    config = _own_config(tmp_path, mirror)
    result = snakemake("-n", "--configfile", str(config), "--config", 'studies={"baseline": {"sizes": [2001]}}')
    assert result.returncode != 0
    assert ("[studies.baseline.sizes[0]] a subsample of 2001 pairs is larger than corpus 'mine', whose "
            "training split has 2000 lines") in result.stdout + result.stderr
    result = snakemake("-n", "--configfile", str(config), "--config", 'studies={"baseline": {"data": {"mine": ["de-fr"]}}}')
    assert "[studies.baseline.data.mine[0]] pair 'de-fr' is not in this local corpus" in result.stdout + result.stderr


@pytest.mark.slow
def test_own_corpus_trains_reports_and_publishes_its_cleaning(tmp_path, mirror):
    # the corpus and a study on it from the command line alone: null drops the smoke
    # config's paper_A and the baseline's Multi30k, numbers keep their types
    config = write_config(tmp_path, mirror)
    corpus = {**_own_corpus(tmp_path, mirror), "clean": {"max_ratio": 6}}
    overrides = ["corpora=" + json.dumps({"mine": corpus}),
                 'studies={"paper_A": null, "baseline": {"data": {"multi30k": null, "mine": ["en-de"]}, '
                 '"sizes": [1500], "heads": ["7Ftoken+1L"]}}']
    result = snakemake("--cores", "2", "--configfile", str(config), "--config", *overrides)
    assert result.returncode == 0, result.stderr[-5000:]
    results = tmp_path / "results"
    bleu = (results / "tables/baseline.csv").read_text().splitlines()[1].split(",")
    assert bleu[0] == "en-de" and 0.0 <= float(bleu[1]) <= 100.0
    log = (results / "logs/prepare/mine/en-de/1500/train.log").read_text()
    assert ("2000 pairs read, 3 removed (1 empty or whitespace-only side (first: line 11), 1 more than 250 "
            "tokens (first: line 31), 1 length ratio above 6 (first: line 41))") in log
    assert "UTF-8 BOM removed: 1" in log and "CRLF line endings normalised: 2000" in log
    assert "lines with control characters (replaced by a space): 1" in log and "1500 written" in log
    readme = (results / "tables/README.md").read_text()
    assert "- data mine/en-de/1500/train: " in readme and "3 removed" in readme
    from headlab.data.fetch import file_digest
    assert file_digest(tmp_path / "own/train.en.gz") in readme
    published = results / "published/tables"
    result = snakemake(str(published), "--cores", "1", "--configfile", str(config), "--config", *overrides)
    assert result.returncode == 0, result.stderr[-3000:]
    prov = json.loads((published / "provenance.json").read_text())
    train = prov["data"]["mine/en-de/1500/raw/train.report.json"]
    assert train["pairs_removed"] == 3 and train["files"][1]["sha256"] == file_digest(tmp_path / "own/train.en.gz")
