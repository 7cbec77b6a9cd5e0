"""``make run``'s guard rails (headlab.workflow.runlock): a killed run's lock cleared, a live run's kept,
and the failed jobs of a snakemake log listed."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from headlab.workflow import runlock
from hangguard import hang_guard

#: one rule whose job takes ``config["wait"]`` seconds
SNAKEFILE = """
rule slow:
    output: "out/slow.txt"
    shell: "sleep {config[wait]} && touch {output}"
"""


def _snakemake(folder: Path, wait: int, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "1", "--config", f"wait={wait}"],
                            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


def _wait_for_locks(folder: Path, process: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not runlock.lock_files(folder):
        assert process.poll() is None and time.monotonic() < deadline, process.stdout.read()
        time.sleep(0.2)


def test_a_killed_runs_lock_is_cleared_and_a_live_runs_kept(tmp_path, capsys):
    (tmp_path / "Snakefile").write_text(SNAKEFILE)
    running = _snakemake(tmp_path, 60, start_new_session=True)     # its own group: killed with its job
    try:
        _wait_for_locks(tmp_path, running)
        assert runlock.main(["unlock", "--directory", str(tmp_path)]) == 1
        assert f"(pid {running.pid}:" in capsys.readouterr().err
        assert runlock.lock_files(tmp_path)
    finally:
        os.killpg(running.pid, signal.SIGKILL)
        running.wait()
    assert runlock.lock_files(tmp_path)                 # what a killed run leaves behind
    blocked = _snakemake(tmp_path, 0)
    assert blocked.wait(120) != 0 and "Directory cannot be locked" in blocked.stdout.read()
    assert runlock.main(["unlock", "--directory", str(tmp_path)]) == 0
    assert "removed a stale lock" in capsys.readouterr().out
    assert not runlock.lock_files(tmp_path)
    rerun = _snakemake(tmp_path, 0)
    assert rerun.wait(120) == 0, rerun.stdout.read()
    assert (tmp_path / "out/slow.txt").exists()


def test_no_lock_nothing_to_say(tmp_path, capsys):
    assert runlock.main(["unlock", "--directory", str(tmp_path)]) == 0
    assert capsys.readouterr() == ("", "")


def test_snakemake_command_lines():
    assert runlock.is_snakemake(["/x/.venv/bin/python", "/x/.venv/bin/snakemake", "--cores", "2"])
    assert runlock.is_snakemake(["snakemake", "--profile", "profiles/local"])
    assert runlock.is_snakemake(["python3", "-m", "snakemake", "--target-jobs", "a"])
    assert not runlock.is_snakemake(["grep", "snakemake", "log.txt"])
    assert not runlock.is_snakemake([])


#: snakemake 9's report of two failed jobs (one shell, one run:), and the lines around them
LOG = """\
[Thu Nov 26 02:58:29 2026]
Error in rule figure:
    message: None
    jobid: 3
    output: results/paper_A/F2.png, results/paper_A/F2.pdf
    log: results/logs/paper_A/F2.log (check log file(s) for error details)
Execute 1 jobs...
[Thu Nov 26 02:58:29 2026]
Error in rule train:
    message: None
    jobid: 1
    output: results/work/m/model.pt
    shell:
        echo log: nowhere; exit 3
        (command exited with non-zero exit code)
Exiting because a job execution failed. Look above for error messages
"""


def test_failed_jobs_of_a_snakemake_log(tmp_path, capsys):
    assert runlock.failed_jobs(LOG) == [
        {"rule": "figure", "output": "results/paper_A/F2.png, results/paper_A/F2.pdf",
         "log": "results/logs/paper_A/F2.log"},
        {"rule": "train", "output": "results/work/m/model.pt", "log": ""}]
    logs = tmp_path / ".snakemake" / "log"
    logs.mkdir(parents=True)
    (logs / "2026-11-26T025826.753975.snakemake.log").write_text(LOG)
    assert runlock.main(["failures", "--directory", str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == ["make run: 2 job(s) failed "
                   "(snakemake's log: .snakemake/log/2026-11-26T025826.753975.snakemake.log):",
                   "  rule figure: results/paper_A/F2.png, results/paper_A/F2.pdf  log: results/logs/paper_A/F2.log",
                   "  rule train: results/work/m/model.pt  log: none, see the snakemake log"]
    # a log older than this run is not this run's
    assert runlock.main(["failures", "--directory", str(tmp_path), "--since", str(time.time() + 60)]) == 1
    assert "before writing its log" in capsys.readouterr().err


def _delete_a_finished_jobs_record(workdir: Path) -> Path:
    """What snakemake does to ``.snakemake/incomplete`` when a job of a long output path
    ends: its own ``FilePersistence`` writes the record, then deletes it."""
    from snakemake.persistence.file import FilePersistence

    persistence = FilePersistence.__new__(FilePersistence)       # only the record methods are used
    persistence._max_len, persistence._incomplete_cache = None, None
    folder = workdir / ".snakemake" / "incomplete"
    folder.mkdir(parents=True, exist_ok=True)
    output = "results/models/multi30k/en-de/full/base/default/6+6/" + "8L," * 80 + "8L/seed1/model.pt"
    persistence._io_write(str(folder), {"external_jobid": None}, output)
    persistence._io_delete(str(folder), output)
    return folder


def test_the_incomplete_folder_outlives_the_last_record_of_a_finished_job(tmp_path):
    """Snakemake removes the record with ``os.removedirs``, which took ``incomplete`` along:
    another snakemake in the same folder then failed building its DAG (``FileNotFoundError``
    of ``.snakemake/incomplete``: seen in make test, two workers' runs in the checkout)."""
    assert not _delete_a_finished_jobs_record(tmp_path / "upstream").exists()
    runlock.keep_incomplete_folder(tmp_path / "kept")
    assert _delete_a_finished_jobs_record(tmp_path / "kept").is_dir()


def test_the_workflow_keeps_the_incomplete_folder_of_its_working_directory(tmp_path):
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(root / "Snakefile"), "--directory",
                          str(tmp_path), "--list-rules", "--configfile", str(root / "tests/configs/smoke.yaml")],
                         capture_output=True, text=True, timeout=hang_guard(300))
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / ".snakemake/incomplete" / runlock.KEEP_INCOMPLETE).is_file()


def _bare_persistence(workdir: Path):
    from snakemake.persistence.file import FilePersistence

    persistence = FilePersistence.__new__(FilePersistence)       # only the lock methods are used
    persistence._lockdir, persistence._lockfile = str(workdir / ".snakemake/locks"), {}
    return persistence


def test_a_run_that_ends_removes_its_own_locks_and_no_others(tmp_path):
    """Upstream removed the whole locks folder at the end of a run: another run's locks
    went with it, and its next lock file had no folder (``FileNotFoundError``)."""
    runlock.locks_of_this_run_only()
    first, second, third = (_bare_persistence(tmp_path) for _ in range(3))
    first._write_locks("output", ["results/a.txt"])
    second._write_locks("output", ["results/b.txt"])
    second._delete_locks()
    assert [path.name for path in runlock.lock_files(tmp_path)] == ["0.output.lock"]
    assert (tmp_path / ".snakemake/locks/0.output.lock").read_text() == "results/a.txt\n"
    shutil.rmtree(tmp_path / ".snakemake/locks")                  # removed by a snakemake outside headlab
    third._write_locks("input", ["data/x.txt"])
    assert [path.name for path in runlock.lock_files(tmp_path)] == ["0.input.lock"]
    first._delete_locks()
    third._delete_locks()
    assert not (tmp_path / ".snakemake/locks").exists()
    first._write_locks("input", ["data/x.txt"])
    _bare_persistence(tmp_path).cleanup_locks()                   # snakemake --unlock: every run's
    assert not (tmp_path / ".snakemake/locks").exists()
