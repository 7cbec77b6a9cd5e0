"""Targets of the GPU suite (tests/gpu/): ``cuda`` (marked ``gpu``, skipped without CUDA)
and ``cpu``: the same test code with the CPU standing in for the GPU, so that ``make test``
on a machine without one runs this suite's logic (mixed precision there is CPU autocast)."""
from __future__ import annotations

import functools

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
#: marks of a CUDA-only parameter
GPU = [pytest.mark.gpu, pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def precisions(target: str) -> list[str]:
    """fp32, and the mixed precisions the target runs (bf16 only where the GPU has it)."""
    if target == "cuda" and HAS_CUDA and not torch.cuda.is_bf16_supported():
        return ["fp32", "fp16"]
    return ["fp32", "fp16", "bf16"]


def params(cuda_items, cpu_items, names: str):
    """pytest params: every item on CUDA (marked gpu), the representative ``cpu_items`` on
    the CPU stand-in; an item is a tuple of values (or a ``pytest.param`` with marks)."""
    def param(target, item, marks=()):
        values, more = (item.values, list(item.marks)) if hasattr(item, "marks") else (item, [])
        return pytest.param(target, *values, marks=[*marks, *more],
                            id="-".join([target, *(str(v) for v in values if not isinstance(v, dict) or v)]))
    return pytest.mark.parametrize(names, [param("cuda", item, GPU) for item in cuda_items] +
                                   [param("cpu", item) for item in cpu_items])


def autocast(target: str, precision: str):
    """None for fp32, else a factory of the target's autocast context in that precision."""
    if precision == "fp32":
        return None
    return functools.partial(torch.autocast, target, dtype=DTYPES[precision])


def tolerance(precision: str, eps: float, fp32: float) -> float:
    """``eps`` half-precision epsilons, or ``fp32`` (CUDA against CPU in float32: other
    kernels, other summation orders)."""
    return fp32 if precision == "fp32" else eps * torch.finfo(DTYPES[precision]).eps
