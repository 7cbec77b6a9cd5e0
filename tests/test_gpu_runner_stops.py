"""The GPU sitting's runner (``run.py``) when a call is cut from outside: the device command's
limit, a signal, a fault of the runner, an MPS daemon that does not answer.

- a call stopped by SIGTERM stops every process it started and packs what it has (its last
  ``status.json`` says so); those processes live in the command's session, where the
  device machine ends what a command leaves, never in a session of their own;
- the next call on the machine evaluates the checkpoints of a training an earlier call
  began and never ended, instead of refusing its short window or training anew;
- the next call completes an evaluation an earlier call was stopped in, whether or not it
  had written its provenance;
- a daemon of CUDA MPS that hangs on its start or quit is recorded, never the sitting's end.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from headlab.workflow import gpu_runner

ROOT = Path(__file__).resolve().parents[1]

#: the real main() of run.py on a fake bundle: install and evaluation faked, the training one
#: child (``sleep``) started as the runner starts every process; each step is logged to STEPS
HARNESS = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from headlab.workflow import gpu_runner as runner
    here = Path(sys.argv[1])
    runner.BUNDLE = here / "bundle"
    steps = here / "steps.txt"
    def note(what):
        with open(steps, "a") as handle:
            handle.write(what + "\\n")
    def install(self):
        self.src.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        self.state.update(installed=True, publication="results/published/X/s", sitting="s", gpu="h200")
        note("install")
    def train(self):
        self.phase("train")
        child = self.start("8L", ["sleep", "300"], self.logs / "8L.log")
        (here / "child.json").write_text(json.dumps({"pid": child.pid}))
        note("train")
        time.sleep(120)
    runner.Sitting.install = install
    runner.Sitting.train = train
    runner.Sitting.evaluate = lambda self: note("evaluate")
    runner.Sitting.remainder = lambda self: note("remainder")
    sys.exit(runner.main(sys.argv[2:]))
""")


def _fake_bundle(tmp_path: Path, min_steps: int = 0) -> None:
    (tmp_path / "bundle").mkdir()
    slice_plan = {"name": "X", "min_steps": min_steps, "startup_s": 60, "seconds_per_step": 0.135}
    (tmp_path / "bundle" / "manifest.json").write_text(json.dumps(
        {"commit": "abc1234", "results": "results", "slice": slice_plan,
         "models": [{"name": "8L", "dir": "models/8L", "config": "models/8L/onmt.yaml"}]}))
    (tmp_path / "harness.py").write_text(HARNESS)


def _call(tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, str(tmp_path / "harness.py"), str(tmp_path), "--out",
                             str(tmp_path / "out"), "--work", str(tmp_path / "work"), *args],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (ended, its parent gone or not yet waiting) is as good as ended
    stat = Path(f"/proc/{pid}/stat")
    return stat.is_file() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_call_stopped_by_sigterm_stops_its_processes_and_packs_what_it_has(tmp_path):
    _fake_bundle(tmp_path)
    call = _call(tmp_path, "--device", "cpu", "--budget", "300")
    child_file = tmp_path / "child.json"
    try:
        for _ in range(300):
            if child_file.is_file() or call.poll() is not None:
                break
            time.sleep(0.1)
        child = json.loads(child_file.read_text())["pid"]
        # in the command's session (the machine ends it with the command), in its own group
        assert os.getsid(child) == os.getsid(call.pid) and os.getpgid(child) == child
        call.send_signal(signal.SIGTERM)
        output, _ = call.communicate(timeout=60)
    finally:
        if call.poll() is None:
            call.kill()
    assert call.returncode == 1, output
    assert "stopped by SIGTERM" in output
    for _ in range(50):
        if not _alive(child):
            break
        time.sleep(0.1)
    assert not _alive(child)
    status = json.loads((tmp_path / "out" / "status.json").read_text())
    assert status["calls"][-1]["phase"] == "done"
    assert status["error"] == "stopped by SIGTERM: what is done is packed"
    assert "train" in status["calls"][-1]["phases"] and not status.get("trained")
    assert (tmp_path / "out" / gpu_runner.RESULTS_TAR).is_file()


def _interrupted_work(tmp_path: Path, checkpoints: list[int]) -> Path:
    """The work folder of a first call stopped while its 8L trained (the state its last
    status left: the train phase begun, never ended)."""
    work = tmp_path / "work"
    folder = work / "headlab" / "models" / "8L"
    folder.mkdir(parents=True)
    for step in checkpoints:
        (folder / f"model_step_{step}.pt").write_bytes(b"")
    state = {"installed": True, "publication": "results/published/X/s", "sitting": "s", "gpu": "h200",
             "calls": [{"budget_s": 570, "device": "cuda", "phase": "train", "elapsed_s": 431.0,
                        "phases": {"install": {"start_s": 0.1, "end_s": 11.0}, "train": {"start_s": 11.2}}}]}
    (work / "state.json").write_text(json.dumps(state))
    (work / "manifest.json").write_text((tmp_path / "bundle" / "manifest.json").read_text())
    return work


def test_the_next_call_evaluates_the_checkpoints_of_a_training_that_was_cut(tmp_path):
    """A second call of 250 s after a first one killed at step ~3,000: its window would
    refuse as short of the slice's min_steps (600) and a fresh machine's would; here the
    checkpoints are evaluated, then the remainder runs, and nothing trains."""
    _fake_bundle(tmp_path, min_steps=600)
    _interrupted_work(tmp_path, [2800, 3000])
    call = _call(tmp_path, "--device", "cuda", "--budget", "250")
    output, _ = call.communicate(timeout=120)
    assert (tmp_path / "steps.txt").read_text().split() == ["install", "evaluate", "remainder"], output
    state = json.loads((tmp_path / "work" / "state.json").read_text())
    assert state["trained"] is True and state["exited"] == {}
    assert state["calls"][0]["phases"]["train"]["interrupted"] is True
    assert state["calls"][-1]["adopted_training"].startswith(
        "the training of an earlier call was stopped from outside at 431.0 s")


def test_a_cut_training_without_a_checkpoint_is_not_adopted(tmp_path):
    """Nothing to evaluate: the call is a first call again, and its window check refuses
    the 250 s as it would on a fresh machine (before installing anything)."""
    _fake_bundle(tmp_path, min_steps=600)
    _interrupted_work(tmp_path, [])
    call = _call(tmp_path, "--device", "cuda", "--budget", "250")
    output, _ = call.communicate(timeout=120)
    assert call.returncode == 1 and "under the slice's min_steps 600" in output
    assert not (tmp_path / "steps.txt").exists()


def _cut_in_evaluation(tmp_path: Path, provenance: dict | None) -> tuple[gpu_runner.Sitting, list]:
    """A later call's runner after a first call stopped in its evaluation (trained, never
    read its publication), ``provenance`` written (None: not yet); what it runs."""
    runner = object.__new__(gpu_runner.Sitting)
    runner.args = argparse.Namespace(device="cuda", budget=250.0)
    runner.src, runner.logs, runner.procs = tmp_path, tmp_path / "logs", {}
    runner.resolved, runner.state_path = tmp_path / "manifest.json", tmp_path / "state.json"
    runner.figures = {"pack_s": 15, "eval_reserve_s": 110}
    runner.manifest = {"slice": {"name": "X"}, "commit": "abc1234", "models": []}
    runner.state = {"trained": True, "publication": "results/published/X/s", "sitting": "s", "gpu": "h200",
                    "calls": [{"phase": "evaluate"}, {}]}
    runner.call = runner.state["calls"][-1]
    folder = tmp_path / runner.published()
    folder.mkdir(parents=True)
    if provenance is not None:
        (folder / "provenance.json").write_text(json.dumps(provenance))
    ran = []
    runner.started = time.monotonic()
    runner.phase = lambda name: None
    runner.end_phase = lambda *args, **kwargs: None
    runner.run = lambda name, cmd, timeout, extra_env=None: ran.append(name) or 0
    runner.complete_evaluation()
    return runner, ran


def test_the_next_call_completes_an_evaluation_that_was_cut(tmp_path):
    untranslated = "BLEU and chrF: not yet translated"
    causes = {"deadline": [untranslated], "failed": [], "not trained": []}
    runner, ran = _cut_in_evaluation(tmp_path / "a", {"status": "partial", "lacks": [untranslated],
                                                      "lacks_by_cause": causes})
    assert ran == ["evaluate-rest"] and runner.state["lacks_by_cause"] == causes
    # stopped before its provenance: the evaluation is run whole
    assert _cut_in_evaluation(tmp_path / "b", None)[1] == ["evaluate-rest"]
    # what failed is not run again, cut or not
    failed = {**causes, "failed": ["8L: translation ended with status 1"]}
    assert _cut_in_evaluation(tmp_path / "c", {"status": "partial", "lacks": [], "lacks_by_cause": failed})[1] == []


def test_an_mps_daemon_that_does_not_answer_is_recorded_not_the_sittings_end(tmp_path, monkeypatch):
    """A fake ``nvidia-cuda-mps-control``: its start answers (or fails), its ``quit`` hangs
    (it waits for its clients). The trainings' start and their stop go on; the hang is
    recorded under ``mps_quit``."""
    control = tmp_path / "bin" / "nvidia-cuda-mps-control"
    control.parent.mkdir()
    control.write_text("#!/bin/sh\n[ \"$1\" = -d ] && exit \"$(cat \"$0.rc\")\"\nexec sleep 30\n")
    control.chmod(0o755)
    monkeypatch.setenv("PATH", f"{control.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(gpu_runner, "MPS_CONTROL_S", 1)
    monkeypatch.setattr(gpu_runner, "MPS_CLIENT_CHECK", "pass")
    for start_rc, mode in (("0", "on"), ("1", "failed: ")):
        Path(f"{control}.rc").write_text(start_rc)
        runner = object.__new__(gpu_runner.Sitting)
        runner.args = argparse.Namespace(device="cuda", mps="on")
        runner.work, runner.logs, runner.call = tmp_path / "work", tmp_path / "logs", {}
        runner.mps_control, runner.mps_live = "nvidia-cuda-mps-control", set()
        runner.work.mkdir(exist_ok=True)
        runner.start_mps()
        assert runner.call["mps"].startswith(mode)
        runner.stop_mps()
        assert runner.call["mps_quit"].startswith("failed: Command") and not runner.mps_live
        assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ
