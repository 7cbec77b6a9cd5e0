"""The CPU each test costs, beside pytest's wall-clock ``--durations``.

On a machine of two cores shared by three workers a test's wall time says how long it
waited, not what it cost: the suite lasts about its CPU over the cores, so what to cut is
read here. A test's CPU is that of its worker process and of every process the worker
waited for, with their own waited-for children (a workflow run: snakemake and each of its
jobs), over setup, call and teardown; daemons it started and left running (SLURM's) are
not counted. ``--cpu-durations=N`` lists the N costliest at the end (0: none).
"""
from __future__ import annotations

import resource

import pytest

#: the user property each phase's report carries to the controller (pytest-xdist sends it)
PROPERTY = "cpu_s"


def cpu_seconds() -> float:
    """User and system CPU of this process and of its waited-for descendants, in seconds."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_addoption(parser):
    parser.addoption("--cpu-durations", type=int, default=0, metavar="N",
                     help="list the N tests that cost the most CPU (with their waited-for subprocesses)")


def _measured(item):
    """Run one phase's hook and put its CPU on the item: the phase's report copies it."""
    start = cpu_seconds()
    yield
    item.user_properties.append((PROPERTY, cpu_seconds() - start))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield from _measured(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    yield from _measured(item)


class CpuReport:
    """Collects the phases' CPU where the reports arrive (the controller under xdist)."""

    def __init__(self, count: int):
        self.count = count
        self.seconds: dict[tuple[str, str], float] = {}

    def pytest_runtest_logreport(self, report):
        # a report carries every property the item had when it was made: its phase's is the last
        spent = [value for name, value in report.user_properties if name == PROPERTY]
        if spent:
            self.seconds[(report.nodeid, report.when)] = spent[-1]

    def pytest_terminal_summary(self, terminalreporter):
        total = sum(self.seconds.values())
        terminalreporter.write_sep("=", f"slowest {self.count} by CPU (core-s, with subprocesses)")
        for (nodeid, when), seconds in sorted(self.seconds.items(), key=lambda kv: -kv[1])[:self.count]:
            terminalreporter.write_line(f"{seconds:9.1f} {when:8s} {nodeid}")
        terminalreporter.write_line(f"{total:9.1f} in all, {len(self.seconds)} phases")


def pytest_configure(config):
    count = config.getoption("--cpu-durations")
    if count > 0 and not hasattr(config, "workerinput"):
        config.pluginmanager.register(CpuReport(count), "headlab-cpu-report")
