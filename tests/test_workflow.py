"""The Snakemake workflow: config validation, dry runs of the shipped configs, and one
tiny end-to-end run on a few hundred real Multi30k lines."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hangguard import hang_guard

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
             "--directory", str(ROOT)]


def snakemake_env() -> dict:
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def snakemake(*args, timeout=900):
    """snakemake run in the repository; ``timeout``: its hang guard on the reference VM (hangguard.py)"""
    return subprocess.run(SNAKEMAKE + list(args), capture_output=True, text=True, env=snakemake_env(),
                          timeout=hang_guard(timeout), cwd=ROOT)


#: the shipped profile of local runs, as `make run` passes it
LOCAL_PROFILE = ("--profile", "profiles/local")


def run_workflow(*args, timeout=900):
    """A whole workflow run (hundreds of jobs) through the shipped local profile, as `make run`
    runs it: the profile users run is the one tested, and its greedy scheduler and job rate
    (profiles/local/config.yaml) cut snakemake's own CPU; the smoke run alone on 2 cores:
    510 -> 439 core-s, 277 -> 246 s. Runs of a few jobs keep plain ``snakemake``: the
    profile's rate window makes a run wait up to 10 s at its end (one job: 15 -> 24 s)."""
    return snakemake(*LOCAL_PROFILE, *args, timeout=timeout)


def set_dotted(config: dict, changes: dict) -> dict:
    """``config`` with each ``"a.b.c": value`` of ``changes`` set (in place)."""
    for dotted, value in changes.items():
        node = config
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return config


def write_config(tmp_path, mirror, **changes) -> Path:
    text = (ROOT / "tests/configs/smoke.yaml").read_text()
    text = text.replace("RESULTS_DIR", str(tmp_path / "results")).replace("MIRROR_DIR", str(mirror))
    config = set_dotted(yaml.safe_load(text), changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def paper_dry_run(tmp_path_factory):
    """config/paper.yaml's whole DAG, printed (into an empty results folder): one dry run
    (half a minute) that the tests of the shipped paper config read."""
    results = tmp_path_factory.mktemp("paper_dry_run") / "results"
    return snakemake("-n", "-p", "--configfile", "config/paper.yaml", "--config", f"results={results}")


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/multi30k-gpu.yaml", "config/paper.yaml"])
def test_shipped_configs_dry_run(configfile, tmp_path, request):
    # into an empty results folder, so that the whole DAG is printed
    if configfile == "config/paper.yaml":
        result = request.getfixturevalue("paper_dry_run")
    else:
        result = snakemake("-n", "--quiet", "rules", "--configfile", configfile,
                           "--config", f"results={tmp_path / 'results'}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"\btrain\b", result.stdout + result.stderr)


@pytest.mark.parametrize("configfiles, absent, present", [
    # paper.yaml on CPU: every corpus swapped for mirror data, offline (config/cpu/paper.yaml)
    (["config/paper.yaml", "config/cpu/paper.yaml"], ["europarl", "hindencorp05", "--split train_fairseq"],
     ["data/park-ko-en/cs-en/full/bpe.src.codes", "data/ted-be-en/vi-en/full/bpe.tgt.codes",
      "--dataset iwslt15-en-vi --pair vi-en --split tst2011", "--offline",
      # paper B's four searches start at once (they ran one pair after another)
      *[f"paper_B/stages/{c}/stage1.json" for c in ("iwslt14-de-en-b10k/de-en", "wmt17cs-de-en/de-en",
                                                     "hindencorp-hi-en/fr-en", "ted-be-en/vi-en")]]),
    # the GPU sitting's overlay: null removes papers A-D and the atlas; three 6+6 models, one seed
    (["config/multi30k-gpu.yaml", "config/gpu-sitting.yaml"],
     ["/paper_A/", "/paper_B/", "/paper_C/", "/paper_D/", "/atlas/", "de-en/full/base/default/6+6/8L/seed2",
      "en-de/full/base"],
     ["/tables/baseline.csv", "de-en/full/base/default/6+6/8L/seed1", "6+6/7Ftoken+1L/seed1", "6+6/8Ftoken/seed1"]),
    # the embedded default: three seeds where the headlines are, the one-seed sweeps narrowed
    (["config/config.yaml"], ["de-en/full/mini_lowres", "cs-en/full/mini_lowres", "multi30k/en-cs/",
                              "rhe_fgate=0.3", "lpea_k=4", "/2+2/8L.8RHElpea", "-beam_size 3"],
     ["multi30k/fr-en/full/mini_lowres/default/2+2/7Ftoken+1L/seed3", "8RHElpea.*8L/seed3",
      "de-en/full/mini/default/2+2/8Ftoken/seed3", "rhe_fgate=0.5", "lpea_k=0", "/2+2/2*8RHElpea",
      "-beam_size 1 -batch_size 8000", "learning_rate=2.0+train_steps=300"]),
    # the embedded default at its full CPU breadth: the one-seed sweeps make run leaves out
    (["config/config.yaml", "config/wide.yaml"], [],
     ["multi30k/de-en/full/mini_lowres/default/2+2/7Ftoken+1L/seed3",
      "multi30k/cs-en/full/mini_lowres/default/2+2/8L/seed3", "multi30k/en-cs/full/mini/default/2+2/8RHElpea",
      "rhe_fgate=0.3", "lpea_k=2", "/2+2/8L.8RHElpea"]),
])
def test_overlays_merge_on_their_config(configfiles, absent, present, tmp_path):
    result = snakemake("-n", "-p", "--configfile", *configfiles, "--config", f"results={tmp_path / 'results'}")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert [s for s in absent if s in out] == [] and [s for s in present if s not in out] == []


def test_overlay_null_for_a_required_key_is_a_config_error(tmp_path):
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("corpora:\n  multi30k:\n    train: null\n")
    result = snakemake("-n", "--configfile", "config/multi30k-gpu.yaml", str(overlay),
                       "--config", f"results={tmp_path / 'results'}")
    assert result.returncode != 0 and "'train' is a required property" in result.stdout + result.stderr


def test_paper_config_learns_korean_english_bpe_per_side(paper_dry_run):
    # paper A §4.2: BPE "shared between source and target language, but independent for KO-EN"
    result = paper_dry_run
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "data/park-ko-en/ko-en/full/bpe.src.codes" in out and "data/park-ko-en/ko-en/full/bpe.tgt.codes" in out
    assert "data/park-ko-en/ko-en/full/vocab.tgt.txt" in out
    assert "data/park-ko-en/ko-en/full/bpe.codes" not in out
    assert "data/iwslt14-de-en/de-en/full/bpe.codes" in out


def _fetch_commands(result, dataset):
    return [line for line in (result.stdout + result.stderr).splitlines()
            if f"headlab fetch --dataset {dataset} " in line]


def test_paper_config_fetches_only_what_its_splits_read(tmp_path, paper_dry_run):
    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    result = paper_dry_run
    assert result.returncode == 0, result.stderr[-3000:]
    [wmt] = _fetch_commands(result, "wmt19-de-en")
    assert "train/europarl-v9.de-en.tsv.gz" in wmt and "--allow-unverified" in wmt
    assert "paracrawl" in wmt and "rapid2019" not in wmt  # train_all is not configured
    # without Table 3's high-resource scenario, ParaCrawl (several GB) is never downloaded
    del config["studies"]["paper_A"]["highres"], config["corpora"]["wmt19-paracrawl-de-en"]
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "-p", "--configfile", str(tmp_path / "paper.yaml"),
                       "--config", f"results={tmp_path / 'r2'}")
    assert result.returncode == 0, result.stderr[-3000:]
    [wmt] = _fetch_commands(result, "wmt19-de-en")
    assert "train/europarl-v9.de-en.tsv.gz" in wmt and "paracrawl" not in wmt
    [mucow] = _fetch_commands(result, "mucow")
    assert "--file" not in mucow  # a test suite: all of its files


def test_paper_config_paper_b_corpora(tmp_path):
    """Paper B §4.1 corpora in config/paper.yaml: Hindi through IndicNLP both ways, be-en BPE per
    side, WMT17-CS fetching both test archives, IWSLT14 with 10k merges."""
    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    config["studies"] = {"baseline": {
        "data": {"hindencorp-hi-en": ["en-hi"], "ted-be-en": ["be-en"], "wmt17cs-de-en": ["de-en"],
                 "iwslt14-de-en-b10k": ["de-en"]},
        "sizes": [10000], "layers": ["6+6"], "heads": ["8L"], "preset": "base_paper_B"}}
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "-p", "--configfile", str(tmp_path / "paper.yaml"),
                       "--config", f"results={tmp_path / 'r'}")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert re.search(r"preprocess tokenize --lang hi --tokenizer indic --in \S+/hindencorp-hi-en/en-hi/", out)
    assert re.search(r"preprocess tokenize --lang en +--in \S+/hindencorp-hi-en/en-hi/", out)
    assert re.search(r"preprocess postprocess --lang hi --tokenizer indic --in \S+/hindencorp-hi-en/en-hi/", out)
    assert "data/ted-be-en/be-en/10000/bpe.src.codes" in out and "data/ted-be-en/be-en/10000/bpe.codes" not in out
    assert re.search(r"bpe-learn --merges 5000 --in \S+/ted-be-en/be-en/10000/tc/train.src ", out)
    assert re.search(r"bpe-learn --merges 10000 --in \S+/iwslt14-de-en-b10k/de-en/10000/", out)
    assert re.search(r"--dataset iwslt14-de-en --pair de-en --split train_fairseq .*--size 10000 --seed 1", out)
    assert "--split valid_fairseq" in out
    [wmt17] = _fetch_commands(result, "wmt17-de-en")
    assert "sacrebleu/wmt14-test-full.tgz sacrebleu/wmt17-test.tgz" in wmt17 and "rapid2016.tgz" in wmt17
    [hindencorp] = _fetch_commands(result, "hindencorp")
    assert "--allow-unverified" in hindencorp


def test_paper_config_paper_c_corpora_and_syntax_models(tmp_path):
    """Paper C §5 corpora in config/paper.yaml (NC v11 en-de/en-cs, WMT14 en-de, 32k BPE); a
    syntax model (DEA) trains and translates on the featured source of its parser, parsed
    from the Moses-tokenised English; an 8L model beside it keeps the plain BPE files."""
    config = yaml.safe_load((ROOT / "config/paper.yaml").read_text())
    config["studies"] = {"baseline": {
        "data": {"nc11-en-de": ["en-de"], "nc11-en-cs": ["en-cs"], "wmt14-en-de": ["en-de"]},
        "layers": ["6+6"], "heads": ["8DEA.*8L", "8L"], "preset": "base"}}
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(config))
    result = snakemake("-n", "-p", "--configfile", str(tmp_path / "paper.yaml"),
                       "--config", f"results={tmp_path / 'r'}")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    for corpus, pair, test in (("nc11-en-de", "en-de", "newstest2016"), ("nc11-en-cs", "en-cs", "newstest2016"),
                               ("wmt14-en-de", "en-de", "newstest2014")):
        data = f"data/{corpus}/{pair}/full"
        assert re.search(rf"bpe-learn --merges 32000 --in \S+/{data}/tc/train.src ", out)
        assert re.search(rf"headlab parse --parser depconv --in \S+/{data}/tok/train.src --out \S+/{data}/"
                         rf"parse/depconv/train.jsonl", out)
        assert re.search(rf"headlab featurize --bpe \S+/{data}/bpe/{test}.src --parses \S+/{data}/parse/depconv/"
                         rf"{test}.jsonl --parser depconv", out)
        assert re.search(rf"headlab translate -model \S+/{corpus}/{pair}/full/base/default/6\+6/8DEA.\*8L/seed1/"
                         rf"model.pt -src \S+/{data}/feat/depconv/{test}.src .*-n_src_feats 6 -transforms inferfeats headlab_words", out)
        assert re.search(rf"headlab translate -model \S+/{corpus}/{pair}/full/base/default/6\+6/8L/seed1/"
                         rf"model.pt -src \S+/{data}/bpe/{test}.src ", out)
        # the model's config (written by the workflow's own process) trains on the featured source
        assert re.search(rf"path_src: \S*/{data}/feat/depconv/train\.src\s+path_tgt: \S*/{data}/bpe/train\.tgt", out)
    [nc] = _fetch_commands(result, "nc11-en-de")
    assert "train/news-commentary-v11.de-en.txt.zip" in nc and "sacrebleu/wmt16-test.tgz" in nc
    assert "--allow-unverified" in nc


def test_unknown_config_key_is_an_error_naming_it(tmp_path, mirror):
    config = write_config(tmp_path, mirror, **{"training.treads": 2})
    result = snakemake("-n", "--configfile", str(config))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "[training.treads] unknown key 'treads'; did you mean 'threads'?" in output


def test_bad_value_is_an_error_naming_it(tmp_path, mirror):
    config = write_config(tmp_path, mirror, **{"studies.baseline.layers": ["6-6"]})
    result = snakemake("-n", "--configfile", str(config))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "[studies.baseline.layers[0]] '6-6' is not allowed: ENCODER+DECODER" in output


def test_misspelled_onmt_option_in_study_overrides_fails_before_any_job(tmp_path, mirror):
    # checked when the DAG is built (headlab.workflow.config_check), not in the onmt_config job
    config = write_config(tmp_path, mirror, **{"training.overrides.lerning_rate": 1.0})
    result = snakemake("--cores", "2", "--configfile", str(config), "--until", "onmt_config")
    assert result.returncode != 0
    assert ("[training.overrides.lerning_rate] unknown OpenNMT-py train option 'lerning_rate'; "
            "did you mean 'learning_rate'" in result.stdout + result.stderr)
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_end_to_end_smoke_run(tmp_path, mirror):
    config = write_config(tmp_path, mirror)
    result = run_workflow("--cores", "2", "--configfile", str(config))
    assert result.returncode == 0, result.stderr[-5000:]
    tables = tmp_path / "results/tables"
    rows = (tables / "baseline.csv").read_text().splitlines()
    assert rows[0] == "system,test_2016_flickr"
    system, bleu = rows[1].split(",")
    assert system == "de-en" and 0.0 <= float(bleu) <= 100.0
    assert "\\toprule" in (tables / "baseline.tex").read_text()
    score = json.loads(next((tmp_path / "results/scores").rglob("test_2016_flickr.full.json")).read_text())
    assert score["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert score["n"] == 20
    # sacreBLEU's 95% bootstrap interval beside every score
    assert score["bleu_ci_low"] <= score["bleu_mu"] <= score["bleu_ci_high"] and score["chrf_ci"] >= 0
    assert score["confidence_signature"].startswith("nrefs:1|bs:1000|seed:12345")
    # paper A: every table and figure, each table with the paper's numbers beside ours
    paper = tmp_path / "results/paper_A"
    for name in ("T1", "T2", "T3", "T4", "T5", "T6"):
        for ext in ("csv", "md", "tex"):
            assert (paper / f"{name}.{ext}").stat().st_size > 0, name
    for name in ("F2", "F3"):
        for ext in ("png", "pdf", "csv"):
            assert (paper / f"{name}.{ext}").stat().st_size > 0, name
    import csv
    with open(paper / "T1.csv", encoding="utf-8") as handle:
        t1 = {row["row"]: row for row in csv.DictReader(handle)}
    assert float(t1["DE-EN 8L"]["1+1 paper"]) == 25.66  # paper A Table 1
    assert t1["DE-EN 1L"]["6+6 paper mark"] == "*"
    # every head spec of paper A trained and translated in the workflow
    for spec in ("8L", "7Ftoken+1L", "7Fword+1L", "1L"):
        assert 0.0 <= float(t1[f"EN-DE {spec}"]["1+1 ours"]) <= 100.0
    with open(paper / "T5.csv", encoding="utf-8") as handle:
        t5 = {row["system"]: row for row in csv.DictReader(handle)}
    assert float(t5["8Ftoken"]["#params (M) paper"]) == 88.5
    assert float(t5["8L"]["#params (M) ours"]) > float(t5["8Ftoken"]["#params (M) ours"]) > 0
    assert 0.0 <= float(t5["8Ftoken"]["fr-en low-res ours"]) <= 100.0   # eight_fixed_lowres
    assert float(t5["8Ftoken"]["en-vi low-res paper"]) == 31.45
    readme = (paper / "README.md").read_text()
    assert "## Which effects of the paper hold here" in readme and "§4.4" in readme
    # the verdicts come from effects.csv; one seed here, and the README says so
    import pandas as pd
    effects = pd.read_csv(paper / "effects.csv")
    assert set(effects["verdict"]) <= {"holds", "reversed", "inconclusive at this scale", "inconclusive (one seed)",
                                       "not judged"}
    # the published GPU rows' claims: not judged on a 20-sentence test set, and saying so
    gpu = effects[effects["scale"] != "toy"]
    assert len(gpu) == 2 and (gpu["verdict"] == "not judged").all(), gpu
    assert gpu["interval"].str.endswith("this workflow's test_2016_flickr reference 20 (test_limit shortens it)").all()
    effects = effects[effects["scale"] == "toy"]
    assert len(effects) >= 10 and {"p_adjusted", "verdict_adjusted", "paper_note"} <= set(effects.columns)
    assert {"§4.1", "§4.2", "§4.3", "§4.4", "§5.3"} <= {c.split(":")[0].split(" ")[0] for c in effects["claim"]}
    # one seed and no system with several: no test, and the README says so
    assert (effects["runs"] != "").all() and "inconclusive (one seed) (the interval: test sentences only)" in readme
    holds = effects[effects["verdict"] == "holds"]
    assert ((holds["direction"] == ">") & (holds["ci_low"] > holds["null"])
            | (holds["direction"] == "<") & (holds["ci_high"] < holds["null"])).all()
    called = effects[effects["verdict_adjusted"].isin(["holds", "reversed"])]
    assert ((called["p_adjusted"] < 0.05) | (called["interval"] == "exact")).all()
    assert (effects["paper"].notna() | effects["paper_note"].notna()).all()
    from headlab.studies.effects import against_its_paper
    assert not against_its_paper(effects).any(), effects[against_its_paper(effects)]["claim"].tolist()
    summary = (tmp_path / "results/effects.md").read_text()
    assert "| paper_A | " in summary and "## paper_A" in summary
    f2 = pd.read_csv(paper / "F2.csv")
    assert {"ci_low", "ci_high", "count"} <= set(f2.columns)
    tidy = pd.read_csv(paper / "T1.tidy.csv")          # the numbers behind T1, one row per run
    toy = tidy[tidy["scale"] == "toy"]
    assert len(toy) == 2 * 1 * 4 and set(toy["seed"]) == {1}
    # the GPU sittings published in the tracked tree (results/published/) join every run's T1
    assert set(tidy["scale"]) - {"toy"} and (tidy["scale"] != "toy").sum() == len(tidy) - len(toy)
    f3 = (paper / "F3.csv").read_text().splitlines()
    assert f3[0].startswith("system,suite,category,by,bucket,correct,total,accuracy")
    # the finished study as a folder for git, with its provenance
    published = tmp_path / "results/published/paper_A-smoke"
    # the target goes first: --configfile takes every path after it
    result = snakemake(str(published), "--cores", "1", "--configfile", str(config))
    assert result.returncode == 0, result.stderr[-3000:]
    prov = json.loads((published / "provenance.json").read_text())
    assert prov["study"] == "paper_A" and prov["config"]["studies"]["paper_A"]["size"] == 300
    # T1 2 x 4, T5 2 x 8Ftoken + 1 low-res 8Ftoken, T2 4
    assert len(prov["training"]) == 15 and prov["training_wall_s_total"] > 0
    model = "multi30k/de-en/300/tiny/default/1+1/7Ftoken+1L/seed1"
    assert json.loads((published / f"scores/{model}/test_2016_flickr.no-h8.json").read_text())["signature"]
    assert len((published / f"translations/{model}/test_2016_flickr.full.txt").read_text().splitlines()) == 20
    assert (published / "T1.md").is_file() and (published / "README.md").is_file()
    assert not list(published.rglob("*.pt"))
    # a second run has nothing to do
    again = snakemake("-n", "--configfile", str(config))
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    # the code judging paper A's claims changed since (its record holds another digest): its
    # effects are judged again, what reads them rendered again, and nothing else
    from headlab.workflow.code_digest import study_digest
    digest, stale = repr(study_digest("paper_A")), repr("0" * 16)
    records = [path for path in (ROOT / ".snakemake/metadata").rglob("*") if path.is_file()
               and f"--out {tmp_path}/results/paper_A/effects " in path.read_text(errors="replace")]
    assert len(records) == 1 and digest in json.loads(records[0].read_text())["params"]
    records[0].write_text(records[0].read_text().replace(digest, stale))
    again = snakemake("-n", "--configfile", str(config))
    planned = re.findall(r"^(?:local)?rule (\w+):", again.stdout, re.M)
    assert again.returncode == 0 and "study_effects" in planned, again.stdout[-3000:]
    assert set(planned) <= {"study_effects", "study_readme", "effects_summary", "all"}, planned
    # heads/kinds.py changed since a model was trained and translated (its training's record
    # and its translation's Snakemake record hold other digests): the model is named when the
    # DAG is built, not retrained; its translation is made again with the code as it is, and
    # what reads it, and no other model is retranslated, rescored or re-exported; the list the
    # warning names holds its config, and forcing that (as the README shows) retrains it from scratch
    from headlab.workflow.code_digest import model_digest
    digest = repr(model_digest("headlab.engine.run", "7Ftoken+1L"))
    records = [path for path in (ROOT / ".snakemake/metadata").rglob("*") if path.is_file()
               and f"-output {tmp_path}/results/translations/{model}/test_2016_flickr.full." in path.read_text(
                   errors="replace")]
    assert len(records) == 1 and digest in json.loads(records[0].read_text())["params"]
    records[0].write_text(records[0].read_text().replace(digest, stale))
    results = tmp_path / "results"
    folder = results / "models" / model
    record = json.loads((folder / "code.json").read_text())
    assert {"heads/kinds.py", "heads/patterns.py"} <= set(record["trainings"][0]["files"])
    record["trainings"][0]["files"]["heads/kinds.py"] = "0" * 16
    (folder / "code.json").write_text(json.dumps(record))
    warned = snakemake("-n", "--configfile", str(config))
    assert warned.returncode == 0, warned.stderr[-3000:]
    planned = re.findall(r"^(?:local)?rule (\w+):\n(?:.*\n)*?\s+output: (\S+)", warned.stdout, re.M)
    assert [rule for rule, _ in planned].count("translate") == 1, warned.stdout[-3000:]
    assert {rule for rule, _ in planned} >= {"translate", "postprocess", "bleu"}
    assert not {rule for rule, _ in planned} & {"train", "forced_score", "export_attention", "params"}, planned
    assert "headlab: 1 trained model of this config ran other code than this checkout's and is not retrained" in \
        warned.stderr
    assert f"headlab:   heads/kinds.py: {folder}\n" in warned.stderr
    assert f"--forcerun $(cat {results}/stale-models.txt)  at the end of the snakemake command" in warned.stderr
    assert "train" not in re.findall(r"^(?:local)?rule (\w+):", warned.stdout, re.M)
    listed = (results / "stale-models.txt").read_text().split()
    assert listed == [str(folder / "onmt.yaml")]
    forced = snakemake("-n", "--configfile", str(config), "--forcerun", *listed)
    planned = re.findall(r"^(?:local)?rule (\w+):\n(?:.*\n)*?\s+output: (\S+)", forced.stdout, re.M)
    assert forced.returncode == 0 and ("train", str(folder / "model.pt")) in planned, forced.stdout[-3000:]
    assert [rule for rule, _ in planned].count("train") == 1


def test_training_compile_reaches_the_training_job_and_retrains_nothing(tmp_path, mirror, monkeypatch):
    """``training.compile`` is every training job's ``-compile`` default (its checkpoint says
    so), and no part of the model's config or path: set back to off (``false``: YAML's bare
    off), nothing reruns. ``TORCH_COMPILE_DISABLE=1`` (torch's own switch) makes the compile a
    no-op: the CPU's inductor would compile for minutes, and what is tested is the plumbing."""
    import torch

    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    monkeypatch.delenv("HEADLAB_COMPILE", raising=False)
    model = tmp_path / "results/models/multi30k/de-en/300/tiny/default/1+1/8L/seed1/model.pt"
    config = write_config(tmp_path, mirror, **{"training.compile": "default"})
    result = snakemake("--cores", "2", "--configfile", str(config), "--", str(model))
    assert result.returncode == 0, result.stderr[-3000:]
    assert torch.load(model, map_location="cpu", weights_only=False)["opt"].compile == "default"
    config = write_config(tmp_path, mirror, **{"training.compile": False})
    result = snakemake("-n", "--configfile", str(config), "--", str(model))
    assert result.returncode == 0 and "Nothing to be done" in result.stdout + result.stderr, result.stdout[-2000:]
