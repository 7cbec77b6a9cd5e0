"""A training timed from inside (headlab.engine.steptime, headlab.workflow.sitting_clock):
the loop's parts on a real toy training, the profile window, a training stopped by a signal
leaving what it measured, and the speed row's columns against hand-computed values."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from headlab.engine import steptime
from hangguard import hang_guard

CLOCK = [sys.executable, "-m", "headlab.workflow.sitting_clock"]


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """``toy(name, steps, valid_steps)``: a toy training's config (a checkpoint at each validation)."""
    from test_onmt_run import toy_training

    folder = tmp_path_factory.mktemp("clock")
    return lambda name, steps, valid_steps: toy_training(folder, name, model=name, train_steps=steps,
                                                         valid_steps=valid_steps, save_checkpoint_steps=valid_steps,
                                                         report_every=1)


def test_the_clock_splits_every_iteration_of_a_real_training(toy, tmp_path):
    out = tmp_path / "clock.json"
    result = subprocess.run(CLOCK + ["--out", str(out), "--name", "toy", "--profile-from", "2", "--profile-steps", "2",
                                     "--", "-config", str(toy("whole", 8, 4))], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    clock = json.loads(out.read_text())
    parts = clock["parts"]
    assert clock["name"] == "toy" and clock["iterations"] == 8
    # one forward/backward/update per step; validation and a checkpoint at steps 4 and 8
    # (and the final model.pt: a third save); every iteration but the last one closed
    assert parts["steps"]["calls"] == parts["data"]["calls"] == 8
    assert parts["validation"]["calls"] == 2 and parts["checkpoints"]["calls"] == 3
    assert parts["loop_other"]["calls"] == 7
    assert all(part["wall_s"] >= 0 and part["cpu_s"] >= 0 for part in parts.values())
    # the start-up in order: imports, then the loop's first request, then its first batch
    start = clock["start"]
    assert 0 < start["imports_s"] < start["loop_s"] <= start["first_batch_s"]
    # the first batch's wait is the first iteration's data part
    assert start["first_batch_s"] - start["loop_s"] <= parts["data"]["wall_s"] + 0.001
    # the window: iterations 2-3, CPU only here (no device columns), a trace a human can read
    profile = clock["profile"]
    assert profile["profile_steps"] == 2 and profile["profile_wall_ms"] > 0 and profile["profile_cpu_ms"] > 0
    assert profile["profile_top_kernels"] == profile["profile_cuda_ms"] == profile["profile_launches"] == ""
    assert profile["profile_top_cpu_ops"].count(" ms") == steptime.TOP
    assert clock["profile_tables"].startswith("by self CPU time") and "aten::" in clock["profile_tables"]


def test_the_clock_marks_every_nth_iteration_with_its_unix_time(toy, tmp_path):
    out = tmp_path / "clock.json"
    before = time.time()
    result = subprocess.run(CLOCK + ["--out", str(out), "--mark-every", "3", "--", "-config", str(toy("marked", 8, 4))],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    marks = json.loads(out.read_text())["marks"]
    assert [iteration for iteration, _ in marks] == [3, 6]
    assert before < marks[0][1] <= marks[1][1] <= time.time()


def test_a_trainings_steps_split_by_what_ran_beside_it():
    """The runner's side track of a call that began at Unix time 1,000: the CUDA suite from
    17.5 to 275.6 s, the fused bench to 299.6 s, the blocked one stopped with the trainings
    at 400 s. A clock's spans of 50 steps: 1,394-1,400 s beside the blocked bench (midpoint
    1,397), then 1,400-1,405 and 1,405-1,415 s clear: 6 s / 50 = 120 ms and 15 s / 100 =
    150 ms a step."""
    from headlab.workflow import sitting_speed

    call = {"started_at": 1000.0, "phases": {"install": {"end_s": 10.0}, "train": {"end_s": 400.0}},
            "gpu_tests_started_s": 17.5, "gpu_tests_ended_s": 275.6, "bench_fused_started_s": 275.6,
            "bench_fused_ended_s": 299.6, "bench_blocked_started_s": 299.6}
    # the call that trained, whatever came after it
    windows = sitting_speed.side_track_windows({"calls": [call, {"phases": {"remainder": {}}}]})
    assert windows == [(1017.5, 1275.6), (1275.6, 1299.6), (1299.6, 1400.0)]
    # a runner of before these times: nothing to split by
    assert sitting_speed.side_track_windows({"calls": [{k: v for k, v in call.items() if k != "started_at"}]}) == []
    marks = [[1000, 1394.0], [1050, 1400.0], [1100, 1405.0], [1150, 1415.0]]
    assert sitting_speed.step_split(marks, windows) == {"step_ms_side_track": 120.0, "step_ms_clear": 150.0}
    assert sitting_speed.step_split(marks[1:], windows) == {"step_ms_side_track": "", "step_ms_clear": 150.0}
    assert sitting_speed.step_split(marks[:1], windows) == {"step_ms_side_track": "", "step_ms_clear": ""}
    # in the speed row, from the clock's marks
    row = sitting_speed.speed_rows([{"name": "8L"}], {"gpu": "h100"}, {}, {}, {},
                                   {"8L": {"iterations": 1150, "marks": marks}}, side_track=windows)[0]
    assert (row["step_ms_side_track"], row["step_ms_clear"]) == (120.0, 150.0)
    # a side track not known (a runner of before its times): no split, rather than all "clear"
    row = sitting_speed.speed_rows([{"name": "8L"}], {"gpu": "h100"}, {}, {}, {},
                                   {"8L": {"iterations": 1150, "marks": marks}}, side_track=[])[0]
    assert "step_ms_clear" not in row and "step_ms_side_track" not in row


def test_a_training_stopped_by_a_signal_leaves_what_it_measured(toy, tmp_path):
    """The sitting ends its trainings at the deadline with SIGTERM (no Python cleanup runs):
    the clock written when its profile window closed is there, whole."""
    out = tmp_path / "clock.json"
    proc = subprocess.Popen(CLOCK + ["--out", str(out), "--profile-from", "2", "--profile-steps", "1", "--",
                                     "-config", str(toy("stopped", 100000, 100000))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        began = time.monotonic()
        while not (out.is_file() and "profile" in out.read_text()) and time.monotonic() - began < 300:
            assert proc.poll() is None, "the training ended by itself"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    clock = json.loads(out.read_text())
    assert clock["iterations"] >= 2 and clock["profile"]["profile_steps"] == 1
    assert not list(tmp_path.glob(".clock.json.*"))          # no temporary file left beside it


def test_the_profile_summary_counts_the_host_side_ops():
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiler:
        for _ in range(3):
            torch.ones(64, 64) @ torch.ones(64, 64)
    summary = steptime.profile_summary(profiler, steps=3, wall_ms=12.345)
    assert "aten::mm x3 " in summary["profile_top_cpu_ops"]
    assert summary["profile_steps"] == 3 and summary["profile_wall_ms"] == 12.3
    assert summary["profile_syncs"] == summary["profile_sync_ms"] == ""      # no CUDA: not zero, unknown


def test_a_profile_window_must_hold_a_step():
    with pytest.raises(ValueError, match="first >= 1 and steps >= 1"):
        steptime.ProfileWindow(0, 20)
    with pytest.raises(ValueError, match=r"first >= 1 and steps >= 1 \(0 with a lead: timed, not traced\)"):
        steptime.ProfileWindow(151, 0)        # times nothing, traces nothing
    with pytest.raises(ValueError, match="first >= 1 and steps >= 1"):
        steptime.ProfileWindow(151, -1)
    with pytest.raises(ValueError, match="lead must be 0 .. 40"):
        steptime.ProfileWindow(41, 20, lead=41)


def test_the_lead_before_the_window_is_its_steady_step(monkeypatch):
    """A window at iterations 6-7 with a lead of 3: iterations 3, 4 and 5 timed (a fake
    clock: iteration i begins at i**2 s, so they take 7, 9 and 11 s), the device synchronised
    at each end: (36 - 9) s / 3 = 9,000 ms a step. Iterations 1-2 (the warm-up) and the
    window are not."""
    now = {"s": 0.0}
    synchronised = []
    monkeypatch.setattr(steptime.time, "perf_counter", lambda: now["s"])
    monkeypatch.setattr(steptime.ProfileWindow, "_synchronize", staticmethod(lambda: synchronised.append(now["s"])))
    window = steptime.ProfileWindow(6, 2, lead=3)
    for iteration in range(1, 9):
        now["s"] = float(iteration ** 2)
        window.at_iteration(iteration)
    assert window.lead_step_ms == 9000.0
    assert synchronised[:2] == [9.0, 36.0] and window.summary["profile_steps"] == 2
    # no lead: nothing timed
    plain = steptime.ProfileWindow(2, 1)
    for iteration in range(1, 4):
        plain.at_iteration(iteration)
    assert plain.lead_step_ms is None


def test_a_timed_window_without_a_trace_waits_at_its_barrier_then_times_its_lead(monkeypatch):
    """``steps`` 0 with a lead of 3 before iteration 6 (a copy of the probe side by side):
    the barrier is called once, as iteration 3 begins and before the lead's clock starts, so
    its wait (100 s here) is no step's; iterations 3-5 (7, 9 and 11 s on a fake clock where
    iteration i begins at i**2 s, plus the wait) timed, their Unix times kept; the window
    closes at 6 with nothing traced."""
    now = {"s": 0.0, "waited": 0.0}
    calls = []
    monkeypatch.setattr(steptime.time, "perf_counter", lambda: now["s"])
    monkeypatch.setattr(steptime.time, "time", lambda: 1000.0 + now["s"])
    monkeypatch.setattr(steptime.ProfileWindow, "_synchronize", staticmethod(lambda: calls.append(("sync", now["s"]))))

    def barrier():
        calls.append(("barrier", now["s"]))
        now["waited"] = 100.0
        now["s"] += 100.0
    window = steptime.ProfileWindow(6, 0, lead=3, before_lead=barrier)
    closed = []
    for iteration in range(1, 9):
        now["s"] = float(iteration ** 2) + now["waited"]
        closed.append(window.at_iteration(iteration))
    assert calls[:2] == [("barrier", 9.0), ("sync", 109.0)] and [c for c, _ in calls].count("barrier") == 1
    assert window.lead_step_ms == 9000.0 and window.lead_window == (1109.0, 1136.0)
    assert closed == [False] * 5 + [True, False, False] and window.summary == {} and window.tables == ""


def test_the_probe_side_by_side_times_its_copies_together_on_the_cpu(toy, tmp_path):
    """Two copies of a toy model at once (``--side-by-side 2``), each a process of its own:
    both wait at the barrier until both are there, then time their steps 5-14; each writes
    its JSON, and the summary reads them as two models side by side whose timed steps
    overlapped."""
    from headlab.workflow import sitting_speed

    folder = tmp_path / "crowd"
    (folder).mkdir()
    (folder / "old.1.json").write_text("{}")          # an earlier crowd's: removed first
    result = subprocess.run([sys.executable, "-m", "headlab.workflow.sitting_probe", "--side-by-side", "2", "--config",
                             str(toy("crowd", 4, 4)), "--name", "toy", "--out", str(folder), "--steps", "14",
                             "--warmup", "4"], capture_output=True, text=True, timeout=hang_guard(300))
    assert result.returncode == 0, result.stderr[-2000:]
    copies = {path.name: json.loads(path.read_text()) for path in folder.glob("*.json")}
    assert sorted(copies) == ["toy.1.json", "toy.2.json"]
    for copy in copies.values():
        assert copy["side_by_side"] == 2 and copy["ready"] == 2 and copy["step_ms"] > 0
        assert copy["window"][0] < copy["window"][1]
    summary = sitting_speed.crowd_summary(folder)
    assert summary["side_by_side"] == 2 and list(summary["step_ms"]) == ["toy"] and summary["overlap"] > 0
    mean = sum(copy["step_ms"] for copy in copies.values()) / 2
    # the summary rounds to 0.1 ms: half a unit off at most, and a float's slack at the half
    # (16.25 rounds to 16.2, whose float is 16.1999..., 0.0500000000000007 away)
    assert summary["step_ms"]["toy"] == pytest.approx(mean, abs=0.05 + 1e-9)
    refused = subprocess.run([sys.executable, "-m", "headlab.workflow.sitting_probe", "--config", "a", "--name", "a",
                              "--config", "b", "--name", "b", "--out", str(folder)], capture_output=True, text=True)
    assert refused.returncode == 2 and "several --config are a crowd's: give --side-by-side K" in refused.stderr


#: a copy of a crowd whose runner stops it (SIGTERM at the probe's cap) in its last save,
#: past its timed steps
STOPPED_IN_ITS_LAST_SAVE = """
import os, signal, sys, time
import onmt.models.model_saver as saver

def stopped_while_saving(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(60)

saver.ModelSaver._save = stopped_while_saving
from headlab.workflow.sitting_probe import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_copy_stopped_in_its_last_save_still_writes_what_it_timed(toy, tmp_path):
    """The runner's cap on the probe side by side (SIGTERM to the crowd's process group) lands
    while a copy saves its last checkpoint, after its timed steps: the copy ends with status
    128 + 15 and its JSON written, not killed with what it timed lost."""
    import signal

    folder = tmp_path / "crowd"
    result = subprocess.run([sys.executable, "-c", STOPPED_IN_ITS_LAST_SAVE, "--config", str(toy("stopped", 4, 4)),
                             "--name", "toy.1", "--out", str(folder / "toy.1.json"), "--steps", "10",
                             "--profile-steps", "0", "--warmup", "4", "--barrier", str(folder), "--barrier-size", "1"],
                            capture_output=True, text=True, timeout=hang_guard(300))
    assert result.returncode == 128 + signal.SIGTERM, result.stderr[-2000:]
    copy = json.loads((folder / "toy.1.json").read_text())
    assert copy["name"] == "toy.1" and copy["side_by_side"] == 1 and copy["step_ms"] > 0


def test_the_summary_of_a_probe_side_by_side_hand_computed(tmp_path):
    """Three copies of two models: 8L's timed 100 and 110 ms a step, 8Ftoken's 90; their
    timed steps ran from 0-10, 2-12 and 1-9 s: all three at once from 2 to 9 s, 7 of their
    mean 9.33 s; a copy that wrote half its JSON is left out."""
    from headlab.workflow import sitting_speed

    for name, step_ms, window in (("8L.1", 100.0, [0.0, 10.0]), ("8L.2", 110.0, [2.0, 12.0]),
                                  ("8Ftoken.1", 90.0, [1.0, 9.0])):
        (tmp_path / f"{name}.json").write_text(json.dumps({"name": name, "step_ms": step_ms, "window": window}))
    (tmp_path / "8Ftoken.2.json").write_text('{"name": "8Ftoken.2", "step_')
    assert sitting_speed.crowd_summary(tmp_path) == {"side_by_side": 3, "overlap": round(7 / (28 / 3), 3),
                                                     "step_ms": {"8Ftoken": 90.0, "8L": 105.0}}
    assert sitting_speed.crowd_summary(tmp_path / "none") == {}


def test_the_speed_row_of_a_clock_hand_computed():
    clock = {"iterations": 50, "start": {"imports_s": 6.5, "loop_s": 12.0, "first_batch_s": 30.25}, "parts": {
        "data": {"cpu_s": 0.5, "wall_s": 1.0, "calls": 50}, "steps": {"cpu_s": 3.0, "wall_s": 6.0, "calls": 50},
        "validation": {"cpu_s": 1.0, "wall_s": 2.0, "calls": 1}, "checkpoints": {"cpu_s": 0.25, "wall_s": 0.5, "calls": 1},
        "loop_other": {"cpu_s": 0.25, "wall_s": 0.5, "calls": 49}}}
    # 10 s of wall over 50 iterations; 5 CPU s over 10 wall s
    assert steptime.step_shares(clock) == {"step_ms": 200.0, "cpu_per_wall": 0.5, "data_share": 0.1,
                                           "steps_share": 0.6, "validation_share": 0.2, "checkpoints_share": 0.05,
                                           "loop_other_share": 0.05, "start_imports_s": 6.5,
                                           "start_loop_s": 12.0, "start_first_batch_s": 30.25}
    assert steptime.step_shares({}) == {} and steptime.step_shares({"iterations": 0, "parts": clock["parts"]}) == {}


def test_the_trainings_profile_side_by_side_wins_over_the_probes_alone():
    from headlab.workflow import sitting_speed

    models = [{"name": name, "params": 60_000_000, "src_tok_s": 11000, "tgt_tok_s": 12000} for name in ("8L", "8Ftoken")]
    ident = {"gpu": "h100", "commit": "abcdef0", "date": "2026-11-28", "slice": "A-T1-deep", "sitting": "s"}
    side = {"iterations": 10, "parts": {"steps": {"cpu_s": 1.0, "wall_s": 1.3, "calls": 10}},
            "profile": {"profile_cpu_ms": 900.0, "profile_steps": 20}}
    alone = {"8L": {"profile_cpu_ms": 500.0}, "8Ftoken": {"profile_cpu_ms": 400.0}}
    rows = sitting_speed.speed_rows(models, ident, {}, {}, alone, {"8L": side, "8Ftoken": {}}, {"8L": 88.5})
    assert [(r["profile_where"], r["profile_cpu_ms"]) for r in rows] == [("side by side", 900.0), ("alone", 400.0)]
    assert [r["step_ms_alone"] for r in rows] == [88.5, ""]
    assert rows[0]["step_ms"] == 130.0 and rows[0]["steps_share"] == 1.0 and "step_ms" not in rows[1]
    assert set(rows[0]) <= set(sitting_speed.SPEED_COLUMNS)


def test_a_profiler_that_fails_is_recorded_and_the_training_goes_on(toy, tmp_path, monkeypatch):
    """In process: the window's profiler raises as it starts (as one without CUPTI might);
    the training ends normally, timed, and the clock says why it has no profile."""
    from headlab.workflow import sitting_clock

    def broken(self, *args, **kwargs):
        raise RuntimeError("profiler unavailable")
    monkeypatch.setattr(torch.profiler.profile, "__enter__", broken)
    out = tmp_path / "clock.json"
    assert sitting_clock.main(["--out", str(out), "--profile-from", "2", "--",
                               "-config", str(toy("broken", 4, 4))]) == 0
    clock = json.loads(out.read_text())
    assert clock["iterations"] == 4 and "profile" not in clock
    assert clock["profile_error"] == "RuntimeError: profiler unavailable"


def test_the_training_parts_bench_uses_the_same_clock(toy):
    """``make bench``'s train_parts.csv: the loop's parts from the sitting's clock, plus the
    time before and after the loop."""
    result = subprocess.run([sys.executable, "-m", "headlab.bench", "--parts-one", str(toy("bench", 6, 3)),
                             repr(time.time())], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    parts = json.loads(result.stdout.strip().splitlines()[-1])
    assert list(parts) == ["startup", "setup", *steptime.PARTS, "end"]
    assert parts["steps"]["calls"] == 6 and parts["validation"]["calls"] == 2 and parts["startup"]["wall_s"] > 0


def test_the_probe_alone_traces_its_last_steps(toy, tmp_path):
    """The idle-GPU probe (a later call's), run here on the CPU: tokens/s alone from its own
    log (reports every 10 steps, the first left out) and the same profile window as the
    trainings', over its last steps."""
    out = tmp_path / "speed-extra.json"
    result = subprocess.run([sys.executable, "-m", "headlab.workflow.sitting_probe", "--config",
                             str(toy("probe", 4, 4)), "--name", "toy", "--out", str(out), "--steps", "30",
                             "--profile-steps", "2"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(out.read_text())
    assert found["profile"]["toy"]["profile_steps"] == 2 and found["profile"]["toy"]["profile_cpu_ms"] > 0
    assert len(found["alone"]["toy"]) == 2 and all(value > 0 for value in found["alone"]["toy"])
    # its steps 11-28 alone, past the 10 of warm-up and before the 2 traced
    assert found["alone_step_ms"]["toy"] > 0
    refused = subprocess.run([sys.executable, "-m", "headlab.workflow.sitting_probe", "--config", "c", "--name", "toy",
                              "--out", str(out), "--steps", "30", "--profile-steps", "20"], capture_output=True, text=True)
    assert refused.returncode == 2 and "--warmup must leave steps before the profile window: 0 .. 9" in refused.stderr


def refreshed_993e600_rows(tmp_path, logs) -> dict[str, dict]:
    """``sitting --speed-only`` on a copy of the published 993e600 folder (under
    ``tmp_path/A-T1-deep``, made the first time) with a later call's ``logs``: its speed rows
    by model, as written."""
    import csv
    import shutil

    from headlab.workflow import gpu_plan, sitting

    out = tmp_path / "A-T1-deep" / "2026-11-27-h100-993e600"
    if not out.is_dir():
        shutil.copytree(gpu_plan.PUBLISHED / "A-T1-deep" / "2026-11-27-h100-993e600", out)
    manifest = {"slice": {"name": "A-T1-deep", "rows": {"8L": "T1 deep", "7Ftoken+1L": "T1 deep", "8Ftoken": "T5 deep"}},
                "commit": "993e600", "models": [{"name": heads, "heads": heads, "seed": 2}
                                                for heads in ("8L", "7Ftoken+1L", "8Ftoken")]}
    sitting.refresh_speed(manifest, out, logs, {"gpu": "h100", "sitting": "2026-11-27-h100-993e600",
                                                "date": "2026-11-27"})
    with open(out / "throughput.csv", newline="") as handle:
        return {row["model"]: row for row in csv.DictReader(handle)}


def test_a_later_calls_probe_reaches_the_published_speed_rows(tmp_path):
    """``sitting --speed-only`` after the second call's probe, on the published 993e600 folder:
    8L's row gains its tokens/s and step alone (the probe's ``speed-extra.json``) and its
    profile; the models not probed keep blanks; the queue reads the step as one model alone."""
    from headlab.workflow import gpu_measures, gpu_runner

    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "speed-extra.json").write_text(json.dumps({"alone": {"8L": [61000, 65000]}, "alone_step_ms": {"8L": 84.5},
                                                       "profile": {"8L": {"profile_cpu_ms": 700.0}}}))
    (logs / "clock.8L.json").write_text(json.dumps({"iterations": 100, "parts": {
        "steps": {"cpu_s": 10.0, "wall_s": 12.0, "calls": 100}, "validation": {"cpu_s": 0.5, "wall_s": 1.0, "calls": 1}}}))
    rows = refreshed_993e600_rows(tmp_path, logs)
    assert (rows["8L"]["src_tok_s_alone"], rows["8L"]["step_ms_alone"], rows["8L"]["profile_where"]) == (
        "61000", "84.5", "alone")
    assert rows["8Ftoken"]["step_ms_alone"] == rows["8Ftoken"]["src_tok_s_alone"] == ""
    # 8L's clock side by side: 130 ms a step, 1/13 of it validation; alone 84.5 + 10 = 94.5 ms
    assert rows["8L"]["step_ms"] == "130.0"
    assert gpu_measures.measured_speed(tmp_path)[1].step_s == pytest.approx(0.0945, abs=1e-4)
    # then the probe side by side: two copies of 8L under MPS, as the trainings were, at
    # 140 and 150 ms a step over windows sharing 9 of their 10 s; 8L's row gains it, the
    # others keep blanks, and the queue reads (145 + 10) ms as two models side by side
    crowd = logs / gpu_runner.CROWD_FOLDER
    crowd.mkdir()
    for copy, step_ms, window in (("8L.1", 140.0, [100.0, 110.0]), ("8L.2", 150.0, [101.0, 111.0])):
        (crowd / f"{copy}.json").write_text(json.dumps({"name": copy, "side_by_side": 2, "ready": 2,
                                                        "step_ms": step_ms, "window": window}))
    extra = json.loads((logs / "speed-extra.json").read_text())
    (logs / "speed-extra.json").write_text(json.dumps({**extra, "mps": "on", "crowd_mps": "on"}))   # (the first call wrote mps)
    rows = refreshed_993e600_rows(tmp_path, logs)
    assert [rows["8L"][key] for key in ("models_probed_side_by_side", "step_ms_probed_side_by_side", "probed_overlap",
                                        "probed_mps", "mps")] == ["2", "145.0", "0.9", "on", "on"]
    assert rows["8Ftoken"]["step_ms_probed_side_by_side"] == rows["8Ftoken"]["models_probed_side_by_side"] == ""
    assert gpu_measures.measured_speed(tmp_path)[2] == gpu_measures.Measured(
        "A-T1-deep/2026-11-27-h100-993e600", "2026-11-27 19:49:28 UTC", "h100", 2, pytest.approx(0.155, abs=1e-4),
        None, probe=True)
