"""One training per model folder: ``headlab train`` holds a lock on its folder for its whole
life (released by the kernel when it dies, SIGKILL included), a second one on the same folder
is refused in one line, ``runlock unlock`` (make run's guard rail) names a training that
outlived its snakemake, and a training whose snakemake was killed stops by itself.
Real processes, real kills."""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from headlab.engine import train_lock
from headlab.engine.config import train_config, write_yaml
from headlab.workflow import runlock

from test_onmt_run import toy_corpus

HEADLAB = [sys.executable, "-m", "headlab.cli"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lock")
    src, tgt = toy_corpus(folder, n=200)
    result = subprocess.run(HEADLAB + ["vocab", "--train", str(src), str(tgt), "--out", str(folder / "vocab.txt")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return folder


def _config(corpus: Path, model_dir: Path) -> Path:
    """A training that runs until it is stopped."""
    options = train_config(
        preset="tiny", layers="1+1", heads="8L", train_src=str(corpus / "train.src"),
        train_tgt=str(corpus / "train.tgt"), valid_src=str(corpus / "train.src"),
        valid_tgt=str(corpus / "train.tgt"), vocab=str(corpus / "vocab.txt"), save_dir=str(model_dir),
        overrides=dict(hidden_size=16, word_vec_size=16, transformer_ff=32, train_steps=100000,
                       save_checkpoint_steps=20, keep_checkpoint=2, warmup_steps=5, batch_size=64,
                       bucket_size=200, report_every=5, valid_steps=100000))
    model_dir.mkdir(parents=True, exist_ok=True)
    write_yaml(options, model_dir / "onmt.yaml")
    return model_dir / "onmt.yaml"


def _wait_for_steps(model_dir: Path, alive, seconds: float = 240) -> None:
    """Until the training logs its first steps (so it holds its folder)."""
    deadline = time.monotonic() + seconds
    log = model_dir / "train.log"
    while not (log.exists() and re.search(r"Step +5/", log.read_text())):
        assert alive() and time.monotonic() < deadline, "the training did not start"
        time.sleep(0.2)


def _ended(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _lock_is_free(model_dir: Path) -> bool:
    with open(model_dir / train_lock.TRAIN_LOCK, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def test_a_second_training_on_the_folder_is_refused_and_make_runs_guard_names_the_first(corpus, tmp_path, capsys):
    work = tmp_path                              # snakemake's working directory
    model_dir = work / "results/models/m"
    config = _config(corpus, model_dir)
    first = subprocess.Popen(HEADLAB + ["train", "-config", str(config)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=ENV, cwd=work, start_new_session=True)
    try:
        _wait_for_steps(model_dir, lambda: first.poll() is None)
        log_start = (model_dir / "train.log").read_text().splitlines()[:5]
        second = subprocess.run(HEADLAB + ["train", "-config", str(config)], capture_output=True, text=True,
                                env=ENV, cwd=work, timeout=120)
        assert second.returncode == 1, second.stderr[-3000:]
        assert second.stderr.splitlines() == [
            f"headlab train: {model_dir}: a training (pid {first.pid}) is already running in this model folder: "
            f"wait for it to end, or stop it with kill {first.pid}"]
        # it touched nothing: the first training's log was neither emptied nor appended to as a resume
        log = (model_dir / "train.log").read_text()
        assert log.splitlines()[:5] == log_start and "resuming" not in log
        assert first.poll() is None and not _lock_is_free(model_dir)

        # make run's guard rail after a killed snakemake: its lock is there, no snakemake runs,
        # but a training of this folder still does
        (work / ".snakemake/locks").mkdir(parents=True)
        (work / ".snakemake/locks/0.input.lock").write_text("results/models/m/onmt.yaml\n")
        assert runlock.main(["unlock", "--directory", str(work)]) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.splitlines() == [
            f"runlock: a training outlived the run that started it: pid {first.pid} in {model_dir}; wait for it "
            f"to end, or stop it with kill {first.pid}, then run again"]
        assert runlock.lock_files(work)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    # the kernel released the lock with the killed process: nothing stale is left
    assert _lock_is_free(model_dir)
    assert runlock.main(["unlock", "--directory", str(work)]) == 0
    assert "removed a stale lock" in capsys.readouterr().out


def test_a_training_whose_snakemake_was_killed_stops_by_itself(corpus, tmp_path, capsys):
    work = tmp_path
    model_dir = work / "results/models/m"
    config = _config(corpus, model_dir)
    (work / "Snakefile").write_text(
        f'rule train:\n'
        f'    output: "results/models/m/model.pt"\n'
        f'    shell: "{sys.executable} -m headlab.cli train -config {config} >> train.out 2>&1"\n')
    snake = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=work, env=ENV,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for_steps(model_dir, lambda: snake.poll() is None)
        trainers = [p for p in psutil.Process(snake.pid).children(recursive=True)
                    if "headlab.cli" in p.cmdline() and "train" in p.cmdline()]
        assert len(trainers) == 1
        os.kill(snake.pid, signal.SIGKILL)          # snakemake alone: a closed terminal, an OOM kill
        snake.wait()
        deadline = time.monotonic() + 30
        while not _ended(trainers[0].pid):
            assert time.monotonic() < deadline, "the orphaned training kept running"
            time.sleep(0.2)
    finally:
        with contextlib.suppress(ProcessLookupError):     # the training, if it kept running
            os.killpg(snake.pid, signal.SIGKILL)
    assert f"the snakemake that started this training (pid {snake.pid}) is gone: stopping" in (
        model_dir / "train.log").read_text()
    assert _lock_is_free(model_dir)
    assert runlock.main(["unlock", "--directory", str(work)]) == 0
    assert "removed a stale lock" in capsys.readouterr().out
