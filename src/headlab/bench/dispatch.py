"""What a GPU would pay for, counted on any machine: dispatched aten ops and host syncs.

On a GPU every dispatched aten op is (at most) one kernel launch, and a few ops wait for
the device (a host sync): reading a value back (``aten._local_scalar_dense``: ``.item()``,
``bool(t)``, ``float(t)``), ``nonzero`` (its output size), ``equal``. Small kernels are
launch-bound on an H100 (~5-10 µs each, whatever they compute), and a sync empties the
queue, so for the layers of a Transformer these two counts predict most of the time a GPU
loses. :class:`DispatchCount` counts them with a ``TorchDispatchMode`` (below autograd,
so the backward's ops count too; views count as ops: cheap on a GPU but each is a Python
dispatch), on the CPU as on CUDA.

``python -m headlab.bench --what dispatch`` writes ``dispatch.csv``: one row per head spec
and path, one encoder self-attention layer's forward + backward (d = 512, 8 heads, the
attention bench's inputs: :func:`headlab.bench.attention.make_step`), with and without
attention dropout, at n = 64 and 512 and batch 2 and 16; per-batch constants (pattern
matrices, parse relations) are built by a first step on the same batch and not counted,
as every layer after the first shares them.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

from torch.utils._python_dispatch import TorchDispatchMode

#: aten ops that make the host wait for the device
SYNC_OPS = frozenset({"aten._local_scalar_dense.default", "aten.nonzero.default", "aten.equal.default",
                      "aten.masked_select.default"})
COLUMNS = ["spec", "path", "n", "batch", "dropout", "ops", "syncs", "ratio_ops"]


class DispatchCount(TorchDispatchMode):
    """``with DispatchCount() as count: ...``: ``count.ops`` aten ops, ``count.syncs`` host
    syncs, ``count.by_op`` {op name: count}."""

    def __init__(self):
        super().__init__()
        self.ops, self.syncs, self.by_op = 0, 0, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        self.ops += 1
        self.syncs += name in SYNC_OPS
        self.by_op[name] = self.by_op.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


def count(step) -> DispatchCount:
    """The ops and syncs of one call of ``step()``."""
    with DispatchCount() as counted:
        step()
    return counted


def layer_count(spec: str, n: int, batch: int, dropout: float = 0.0, path: str = "fused",
                d: int = 512, heads: int = 8) -> DispatchCount:
    """One encoder self-attention layer's forward + backward on ``path`` (the attention
    bench's layer and inputs), counted on its second step: the first builds the batch's
    constants, which every later layer shares."""
    from headlab.bench.attention import make_step
    from headlab.heads.executor import PATH_VARIABLE

    before = os.environ.get(PATH_VARIABLE)
    os.environ[PATH_VARIABLE] = path
    try:
        _, step = make_step("headlab", spec, n, batch, "cpu", d=d, heads=heads, attention_dropout=dropout)
        step()
        return count(step)
    finally:
        if before is None:
            os.environ.pop(PATH_VARIABLE, None)
        else:
            os.environ[PATH_VARIABLE] = before


def bench_dispatch(out: str, specs: list[str] | None = None, sizes=((64, 2), (512, 16)),
                   paths=("fused", "blocked")) -> Path:
    """``dispatch.csv`` for every spec of the attention bench (see the module doc)."""
    from headlab.bench.attention import CONFIGS

    specs = specs or [spec for impl, spec in CONFIGS if impl == "headlab"]
    rows = []
    for dropout in (0.0, 0.1):
        for n, batch in sizes:
            for path in paths:
                base = layer_count("8L", n, batch, dropout, path).ops
                for spec in specs:
                    counted = layer_count(spec, n, batch, dropout, path)
                    rows.append(dict(spec=spec, path=path, n=n, batch=batch, dropout=dropout, ops=counted.ops,
                                     syncs=counted.syncs, ratio_ops=round(counted.ops / base, 2)))
    target = Path(out) / "dispatch.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return target


__all__ = ["COLUMNS", "DispatchCount", "SYNC_OPS", "bench_dispatch", "count", "layer_count"]
