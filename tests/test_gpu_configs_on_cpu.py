"""config/multi30k-gpu.yaml executed on CPU through its overlay (config/cpu/multi30k-gpu.yaml),
for the part the embedded default (`make run`, tests/test_workflow.py's smoke run) does not
cover: base presets (6+6, accum_count 2, multi30k_paper_B's model selection), the GPU
config's paper B grid (stage 1: FFN 1024/2048 x 4/8 heads), averaging of the last 5
checkpoints (paper C), paper D's fine-tunes from a data-dependent stage (gated, pruned,
inverted, control). One more overlay, written here, shrinks the data further (300
training pairs, 10 test sentences) and trains paper D at one seed of its three. The run is killed once a training has saved a
checkpoint and started again: it must finish, that training resumed from its checkpoint.
`make gpu-configs-on-cpu` runs the whole DAG of both GPU configs."""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import time

import pytest
import yaml

from test_workflow import LOCAL_PROFILE, ROOT, SNAKEMAKE, snakemake, snakemake_env
from hangguard import hang_guard

CONFIGS = ["config/multi30k-gpu.yaml", "config/cpu/multi30k-gpu.yaml"]
LPEA_RHE = "multi30k/en-de/full/base/default/6+6/8RHElpea.*8L/seed1"


def _kill_training(model_dir) -> bool:
    """SIGKILL the ``headlab train`` job writing ``model_dir`` (and its shell); found or not."""
    found = False
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                cmdline = handle.read().split(b"\0")
            if b"train" in cmdline and any(str(model_dir).encode() in part for part in cmdline):
                os.kill(int(pid), signal.SIGKILL)
                found = True
        except (OSError, ProcessLookupError):
            continue
    return found


def _has_whole_checkpoint(log) -> bool:
    """Has the training logged anything after saving a checkpoint, i.e. is one fully written?

    A model_step_N.pt exists as soon as torch.save opens it: killed then, the checkpoint is
    unreadable, set aside, and the training rightly starts again from scratch (CI once
    killed it there, and the test saw no resume)."""
    try:
        text = log.read_text()
    except OSError:
        return False
    return re.search(r"Saving checkpoint \S+model_step_\d+\.pt\n.*\S", text) is not None


@pytest.fixture(scope="module")
def run(tmp_path_factory, mirror):
    tmp = tmp_path_factory.mktemp("gpu_on_cpu")
    results = tmp / "results"
    overlay = tmp / "test-overlay.yaml"
    overlay.write_text(yaml.safe_dump({
        "results": str(results), "data": {"mirror": str(mirror), "offline": True},
        "corpora": {"multi30k": {"train_limit": 300, "test_limit": 10, "bpe_merges": 200}},
        # paper D's fine-tunes at one seed: the GPU config's three run the same rules three
        # times (the CPU of 10 trainings and 14 translations); make run's T3 has three seeds
        "studies": {"paper_D": {"seeds": [1]}}}))
    targets = [str(results / "paper_B/stages/multi30k/de-en/stage1.json"),
               str(results / "scores" / LPEA_RHE / "test_2016_flickr.avg5.json"),
               str(results / "paper_D/T3.csv")]
    options = [*LOCAL_PROFILE, "--cores", "2", "--configfile", *CONFIGS, str(overlay)]
    args = [*options, "--", *targets]
    # first run, killed once some training has saved a checkpoint: the training itself
    # (snakemake starts each job in a session of its own, so a signal to snakemake's group
    # does not reach it: it would finish its 10 steps) and then snakemake, as when a node is
    # lost; a SIGKILLed snakemake leaves its lock, removed as a user would
    started = time.monotonic()
    proc = subprocess.Popen(SNAKEMAKE + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=snakemake_env(), cwd=ROOT, start_new_session=True)
    interrupted = None
    try:
        while proc.poll() is None and interrupted is None:
            assert time.monotonic() - started < hang_guard(900), "no training saved a checkpoint in its hang guard"
            for log in (results / "models").glob("**/train.log"):
                if _has_whole_checkpoint(log) and not (log.parent / "model.pt").exists() \
                        and _kill_training(log.parent):
                    interrupted = log.parent
                    break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    snakemake(*options, "--unlock")
    second = snakemake(*args, timeout=1800)
    return results, interrupted, second, time.monotonic() - started


@pytest.mark.slow
def test_gpu_config_runs_on_cpu_and_resumes(run):
    results, interrupted, second, wall = run
    assert second.returncode == 0, (second.stdout + second.stderr)[-5000:]
    assert interrupted is not None, "the first run finished before any training saved a checkpoint"
    log = (interrupted / "train.log").read_text()
    assert "headlab: resuming interrupted training from checkpoint" in log, log[-3000:]
    print(f"GPU config on CPU: {wall:.0f} s wall (interrupted and resumed {interrupted.relative_to(results)})")


@pytest.mark.slow
def test_base_preset_and_the_gpu_grid(run):
    results = run[0]
    stage = json.loads((results / "paper_B/stages/multi30k/de-en/stage1.json").read_text())
    # what each candidate really trained with (a global override once replaced the 2048 ones)
    trained = [yaml.safe_load((results / "models" / c["model"] / "onmt.yaml").read_text()) for c in stage["candidates"]]
    assert {(o["transformer_ff"], o["heads"]) for o in trained} == {(1024, 4), (1024, 8), (2048, 4), (2048, 8)}
    assert all(o["model_selection"] == "valid_loss" and o["accum_count"] == [1] for o in trained)  # multi30k_paper_B
    onmt = yaml.safe_load((results / "models" / LPEA_RHE / "onmt.yaml").read_text())
    # base's shape and batching (the overlay shrinks width and steps only)
    assert (onmt["enc_layers"], onmt["dec_layers"], onmt["heads"], onmt["accum_count"]) == (6, 6, 8, [2])
    assert (onmt["hidden_size"], onmt["train_steps"], onmt["keep_checkpoint"]) == (32, 10, 5)


@pytest.mark.slow
def test_last_five_checkpoints_are_averaged(run):
    results = run[0]
    model = results / "models" / LPEA_RHE
    assert sorted(p.name for p in model.glob("model_step_*.pt")) == [f"model_step_{s}.pt" for s in (10, 2, 4, 6, 8)]
    assert (model / "model.avg5.pt").is_file()
    score = json.loads((results / "scores" / LPEA_RHE / "test_2016_flickr.avg5.json").read_text())
    assert "bleu" in score


@pytest.mark.slow
def test_paper_d_fine_tunes_from_the_gates_stage(run):
    results = run[0]
    with open(results / "paper_D/T3.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    systems = " ".join(str(r) for r in rows)
    for name in ("Baseline", "Pruned", "Inverted"):
        assert name.lower() in systems.lower(), rows
    gates = json.loads((results / "paper_D/stages/multi30k/en-de/seed1/gates.json").read_text())
    assert gates["heads"] == 48 and len(gates["mask"].split(".")) == 6  # 6 encoder layers x 8 heads
