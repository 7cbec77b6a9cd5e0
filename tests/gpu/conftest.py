"""The GPU suite: float32 is float32 (no TF32); see gputargets.py for the targets."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def full_float32_matmuls():
    """fp32 means fp32: no TF32 matmuls (Ampere+ would round fp32 products to 10 bits)."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
