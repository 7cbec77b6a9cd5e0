"""The CUDA devices a command names, checked against the machine before anything is built.

torch fails on a device it lacks only at the first ``.to()`` (OpenNMT-py's
``load_test_model`` moving the model, ``train_single`` calling ``set_device``): an
``AssertionError: Torch not compiled with CUDA enabled`` from a CPU build, or
``invalid device ordinal``, at the bottom of a long traceback. Here it is one line naming the
option, with what the machine has.
"""
from __future__ import annotations

from headlab.errors import ConfigError


def cuda_devices() -> int:
    """How many CUDA devices torch can use here (0 on a CPU build or a machine without one)."""
    import torch
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def check_cuda_device(index: int, option: str, instead: str, *, named: str | None = None) -> None:
    """ConfigError when CUDA device ``index`` (>= 0; below 0 is the CPU, always there) is
    not on this machine; ``option`` is how the user spelled it (``-gpu``), ``instead`` what
    to do on this machine (``-gpu -1 runs on the CPU``), ``named`` what the line starts with
    (default ``-gpu 3``)."""
    if index < 0:
        return
    count = cuda_devices()
    if index < count:
        return
    import torch
    if count > 1:
        has = f"this machine has CUDA devices 0..{count - 1}"
    elif count:
        has = "this machine has only CUDA device 0"
    elif torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        has = f"torch {torch.__version__} is a CPU build: no CUDA device"
    else:
        has = "torch sees no CUDA device on this machine"
    raise ConfigError(f"{named or f'{option} {index}'}: {has}; {instead}")
