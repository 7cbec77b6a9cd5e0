"""A changed setting retrains exactly the models whose OpenNMT-py config it changes.

The onmt_config rule writes a model's config from its params, so Snakemake's params-change
check is what reruns it (and the training that reads it). One small workflow state is built
once: the configs written by real onmt_config jobs, empty stand-ins for their data inputs and
for the checkpoints; then each case is one dry run with a changed config (a few seconds)."""
from __future__ import annotations

import concurrent.futures
import re
import time
from pathlib import Path

import pytest
import yaml

import headlab.naming
import headlab.studies
from test_workflow import ROOT, set_dotted, snakemake

SCHEMA = yaml.safe_load((ROOT / "config/schema.yaml").read_text())

# Every key of the schema's `training` and the cases below that change it: a new key fails
# test_every_training_key_has_a_case until it is given one.
TRAINING_KEYS = {
    "overrides": ["train_steps_changed", "train_steps_removed"],
    "tensorboard": ["tensorboard"],
    "precision": ["precision_gpu", "no_model_change"],   # on CPU every model trains in fp32
    "device": ["precision_gpu", "gpus"],
    "gpus": ["gpus"],
    "jobs_per_gpu": ["no_model_change"],  # a scheduling resource only
    "threads": ["no_model_change"],       # the train job's threads (its shell), not its config
    "compile": ["no_model_change"],       # how the forward runs: $HEADLAB_COMPILE, not the config
}


def _config(tmp_path, mirror) -> dict:
    text = (ROOT / "tests/configs/smoke.yaml").read_text()
    text = text.replace("RESULTS_DIR", str(tmp_path / "results")).replace("MIRROR_DIR", str(mirror))
    config = yaml.safe_load(text)
    # two studies sharing a model (de-en 8L), one of them with a second preset (fr-en)
    config["studies"]["paper_A"]["heads"] = ["8L", "7Ftoken+1L"]
    config["training"]["overrides"]["accum_count"] = 2  # training.gpus 2 must divide it
    return config


def _models(config) -> dict[str, str]:
    """{model path: study names} of the config's models trained from scratch."""
    models: dict[str, set] = {}
    for name in config["studies"]:
        for m, extra in headlab.studies.study_models(config, name, config["results"]):
            if not m.get("tune"):
                models.setdefault(headlab.naming.model_path(headlab.naming.with_variant(m, extra)),
                                  set()).add(name)
    return models


def _planned_trainings(tmp_path, config) -> set[str]:
    path = tmp_path / f"changed-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(config))
    models = f"{config['results']}/models"
    targets = [f"{models}/{m}/model.pt" for m in _models(config)]
    result = snakemake("-n", "-p", "--nolock", "--configfile", str(path), "--allowed-rules", "onmt_config", "train",
                       "--", *targets, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {m[len(models) + 1:] for m in re.findall(r"headlab train -config (\S+)/onmt\.yaml", result.stdout)}


@pytest.fixture(scope="module")
def state(tmp_path_factory, mirror):
    """A results folder whose models are all up to date, their configs written by onmt_config."""
    tmp_path = tmp_path_factory.mktemp("retrain")
    config = _config(tmp_path, mirror)
    results = Path(config["results"])
    for m in _models(config):
        corpus, pair, size = m.split("/")[:3]
        data = results / "data" / corpus / pair / size
        c = config["corpora"][corpus]
        for split in (c["train"], c["valid"]):
            for side in ("src", "tgt"):
                (data / "bpe").mkdir(parents=True, exist_ok=True)
                (data / "bpe" / f"{split}.{side}").touch()
        (data / "vocab.txt").touch()
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    configs = [f"{results}/models/{m}/onmt.yaml" for m in _models(config)]
    result = snakemake("--cores", "1", "--configfile", str(path), "--allowed-rules", "onmt_config",
                       "--", *configs, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    time.sleep(0.01)
    for m in _models(config):
        (results / "models" / m / "model.pt").touch()
    return tmp_path, config


def _changed(config, changes) -> dict:
    config = yaml.safe_load(yaml.safe_dump(config))
    for dotted in changes:  # a section the config leaves out (evaluation)
        node = config
        for key in dotted.split(".")[:-1]:
            node = node.setdefault(key, {})
    return set_dotted(config, changes)


def _removed(config, dotted) -> dict:
    config = yaml.safe_load(yaml.safe_dump(config))
    *parents, leaf = dotted.split(".")
    node = config
    for key in parents:
        node = node[key]
    del node[leaf]
    return config


def _all(config):
    return set(_models(config))


def _pair(config, pair):
    return {m for m in _models(config) if f"/{pair}/" in m}


def _studies(config, name):
    return {m for m, names in _models(config).items() if name in names}


CASES = {
    "train_steps_changed": (lambda c: _changed(c, {"training.overrides.train_steps": 8}), _all),
    "train_steps_removed": (lambda c: _removed(c, "training.overrides.train_steps"), _all),
    "tensorboard": (lambda c: _changed(c, {"training.tensorboard": True}), _all),
    "precision_gpu": (lambda c: _changed(c, {"training.device": "gpu", "training.precision": "fp16"}), _all),
    "gpus": (lambda c: _changed(c, {"training.device": "gpu", "training.gpus": 2}), _all),
    # a preset of one study: its models are new ones (the preset is in the path); the
    # others, the model it shared with the other study included, stay
    "preset_one_study": (lambda c: _changed(c, {"studies.baseline.preset": "tiny_lowres"}),
                         lambda c: _studies(c, "baseline")),
    # options that reach no model config, in one dry run (and the state is up to date):
    # translation and evaluation options, a job's threads and share of a GPU, a CPU
    # run's precision, the trainings' compile
    "no_model_change": (lambda c: _changed(c, {
        "translation.beam_size": 3, "evaluation.bootstrap_samples": 10, "training.threads": 2,
        "training.jobs_per_gpu": 2, "training.precision": "fp16", "training.compile": "default"}),
                        lambda c: set()),
}


def test_every_training_key_has_a_case():
    assert set(TRAINING_KEYS) == set(SCHEMA["properties"]["training"]["properties"])
    for key, cases in TRAINING_KEYS.items():
        assert cases and all(case in CASES for case in cases), key


@pytest.fixture(scope="module")
def planned(state):
    """{case: the trainings its dry run plans}: the dry runs side by side (they only read)."""
    tmp_path, config = state
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = {case: pool.submit(_planned_trainings, tmp_path, change(config))
                   for case, (change, _) in CASES.items()}
        return {case: future.result() for case, future in futures.items()}


@pytest.mark.parametrize("case", list(CASES))
def test_a_change_retrains_exactly_the_models_it_changes(case, state, planned):
    _, config = state
    change, expected = CASES[case]
    assert planned[case] == expected(change(config))


def test_an_own_corpus_replaced_with_its_old_mtime_is_prepared_again(tmp_path, mirror):
    """A corpus file replaced with its old modification time (``cp new train.de; touch -r
    old train.de``, a restore from a backup) is a content change: its split is prepared
    again (and so everything downstream); a file only touched is no change."""
    import os

    from test_workflow_config import _own_config

    config = _own_config(tmp_path, mirror)
    target = str(tmp_path / "results/data/mine/en-de/full/raw/train.src")
    prepared = snakemake("--cores", "1", "--configfile", str(config), "--", target)
    assert prepared.returncode == 0, prepared.stderr[-3000:]
    corpus = tmp_path / "own/train.de"
    old = corpus.stat()
    os.utime(corpus)                                       # touched, same content: no change
    result = snakemake("-n", "--configfile", str(config), "--", target)
    assert "Nothing to be done" in result.stdout + result.stderr, result.stdout[-2000:]
    text = corpus.read_bytes()
    corpus.write_bytes(text.replace(b"Zwei", b"Drei", 1))   # a new corpus under the old mtime
    os.utime(corpus, ns=(old.st_atime_ns, old.st_mtime_ns))
    result = snakemake("-n", "--configfile", str(config), "--", target)
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert re.search(r"rule prepare_local:", out) and "Nothing to be done" not in out, out[-2000:]
