"""Same inputs, same numbers (issue 22 item 5): on CPU, the same code, config, seed and
thread count give bit-identical checkpoints and translations. A tiny model with dropout
(random masks) and more batches than fit one bucket (shuffled batch order) is trained
twice through ``headlab train``; every tensor of every checkpoint (weights and optimizer
state) and the translations must be equal bit for bit. Another seed must change them,
or the comparison could not fail. docs/statistics.md ("Same inputs, same numbers") lists what breaks it."""
from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from headlab.engine.config import train_config, write_yaml

HEADLAB = [sys.executable, "-m", "headlab.cli"]
#: one thread, as the workflow's CPU trainings (training.threads); the thread count is part
#: of what must stay the same
ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def run(args):
    result = subprocess.run(HEADLAB + args, capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("determinism")
    rng = random.Random(0)
    words = "a b c d e f g h@@ i j k l m n@@ o".split()
    src = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(120)]
    (folder / "train.src").write_text("\n".join(src) + "\n")
    (folder / "train.tgt").write_text("\n".join(" ".join(reversed(s.split())) for s in src) + "\n")
    run(["vocab", "--train", str(folder / "train.src"), str(folder / "train.tgt"), "--out", str(folder / "vocab.txt")])
    return folder


def train(corpus: Path, name: str, seed: int = 1) -> Path:
    save_dir = corpus / name
    options = train_config(
        preset="tiny", layers="1+1", heads="7Ftoken+1L", seed=seed,
        train_src=str(corpus / "train.src"), train_tgt=str(corpus / "train.tgt"),
        valid_src=str(corpus / "train.src"), valid_tgt=str(corpus / "train.tgt"),
        vocab=str(corpus / "vocab.txt"), save_dir=str(save_dir),
        overrides=dict(hidden_size=16, word_vec_size=16, transformer_ff=32, train_steps=6,
                       save_checkpoint_steps=3, valid_steps=3, warmup_steps=2, batch_size=96,
                       dropout=[0.2], attention_dropout=[0.2], bucket_size=40))
    write_yaml(options, corpus / f"{name}.yaml")
    run(["train", "-config", str(corpus / f"{name}.yaml")])
    run(["translate", "-model", str(save_dir / "model.pt"), "-src", str(corpus / "train.src"),
         "-output", str(save_dir / "hyp.txt"), "-beam_size", "2", "-max_length", "12"])
    return save_dir


def tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint: model, generator and optimizer state, by name."""
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    found = {}

    def walk(value, name):
        if torch.is_tensor(value):
            found[name] = value
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{name}.{key}")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{name}.{i}")

    for part in ("model", "generator", "optim"):
        walk(ckpt[part], part)
    return found


def differing(a: Path, b: Path) -> list[str]:
    ta, tb = tensors(a), tensors(b)
    assert ta.keys() == tb.keys()
    # bit for bit: equal bytes, not close values (torch.equal would call -0.0 == 0.0)
    return [k for k in ta if ta[k].dtype != tb[k].dtype or ta[k].shape != tb[k].shape
            or ta[k].numpy().tobytes() != tb[k].numpy().tobytes()]


@pytest.fixture(scope="module")
def runs(corpus):
    return train(corpus, "first"), train(corpus, "again"), train(corpus, "seed2", seed=2)


@pytest.mark.parametrize("checkpoint", ["model_step_3.pt", "model_step_6.pt", "model.pt"])
def test_retraining_gives_bit_identical_checkpoints(runs, checkpoint):
    first, again, _ = runs
    assert len(tensors(first / checkpoint)) > 20          # weights and Adam moments
    assert differing(first / checkpoint, again / checkpoint) == []


def test_retraining_gives_identical_translations(runs):
    first, again, _ = runs
    hyps = (first / "hyp.txt").read_text()
    assert hyps and hyps == (again / "hyp.txt").read_text()


def test_another_seed_changes_the_model(runs):
    first, _, other = runs
    changed = differing(first / "model.pt", other / "model.pt")
    assert len(changed) > 20        # initialisation, dropout masks and batch order all differ
