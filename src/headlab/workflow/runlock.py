"""``make run``'s guard rails around snakemake: a stale lock cleared before, the failed jobs listed after.

    python -m headlab.workflow.runlock unlock [--directory DIR]
    python -m headlab.workflow.runlock failures [--directory DIR] [--since EPOCH]

``unlock``: snakemake writes ``.snakemake/locks/*.lock`` while it runs and removes them at
the end; a killed run leaves them, and the next run stops until ``snakemake --unlock``.
When no live snakemake works in DIR, the locks are removed as ``--unlock`` removes them
(the whole ``locks`` folder) and one line says so; when one does, one line says which
and the exit status is 1, so that ``make run`` does not start a second run beside it.
A training that outlived a killed snakemake (``headlab train`` holding the lock of a model
folder under DIR, or working in DIR) stops it the same way, naming its pid: a second run
would start a second training on its folder (:mod:`headlab.engine.train_lock` holds that
lock, and stops a training whose snakemake is gone).

``failures``: after a failed run, each failed job of the newest snakemake log (written
at or after EPOCH): its rule, outputs and log files, and where the snakemake log is.
Exits 1: it is only called when snakemake failed.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

from headlab.engine import train_lock
from headlab.engine.train_lock import is_snakemake  # noqa: F401  (runlock.is_snakemake, as before it moved)

#: snakemake's report of a failed job: ``Error in rule NAME:`` then indented ``key: value`` lines
ERROR_BLOCK = re.compile(r"^Error in rule (?P<rule>\S+):\n(?P<body>(?:[ \t]+.*\n?)*)", re.MULTILINE)
LOG_HINT = " (check log file(s) for error details)"


#: a file in ``.snakemake/incomplete`` that no record can be named (records are urlsafe
#: base64, which has no ".")
KEEP_INCOMPLETE = ".keep"


def keep_incomplete_folder(directory: Path) -> Path:
    """``DIR/.snakemake/incomplete`` made to outlive its last record. Snakemake (9.27,
    ``FilePersistence._io_delete``) removes a finished job's record, of a long output path a
    file in subfolders, with ``os.removedirs``, which goes on removing every parent left
    empty, ``incomplete`` itself included. Another snakemake working in the same folder (a
    second run with other targets; the test suite's workers) that found it at its start
    then fails while building its DAG (``FileNotFoundError`` from ``os.pathconf`` of that
    folder, its outputs named nowhere), and a later run that finds ``metadata`` without it
    migrates every record as if from an older snakemake's layout. A file in it keeps it."""
    folder = Path(directory) / ".snakemake" / "incomplete"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / KEEP_INCOMPLETE).touch()
    return folder


def locks_of_this_run_only() -> None:
    """Snakemake's (9.27) locks as several runs in one folder need them. Upstream
    (``FilePersistence``) writes a run's lock files as ``locks/<first free n>.input.lock``
    (tested, then opened: two runs starting together can write the same file) and, at
    the end of a run, removes the whole ``locks`` folder: the locks of every other run
    still working there, whose next lock file then has no folder to go to (a run still
    building its DAG fails with ``FileNotFoundError``). Here a run creates its lock files
    exclusively, in a folder made if missing, and removes its own, then the folder only if
    empty. ``snakemake --unlock`` and ``runlock unlock`` still clear them all. Applied in
    the workflow's own process (``rules/common.smk``); once per process."""
    from snakemake.persistence.file import FilePersistence

    if getattr(FilePersistence, "headlab_own_locks", False):
        return

    def write_locks(self, lock_type: str, keys) -> None:
        keys = list(keys)
        if not keys:
            return
        os.makedirs(self._lockdir, exist_ok=True)
        number = 0
        while True:
            lockfile = os.path.join(self._lockdir, f"{number}.{lock_type}.lock")
            try:
                with open(lockfile, "x") as lock:
                    print(*keys, sep="\n", file=lock)
            except FileExistsError:
                number += 1
                continue
            self._lockfile[lock_type] = lockfile
            return

    def delete_locks(self) -> None:
        for lockfile in self._lockfile.values():
            try:
                os.remove(lockfile)
            except FileNotFoundError:
                pass
        self._lockfile.clear()
        try:
            os.rmdir(self._lockdir)
        except OSError:                 # another run's locks, or already gone
            pass

    def clear_all_locks(self) -> None:          # snakemake --unlock: every run's, as upstream
        self._lockfile.clear()
        shutil.rmtree(self._lockdir, ignore_errors=True)

    FilePersistence._write_locks, FilePersistence._delete_locks = write_locks, delete_locks
    FilePersistence.cleanup_locks = clear_all_locks
    FilePersistence.headlab_own_locks = True


def share_the_folder(directory: Path) -> None:
    """What several snakemake runs in ``directory`` need (two runs with other targets, the
    test suite's workers): :func:`keep_incomplete_folder`, :func:`locks_of_this_run_only`."""
    keep_incomplete_folder(directory)
    locks_of_this_run_only()


def lock_files(directory: Path) -> list[Path]:
    return sorted((directory / ".snakemake" / "locks").glob("*.lock"))


def live_snakemake(directory: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every snakemake process whose working directory is ``directory``
    (snakemake changes into its working directory, so ``--directory`` runs count too)."""
    import psutil                                   # a dependency of snakemake itself

    here = directory.resolve()
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if not is_snakemake(cmdline):
            continue
        try:
            if Path(process.cwd()).resolve() == here:
                found.append((process.info["pid"], " ".join(cmdline)))
        except (psutil.Error, OSError):          # gone meanwhile, or another user's
            continue
    return found


def unlock(directory: Path) -> int:
    locks = lock_files(directory)
    if not locks:
        return 0
    running = live_snakemake(directory)
    if running:
        pid, cmdline = running[0]
        print(f"runlock: snakemake (pid {pid}: {cmdline[:120]}) is running in {directory}; "
              f"not starting a second run", file=sys.stderr)
        return 1
    # a killed snakemake's trainings stop by themselves within a second or so
    # (headlab.engine.train_lock.stop_with_snakemake); one still running would meet the
    # next run's training of its model
    trainings = live_trainings(directory)
    if trainings:
        pids = " ".join(str(pid) for pid, _ in trainings)
        where = ", ".join(f"pid {pid} in {folder}" for pid, folder in trainings)
        what, it = (f"{len(trainings)} trainings", "them") if len(trainings) > 1 else ("a training", "it")
        print(f"runlock: {what} outlived the run that started {it}: {where}; wait for {it} to end, or stop {it} "
              f"with kill {pids}, then run again", file=sys.stderr)
        return 1
    shutil.rmtree(directory / ".snakemake" / "locks")
    print(f"runlock: removed a stale lock ({len(locks)} file(s) in .snakemake/locks/, left by a run "
          f"that was killed; no snakemake is running in {directory})")
    return 0


def live_trainings(directory: Path) -> list[tuple[int, Path]]:
    """(pid, model folder) of each live process holding a model folder's lock that is under
    ``directory``, or working in it (a results folder elsewhere)."""
    here = directory.resolve()
    found = {}
    for pid, path in train_lock.lock_openers():
        try:
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except OSError:
            cwd = None
        if here in path.parents or cwd == here:
            found.setdefault(pid, path.parent)
    return sorted(found.items())


# -- after a failed run --------------------------------------------------------------------

def failed_jobs(log_text: str) -> list[dict]:
    """Each ``Error in rule`` block of a snakemake log: rule, output, log (as snakemake wrote them)."""
    jobs = []
    for block in ERROR_BLOCK.finditer(log_text):
        fields = {}
        for line in block["body"].splitlines():          # the first of a key: a shell command may hold "log: "
            key, _, value = line.strip().partition(": ")
            fields.setdefault(key, value)
        jobs.append({"rule": block["rule"], "output": fields.get("output", ""),
                     "log": fields.get("log", "").replace(LOG_HINT, "")})
    return jobs


def newest_log(directory: Path, since: float) -> Path | None:
    logs = [p for p in (directory / ".snakemake" / "log").glob("*.snakemake.log") if p.stat().st_mtime >= since]
    return max(logs, key=lambda p: p.stat().st_mtime, default=None)


def failures(directory: Path, since: float) -> int:
    log = newest_log(directory, since)
    if log is None:
        print("make run: snakemake failed before writing its log; its message is above", file=sys.stderr)
        return 1
    where = os.path.relpath(log, directory)
    jobs = failed_jobs(log.read_text(encoding="utf-8", errors="replace"))
    if not jobs:
        print(f"make run: snakemake failed, no failed job named; its log: {where}", file=sys.stderr)
        return 1
    lines = [f"make run: {len(jobs)} job(s) failed (snakemake's log: {where}):"]
    lines += [f"  rule {j['rule']}: {j['output'] or '(no output)'}  log: {j['log'] or 'none, see the snakemake log'}"
              for j in jobs]
    print("\n".join(lines), file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m headlab.workflow.runlock", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["unlock", "failures"], help="unlock: clear a dead run's lock; failures: list the failed jobs since --since")
    parser.add_argument("--directory", type=Path, default=Path.cwd(), help="snakemake's working directory")
    parser.add_argument("--since", type=float, default=0.0, help="failures: only a log written at or after "
                                                                  "this time (seconds since the epoch)")
    args = parser.parse_args(argv)
    if args.action == "unlock":
        return unlock(args.directory)
    return failures(args.directory, args.since)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
