"""Where a training's time goes, measured inside ``headlab train`` while it trains.

A GPU sitting's models train side by side at ~0.13 s a step while the GPU does ~1.8% of its
matrix rate: the step is bound by something other than the GPU's arithmetic, and only the
training process itself can say what. :class:`StepClock` wraps OpenNMT-py's own loop
functions (class attributes, put back by :meth:`StepClock.undo`) and splits every loop
iteration (one optimizer step) into

=================  ===========================================================================
``data``           waiting for the next batch (OpenNMT-py's data pipeline: ``_accum_batches``)
``steps``          forward, loss, backward and optimizer step (``_gradient_accumulation``), as
                   the host sees it: on a GPU, kernel launches plus every wait for the device
``validation``     ``Trainer.validate``
``checkpoints``    ``ModelSaverBase.save``
``loop_other``     the rest of the iteration (reports, learning rate, dropout updates)
=================  ===========================================================================

each in wall seconds (``perf_counter``) and process CPU seconds (``process_time``: every
thread of the process; on a GPU, CPU well under wall in ``steps`` means the host waits for
the device, CPU near wall means the host's launching is the limit).

:class:`ProfileWindow`: ``torch.profiler`` over whole iterations ``first .. first+steps-1``
(data, step, report: no validation or checkpoint unless one falls inside), CPU and, where
there is one, CUDA activity; :func:`profile_summary` turns it into a few numbers (top
kernels by device time, top host-side ops by self CPU time, kernel launches and host
synchronisations with their CPU time) and two tables for a human.

Before the loop, the start-up (``start`` in the JSON, seconds from the command's start (its Python up)):
``imports_s`` (torch, OpenNMT-py, headlab's patches), ``loop_s`` (options, vocabulary, model
and optimizer built: the loop asks for its first batch), ``first_batch_s`` (the first batch
there: OpenNMT-py fills its first bucket of ``bucket_size`` examples first).

``marks``: every ``mark_every`` iterations, the iteration and the Unix time its batch came
in, so that what else ran on the machine meanwhile (a sitting's CUDA suite and bench beside
its trainings, timed by the runner in the same clock) can be told from the steps it slowed.

The clock's JSON (:meth:`StepClock.flush`) is rewritten atomically at most every
:data:`FLUSH_S` seconds and when the profile window closes: a training stopped by a signal
(a sitting's deadline) leaves what it had measured. Nothing here changes what is trained.
"""
from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Callable

PARTS = ("data", "steps", "validation", "checkpoints", "loop_other")
#: parts measured by wrapping a function (``loop_other`` is what is left of an iteration)
_INNER = PARTS[:-1]
FLUSH_S = 5.0
TOP = 5
#: host-side CUDA runtime / driver calls (profiler keys) that launch a kernel
LAUNCH_KEYS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")
#: host-side calls that wait for the device
SYNC_KEYS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def _device_time(event) -> float:
    return getattr(event, "self_device_time_total", getattr(event, "self_cuda_time_total", 0.0)) or 0.0


def profile_summary(profiler, steps: int | None = None, wall_ms: float | None = None) -> dict:
    """A trace in a few numbers (ms): top kernels by device time, the trace's CPU and device
    totals, top host-side ops by self CPU time with their counts, kernel launches and host
    syncs (count and CPU time; blank without CUDA), and the window's steps and wall time."""
    events = list(profiler.key_averages())
    kernels = sorted(events, key=_device_time, reverse=True)[:TOP]
    host = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:TOP]
    launches = [e for e in events if e.key in LAUNCH_KEYS]
    syncs = [e for e in events if e.key in SYNC_KEYS]
    cuda = any(_device_time(e) for e in events)
    return {"profile_top_kernels": "; ".join(f"{e.key[:60]} {_device_time(e) / 1000:.1f} ms" for e in kernels)
            if cuda else "",
            "profile_cpu_ms": round(sum(e.self_cpu_time_total for e in events) / 1000, 1),
            "profile_cuda_ms": round(sum(_device_time(e) for e in events) / 1000, 1) if cuda else "",
            "profile_top_cpu_ops": "; ".join(f"{e.key[:60]} x{e.count} {e.self_cpu_time_total / 1000:.1f} ms"
                                             for e in host),
            "profile_launches": sum(e.count for e in launches) if cuda else "",
            "profile_launch_ms": round(sum(e.self_cpu_time_total for e in launches) / 1000, 1) if cuda else "",
            "profile_syncs": sum(e.count for e in syncs) if cuda else "",
            "profile_sync_ms": round(sum(e.self_cpu_time_total for e in syncs) / 1000, 1) if cuda else "",
            "profile_steps": "" if steps is None else steps,
            "profile_wall_ms": "" if wall_ms is None else round(wall_ms, 1)}


def profile_tables(profiler, rows: int = 25) -> str:
    """The trace's own tables: by self CPU time, and (with CUDA) by device time."""
    averages = profiler.key_averages()
    text = "by self CPU time\n" + averages.table(sort_by="self_cpu_time_total", row_limit=rows)
    if any(_device_time(e) for e in averages):
        sort = "self_device_time_total" if hasattr(next(iter(averages)), "self_device_time_total") \
            else "self_cuda_time_total"
        text += "\nby self device time\n" + averages.table(sort_by=sort, row_limit=rows)
    return text


class ProfileWindow:
    """``torch.profiler`` over iterations ``first`` .. ``first + steps - 1`` (1-based, this
    process's own count: a resumed training counts from its resume).

    ``lead``: the ``lead`` iterations just before the window are timed too, the device
    synchronised at both ends (the host runs ahead of it between: the training step waits
    for nothing), into :attr:`lead_step_ms`: the steady speed a step has, past the warm-up,
    which the profiler's own cost would distort inside the window; :attr:`lead_window`: the
    Unix times it began and ended, so that the leads of several processes can be seen to
    overlap. ``steps`` 0 with a lead: the lead timed, nothing traced. ``before_lead``: called
    as the lead is about to begin (a probe's barrier: every process of a crowd starts its
    lead at once)."""

    def __init__(self, first: int, steps: int, lead: int = 0, before_lead: Callable[[], object] | None = None):
        if first < 1 or steps < 0 or not (steps or lead):
            raise ValueError(f"a profile window needs first >= 1 and steps >= 1 (0 with a lead: timed, not "
                             f"traced), not {first}, {steps}")
        if not 0 <= lead < first:
            raise ValueError(f"a profile window's lead must be 0 .. {first - 1} (iterations before it), not {lead}")
        self.first, self.steps, self.lead = first, steps, lead
        self.before_lead = before_lead
        self.summary: dict = {}
        self.tables = ""
        #: wall ms a step over the ``lead`` iterations before the window (None: not timed)
        self.lead_step_ms: float | None = None
        #: (Unix time the lead began, Unix time it ended), None: not timed
        self.lead_window: tuple[float, float] | None = None
        self._profiler = None
        self._began = 0.0
        self._lead_began = 0.0
        self._lead_began_unix = 0.0

    @staticmethod
    def _synchronize() -> None:
        import torch
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()

    def at_iteration(self, number: int) -> bool:
        """Called as iteration ``number`` begins; True when the window has just closed."""
        import torch

        if self.lead and number == self.first - self.lead:
            if self.before_lead is not None:
                self.before_lead()
            self._synchronize()
            self._lead_began, self._lead_began_unix = time.perf_counter(), time.time()
        if number == self.first:
            self._synchronize()                 # the steps before are not the window's
            if self.lead:
                self.lead_step_ms = round((time.perf_counter() - self._lead_began) * 1000 / self.lead, 2)
                self.lead_window = (round(self._lead_began_unix, 3), round(time.time(), 3))
            if not self.steps:
                return True                     # timed, not traced: closed
            activities = [torch.profiler.ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self._profiler = torch.profiler.profile(activities=activities)
            self._profiler.__enter__()
            self._began = time.perf_counter()
        elif number == self.first + self.steps and self._profiler is not None:
            self._synchronize()                 # the window's kernels have run
            wall_ms = (time.perf_counter() - self._began) * 1000
            self._profiler.__exit__(None, None, None)
            self.summary = profile_summary(self._profiler, self.steps, wall_ms)
            self.tables = profile_tables(self._profiler)
            self._profiler = None
            return True
        return False


class StepClock:
    """Wall and CPU seconds per part of OpenNMT-py's training loop (see the module doc),
    installed on the trainer's classes by :meth:`install`; ``out``: the JSON it flushes."""

    def __init__(self, out: str | Path | None = None, profile: ProfileWindow | None = None, name: str = "",
                 began: float | None = None, mark_every: int = 0):
        """``began``: ``perf_counter()`` when the process began its work (before its imports),
        for the start-up's split; default: now. ``mark_every``: the iterations between two
        marks (0: none)."""
        self.out = Path(out) if out else None
        self.began = time.perf_counter() if began is None else began
        #: seconds from ``began``: imports done (the clock installed), the loop's first batch asked for and got
        self.start: dict[str, float] = {}
        self.profile = profile
        self.name = name
        self.cpu = dict.fromkeys(PARTS, 0.0)
        self.wall = dict.fromkeys(PARTS, 0.0)
        self.calls = dict.fromkeys(PARTS, 0)
        self.iterations = 0
        self.mark_every = mark_every
        #: [iteration, Unix time its batch came in], every ``mark_every`` iterations
        self.marks: list[list[float]] = []
        self.profile_error = ""
        self._undo: list[tuple[object, str, object]] = []
        self._flushed = 0.0

    def add(self, part: str, cpu: float, wall: float) -> None:
        self.cpu[part] += cpu
        self.wall[part] += wall
        self.calls[part] += 1

    def _wrap(self, owner, name: str, part: str) -> None:
        original = owner.__dict__[name]

        @functools.wraps(original)
        def timed(*args, **kwargs):
            cpu, wall = time.process_time(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.add(part, time.process_time() - cpu, time.perf_counter() - wall)

        self._set(owner, name, timed)

    def _set(self, owner, name: str, value) -> None:
        self._undo.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def install(self) -> "StepClock":
        """Wrap the loop's functions (after headlab's patches: the clock times what runs)."""
        import onmt.models.model_saver as saver
        import onmt.trainer

        self.start["imports_s"] = round(time.perf_counter() - self.began, 3)

        trainer = onmt.trainer.Trainer
        self._wrap(trainer, "_gradient_accumulation", "steps")
        self._wrap(trainer, "validate", "validation")
        self._wrap(saver.ModelSaverBase, "save", "checkpoints")
        self._set(trainer, "_accum_batches", self._batches(trainer.__dict__["_accum_batches"]))
        return self

    def undo(self) -> None:
        while self._undo:
            owner, name, original = self._undo.pop()
            setattr(owner, name, original)

    def _batches(self, accumulate):
        clock = self

        @functools.wraps(accumulate)
        def timed_batches(trainer, iterator):
            batches = accumulate(trainer, iterator)
            began = None            # (cpu, wall, inner parts' totals) as the last iteration began
            while True:
                if began is not None:
                    clock._close(began, time.process_time(), time.perf_counter())
                # the profiler's own start and summary belong to no iteration
                closed = clock._profile_at(clock.iterations + 1)
                fetch_cpu, fetch_wall = time.process_time(), time.perf_counter()
                began = (fetch_cpu, fetch_wall, [(clock.cpu[p], clock.wall[p]) for p in _INNER])
                if not clock.iterations and "loop_s" not in clock.start:
                    clock.start["loop_s"] = round(fetch_wall - clock.began, 3)
                try:
                    item = next(batches)
                except StopIteration:
                    clock.flush(force=True)
                    return
                finally:
                    clock.add("data", time.process_time() - fetch_cpu, time.perf_counter() - fetch_wall)
                if not clock.iterations:
                    clock.start["first_batch_s"] = round(time.perf_counter() - clock.began, 3)
                clock.iterations += 1
                if clock.mark_every and not clock.iterations % clock.mark_every:
                    clock.marks.append([clock.iterations, round(time.time(), 3)])
                clock.flush(force=closed)
                yield item

        return timed_batches

    def _profile_at(self, number: int) -> bool:
        """The window's turn as iteration ``number`` begins; a profiler that fails (no CUPTI,
        a profiler already running) is recorded and dropped, never the training's end."""
        if self.profile is None:
            return False
        try:
            return self.profile.at_iteration(number)
        except Exception as err:            # a measurement is never worth the training
            self.profile_error = f"{type(err).__name__}: {err}"[:300]
            self.profile = None
            return True

    def _close(self, began, cpu: float, wall: float) -> None:
        """The iteration that began at ``began`` ends now: what its parts did not take."""
        began_cpu, began_wall, inner = began
        other_cpu = cpu - began_cpu - sum(self.cpu[p] - c for p, (c, _) in zip(_INNER, inner))
        other_wall = wall - began_wall - sum(self.wall[p] - w for p, (_, w) in zip(_INNER, inner))
        self.add("loop_other", max(other_cpu, 0.0), max(other_wall, 0.0))

    def summary(self) -> dict:
        parts = {p: {"cpu_s": round(self.cpu[p], 4), "wall_s": round(self.wall[p], 4), "calls": self.calls[p]}
                 for p in PARTS}
        found = {"name": self.name, "iterations": self.iterations, "start": dict(self.start), "parts": parts}
        if self.marks:
            found["marks"] = [list(mark) for mark in self.marks]
        if self.profile is not None and self.profile.summary:
            found.update(profile=self.profile.summary, profile_tables=self.profile.tables)
        if self.profile_error:
            found["profile_error"] = self.profile_error
        return found

    def flush(self, force: bool = False) -> None:
        """The JSON, rewritten whole (atomically), at most every :data:`FLUSH_S` seconds."""
        if self.out is None or (not force and time.monotonic() - self._flushed < FLUSH_S):
            return
        from headlab.io import atomic_write

        with atomic_write(self.out) as handle:
            json.dump(self.summary(), handle, indent=1)
        self._flushed = time.monotonic()


def step_shares(clock: dict) -> dict:
    """A clock JSON's loop as a speed row's columns: wall ms per iteration, each part's
    share of the loop's wall time, and the process's CPU seconds per wall second."""
    parts, iterations = clock.get("parts") or {}, clock.get("iterations") or 0
    wall = sum(part["wall_s"] for part in parts.values())
    if not iterations or not wall:
        return {}
    row = {"step_ms": round(1000 * wall / iterations, 1),
           "cpu_per_wall": round(sum(part["cpu_s"] for part in parts.values()) / wall, 2)}
    row.update({f"{part}_share": round(parts[part]["wall_s"] / wall, 3) for part in PARTS if part in parts})
    start = clock.get("start") or {}
    row.update({f"start_{key}": start[key] for key in ("imports_s", "loop_s", "first_batch_s") if key in start})
    return row


__all__ = ["PARTS", "ProfileWindow", "StepClock", "profile_summary", "profile_tables", "step_shares"]
