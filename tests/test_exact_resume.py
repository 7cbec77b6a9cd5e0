"""A training (and a fine-tune) killed with SIGKILL after a checkpoint and run again ends
byte-identical to one never interrupted: every checkpoint's weights, the optimizer state,
the translations, the learning curve (headlab.engine.resume). Real processes, real kills, on
CPU with one thread."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import torch
import yaml

from headlab.engine.config import train_config, write_yaml
from headlab.engine.finetune import write_finetune
from headlab.engine.logs import read_curve

from test_onmt_run import toy_corpus

HEADLAB = [sys.executable, "-m", "headlab.cli"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
STEPS, EVERY = 240, 40


def _train(config: Path, check=True) -> subprocess.CompletedProcess:
    result = subprocess.run(HEADLAB + ["train", "-config", str(config)], capture_output=True, text=True, env=ENV)
    if check:
        assert result.returncode == 0, result.stderr[-3000:]
    return result


def _whole(path: Path) -> bool:
    """A checkpoint torch.save has finished writing (a zip's directory is written last)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return archive.testzip() is None
    except (zipfile.BadZipFile, OSError):
        return False


def _children(pid: int) -> set[int]:
    """The processes ``pid`` has started and that are still running (Linux's /proc)."""
    found = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.update(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _train_killed(config: Path, model_dir: Path) -> tuple[int, set[int]]:
    """Start the training and SIGKILL it as soon as its first checkpoint is whole: its exit
    status, and the processes it had started (a data worker, multiprocessing's resource
    tracker), each of which must end with it (the test waits for them up to a minute)."""
    proc = subprocess.Popen(HEADLAB + ["train", "-config", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=ENV)
    children = set()
    try:
        while proc.poll() is None and not _whole(model_dir / f"model_step_{EVERY}.pt"):
            time.sleep(0.01)
        children = _children(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
    assert not (model_dir / "model.pt").exists(), "the training finished before it was killed"
    waited = time.monotonic()
    while any(map(_alive, children)) and time.monotonic() - waited < 60:
        time.sleep(0.1)
    left = {pid: Path(f"/proc/{pid}/comm").read_text().strip() for pid in children if _alive(pid)}
    assert not left, f"processes of the killed training still running: {left}"
    return proc.returncode, children


def _config(folder: Path, name: str, workers: int = 0) -> Path:
    options = train_config(
        preset="tiny", layers="1+1", heads="7Ftoken+1L", train_src=str(folder / "train.src"),
        train_tgt=str(folder / "train.tgt"), valid_src=str(folder / "train.src"),
        valid_tgt=str(folder / "train.tgt"), vocab=str(folder / "vocab.txt"), save_dir=str(folder / name),
        overrides=dict(hidden_size=32, word_vec_size=32, transformer_ff=64, train_steps=STEPS,
                       save_checkpoint_steps=EVERY, keep_checkpoint=-1, warmup_steps=20, batch_size=96,
                       bucket_size=400, report_every=10, dropout=[0.3], attention_dropout=[0.2],
                       num_workers=workers))
    write_yaml(options, folder / f"{name}.yaml")
    return folder / f"{name}.yaml"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resume")
    src, tgt = toy_corpus(folder, n=400)
    result = subprocess.run(HEADLAB + ["vocab", "--train", str(src), str(tgt), "--out", str(folder / "vocab.txt")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return folder


def _assert_same_state(left, right, where=""):
    if isinstance(left, torch.Tensor):
        assert isinstance(right, torch.Tensor) and left.dtype == right.dtype and torch.equal(left, right), where
    elif isinstance(left, dict):
        assert left.keys() == right.keys(), where
        for key in left:
            _assert_same_state(left[key], right[key], f"{where}/{key}")
    elif isinstance(left, (list, tuple)):
        assert len(left) == len(right), where
        for index, (one, other) in enumerate(zip(left, right)):
            _assert_same_state(one, other, f"{where}[{index}]")
    else:
        assert left == right, where


def _assert_identical_trainings(straight: Path, resumed: Path, src: Path):
    steps = [f"model_step_{step}.pt" for step in range(EVERY, STEPS + 1, EVERY)]
    for name in steps + ["model.pt"]:
        one = torch.load(straight / name, map_location="cpu", weights_only=False)
        other = torch.load(resumed / name, map_location="cpu", weights_only=False)
        for part in ("model", "generator", "optim"):
            _assert_same_state(one[part], other[part], f"{name}:{part}")
    final = torch.load(resumed / "model.pt", map_location="cpu", weights_only=False)
    assert final["optim"]["training_step"] == STEPS + 1 and final["optim"]["optimizer"]["state"]
    outputs = []
    for model_dir in (straight, resumed):
        out = model_dir / "hyp.txt"
        result = subprocess.run(HEADLAB + ["translate", "-model", str(model_dir / "model.pt"), "-src", str(src),
                                           "-output", str(out), "-beam_size", "2"],
                                capture_output=True, text=True, env=ENV)
        assert result.returncode == 0, result.stderr[-2000:]
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1] and outputs[0].strip()
    # the resumed log holds both runs; its learning curve is the uninterrupted one
    log = (resumed / "train.log").read_text()
    assert f"Step {EVERY // 2}/" in log.split("headlab: resuming")[0], "the first run's log was not kept"
    assert log.count("headlab: resuming interrupted training") == 1
    straight_curve, resumed_curve = read_curve(straight / "train.log"), read_curve(resumed / "train.log")
    assert list(resumed_curve["step"]) == list(range(10, STEPS + 1, 10))
    assert straight_curve.equals(resumed_curve)


@pytest.mark.parametrize("workers", [0, 1], ids=["in-process", "one-data-worker"])
def test_killed_training_resumes_into_the_same_model(corpus, workers):
    """In process (CPU trainings) and with a data-loading worker (GPU trainings)."""
    straight, resumed = f"straight{workers}", f"resumed{workers}"
    _train(_config(corpus, straight, workers))
    status, children = _train_killed(_config(corpus, resumed, workers), corpus / resumed)
    assert status == -signal.SIGKILL
    # the worker was there when the trainer was killed, and ended with it
    assert len(children) >= workers
    second = _train(corpus / f"{resumed}.yaml")
    assert "headlab: resuming interrupted training from checkpoint" in second.stderr
    assert "will differ from an uninterrupted one" not in second.stderr
    _assert_identical_trainings(corpus / straight, corpus / resumed, corpus / "train.src")
    # each records the code it ran, once (the resume ran the same): 7Ftoken+1L's kinds, no DEA
    records = [json.loads((corpus / name / "code.json").read_text())["trainings"] for name in (straight, resumed)]
    assert records[0] == records[1] and [entry["from_step"] for entry in records[0]] == [0]
    assert {"engine/run.py", "heads/kinds.py", "heads/patterns.py"} <= set(records[0][0]["files"])
    assert "heads/sea.py" not in records[0][0]["files"]


def test_killed_finetune_resumes_into_the_same_model(corpus, tmp_path):
    parent_config = yaml.safe_load(_config(corpus, "parent").read_text())
    parent_config["train_steps"] = EVERY
    write_yaml(parent_config, corpus / "parent.yaml")
    _train(corpus / "parent.yaml")
    tune = {"enc_head_mask": "11110000", "train_steps": STEPS, "save_checkpoint_steps": EVERY}
    for name in ("straight", "resumed"):
        write_finetune(str(corpus / "parent" / "model.pt"), str(corpus / "parent.yaml"), tune,
                       str(tmp_path / name), str(tmp_path / name / "onmt.yaml"))
    _train(tmp_path / "straight" / "onmt.yaml")
    _train_killed(tmp_path / "resumed" / "onmt.yaml", tmp_path / "resumed")
    second = _train(tmp_path / "resumed" / "onmt.yaml")
    assert "headlab: resuming interrupted training from checkpoint" in second.stderr
    _assert_identical_trainings(tmp_path / "straight", tmp_path / "resumed", corpus / "train.src")
