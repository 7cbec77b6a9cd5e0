"""One training per model folder, and none outliving the run that started it.

``headlab train`` holds an exclusive ``flock`` on ``MODEL_DIR/.train.lock`` for its whole
life (:func:`hold_model_folder`), taken before it writes anything in the folder. The kernel
releases a flock when its holder ends, SIGKILL included, so no stale lock is ever left, and
a second training of the folder fails at once with one line naming the holder's pid:
without it, a run started beside a killed run's orphaned training interleaved checkpoints
and learning-curve rows in one folder.

Started by snakemake, a training also stops by itself when that snakemake is gone
(:func:`stop_with_snakemake`): its shell job keeps it alive otherwise (the job's bash, not
snakemake, is its parent, so a parent-death signal would not fire). ``make run``'s guard
rail names a training that still outlived its run (:func:`headlab.workflow.runlock.unlock`).
"""
from __future__ import annotations

import fcntl
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import IO, Callable, Iterator

from headlab.errors import HeadlabError

#: the lock file in a model folder
TRAIN_LOCK = ".train.lock"


def is_snakemake(cmdline: list[str]) -> bool:
    """The command line of snakemake or one of its job processes: ``snakemake ...``,
    ``python .../bin/snakemake ...`` (the entry point run by its #! line) or
    ``python -m snakemake ...``; not a command that only names it (``grep snakemake``)."""
    names = [Path(arg).name for arg in cmdline[:2]]
    if names[:1] == ["snakemake"]:
        return True
    by_python = bool(names) and names[0].startswith("python")
    return by_python and (names[1:] == ["snakemake"] or cmdline[1:3] == ["-m", "snakemake"])


def hold_model_folder(folder: Path) -> IO:
    """The exclusive lock on a model folder, held while the returned file is open (closing
    it, or the end of the process, releases it). Held by another training: one
    HeadlabError naming the folder and that training's pid."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / TRAIN_LOCK, "a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        recorded = handle.read().split()              # pid and host of the holder, written below
        handle.close()
        holders = [pid for pid, path in lock_openers() if path == (folder / TRAIN_LOCK).resolve()]
        pid = holders[0] if holders else (recorded[0] if recorded else "unknown")
        raise HeadlabError(f"a training (pid {pid}) is already running in this model folder: wait for it to end, "
                           f"or stop it with kill {pid}", path=str(folder)) from None
    except OSError:             # a file system without locks: the training goes on unguarded
        return handle
    handle.truncate(0)
    handle.write(f"{os.getpid()} {socket.gethostname()}\n")    # for a holder on another host (NFS)
    handle.flush()
    return handle


def lock_openers() -> Iterator[tuple[int, Path]]:
    """(pid, lock file) of every other process (of those this user may see) with a model
    folder's lock open: a training opens it only to hold it. None without /proc (not Linux)."""
    for name in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            descriptors = os.listdir(f"/proc/{name}/fd")
        except OSError:                                  # gone meanwhile, or another user's
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(f"/proc/{name}/fd/{descriptor}")
            except OSError:
                continue
            if target.endswith("/" + TRAIN_LOCK):
                yield int(name), Path(target)


def stop_with_snakemake(say: Callable[[str], None], interval: float = 1.0) -> None:
    """Started by snakemake (a snakemake among this process's ancestors; its shell job sits
    between), stop when that snakemake is gone: a killed run would otherwise leave this
    training working on, and the next run would start another on the same folder. The
    process ends with SIGTERM after ``say`` has told why; its newest whole checkpoint is
    where the next run resumes. Linux (/proc); elsewhere, and outside snakemake, nothing."""
    ancestor = _snakemake_ancestor()
    if ancestor is None:
        return
    pid, started = ancestor

    def watch() -> None:
        while _alive(pid, started):
            time.sleep(interval)
        say(f"the snakemake that started this training (pid {pid}) is gone: stopping; the next run "
            f"resumes from the newest checkpoint")
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="headlab-snakemake-watch", daemon=True).start()


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time) of a process from /proc; None when there is none."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()        # after "pid (command) "
    return fields[0], int(fields[1]), int(fields[19])


def _alive(pid: int, started: int) -> bool:
    """The same process (not a new one with a reused pid), not a zombie waiting to be reaped."""
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in "ZX" and stat[2] == started


def _snakemake_ancestor() -> tuple[int, int] | None:
    """(pid, start time) of the nearest snakemake among this process's ancestors."""
    pid = os.getppid()
    while pid > 1:
        stat = _proc_stat(pid)
        if stat is None:
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
        except OSError:
            return None
        if is_snakemake(cmdline):
            return pid, stat[2]
        pid = stat[1]
    return None
