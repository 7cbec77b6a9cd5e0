"""A simulated accelerator for CPU tests: tensors that live "on the device" carry real CPU
data, and every operation that mixes them with a CPU tensor fails as it would on CUDA.

Inside ``with SimulatedDevice():``

* ``torch.device("cuda")`` (any index) is the simulated device: ``model.to("cuda")``,
  ``tensor.cuda()``, ``torch.zeros(..., device="cuda")``, OpenNMT-py's ``-gpu 0`` and
  ``device=x.device`` all create :class:`DeviceTensor`\\ s. They report the device
  ``meta`` (the one non-CPU device whose device guard every torch build has, so autograd
  works) and hold their values in ``.elem`` (a CPU tensor).
* every aten operation runs on the CPU data (:class:`SimulatedDevice.__torch_dispatch__`)
  after the check CUDA makes: an operation on device tensors that also takes a CPU tensor
  raises ``RuntimeError: Expected all tensors to be on the same device`` unless CUDA
  accepts it too: a 0-dim CPU tensor (a scalar), the indices of advanced indexing,
  cross-device copies (``copy_``, ``to``). A CPU random generator on device tensors fails
  as on CUDA.
* values are real, so data-dependent code runs: ``.item()``, ``bool(t)``, ``.tolist()``,
  ``torch.unique``, beam search; ``.numpy()`` of a device tensor fails as on CUDA.
* ``waits`` lists what would make the host wait for a CUDA device: a value read back
  (``.item()``, ``bool(t)``, ``nonzero``, ``masked_select``: ``headlab.bench.dispatch``),
  indexing by a boolean mask (``t[mask]``, ``t[mask] = values``: a ``nonzero`` inside),
  ``.tolist()`` or a copy to the host, a copy to the device without ``non_blocking``.

Why not torch's own mechanisms (tried; tests/test_device_safety.py keeps the evidence):
``FakeTensorMode`` with a fake ``cuda`` device catches mixed-device operations, but its
tensors have no values (``bool()``, ``.item()``, ``torch.unique`` raise: the head ablation
check, the syntax-column check, LPEA and all of beam search), and on a CPU-only torch the
backward pass **aborts the process** (autograd asks for a CUDA device guard). The ``meta``
device catches mixing and runs backward, but has no values either.
"""
from __future__ import annotations

import contextlib
import functools
import sys

import torch
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils._python_dispatch import TorchDispatchMode

from headlab.bench.dispatch import SYNC_OPS
from headlab.engine import devices

DEVICE = torch.device("meta")
aten = torch.ops.aten
#: operations CUDA runs across devices
_CROSS_DEVICE = {aten.copy_.default, aten._to_copy.default}
#: operation -> position of its indices (CPU indices are fine for CUDA tensors)
_INDICES = {aten.index.Tensor: 1, aten.index_put_.default: 1, aten.index_put.default: 1,
            aten._index_put_impl_.default: 1}


class DeviceTensor(torch.Tensor):
    """A tensor on the simulated device: reports ``DEVICE``, holds its values in ``elem``."""

    @staticmethod
    def __new__(cls, elem: torch.Tensor):
        return torch.Tensor._make_wrapper_subclass(
            cls, elem.size(), strides=elem.stride(), storage_offset=elem.storage_offset(),
            dtype=elem.dtype, layout=elem.layout, device=DEVICE, requires_grad=elem.requires_grad)

    def __init__(self, elem: torch.Tensor):
        self.elem = elem

    def __repr__(self):
        return f"DeviceTensor({self.elem!r})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @property
    def data(self):
        return torch._C.TensorBase.data.__get__(self)

    @data.setter
    def data(self, value):
        # ``param.data = cpu_tensor`` (OpenNMT-py's checkpoint loading) makes a CUDA
        # parameter a CPU one: the same object, now holding the CPU tensor
        if isinstance(value, DeviceTensor):
            torch._C.TensorBase.data.__set__(self, value)
        else:
            replacement = torch.nn.Parameter(value, self.requires_grad) if getattr(self, "_is_param", False) \
                else value.detach()
            torch.utils.swap_tensors(self, replacement)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError(f"{func} on a simulated-device tensor outside SimulatedDevice()")


class MixedDeviceError(RuntimeError):
    """What CUDA raises for an operation across devices (a RuntimeError, as there)."""


def _boolean_mask_on_device(func, args, kwargs) -> bool:
    """Advanced indexing by a boolean mask on the device: CUDA turns the mask into indices
    with ``nonzero``, whose output size it reads back (a wait not seen as an op of its own:
    ``index`` calls it inside), except where ``index_put_`` takes one element from the host
    (then it is a ``masked_fill_``)."""
    indices = args[_INDICES[func]] if len(args) > _INDICES[func] else kwargs.get("indices", ())
    masks = [t for t in indices if isinstance(t, DeviceTensor) and t.dtype in (torch.bool, torch.uint8)]
    if not masks:
        return False
    if func is aten.index.Tensor:
        return True
    values = args[2] if len(args) > 2 else kwargs.get("values")
    return not (len(indices) == 1 and not isinstance(values, DeviceTensor) and values.numel() == 1)


def _on_device(device) -> bool:
    return (device is not None and not isinstance(device, int)
            and torch.device(device).type in ("cuda", DEVICE.type))


def _device_arg(value):
    return DEVICE if isinstance(value, (str, torch.device)) and _on_device(value) else value


class SimulatedDevice(TorchDispatchMode):
    """See the module doc. ``checked`` counts the operations that touched device tensors,
    ``waits`` names each one that would make the host wait for a CUDA device."""

    def __init__(self):
        super().__init__()
        self.checked = 0
        self.waits: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        flat, _ = tree_flatten((args, kwargs))
        on_device = any(isinstance(t, DeviceTensor) for t in flat)
        create = _on_device(kwargs.get("device"))
        if on_device or create:
            self.checked += 1
            self._count_wait(func, args, kwargs, create)
            if func not in _CROSS_DEVICE:
                self._check(func, args, kwargs)
        cpu_args, cpu_kwargs = tree_map(lambda t: t.elem if isinstance(t, DeviceTensor) else t, (args, kwargs))
        if create:
            cpu_kwargs["device"] = torch.device("cpu")
        out = func(*cpu_args, **cpu_kwargs)
        returns = func._schema.returns
        if returns and returns[0].alias_info is not None and returns[0].alias_info.is_write:
            return args[0]          # in place: the tensor written to, the caller's own object
        # the result lives where a device= argument says, else where the inputs live
        if not (create or (on_device and kwargs.get("device") is None)):
            return out
        return tree_map(lambda t: DeviceTensor(t) if type(t) is torch.Tensor else t, out)

    def _count_wait(self, func, args, kwargs, create: bool) -> None:
        """Record an operation that makes the host wait for a CUDA device (``waits``): a value
        read back (``SYNC_OPS``), a copy to the host, a blocking copy to the device."""
        name = str(func)
        if name in SYNC_OPS:
            self.waits.append(name)
        elif func in _INDICES and _boolean_mask_on_device(func, args, kwargs):
            self.waits.append("boolean-mask indexing")
        elif func is aten._to_copy.default:
            target = kwargs.get("device")
            if isinstance(args[0], DeviceTensor) and target is not None and not create:
                self.waits.append("copy to the host")
            elif not isinstance(args[0], DeviceTensor) and create and not kwargs.get("non_blocking"):
                self.waits.append("blocking copy to the device")
        elif func is aten.copy_.default:
            into, source = args[0], args[1]
            if isinstance(source, DeviceTensor) and not isinstance(into, DeviceTensor):
                self.waits.append("copy to the host")
            elif isinstance(into, DeviceTensor) and not isinstance(source, DeviceTensor) and \
                    not (args[2] if len(args) > 2 else kwargs.get("non_blocking")):
                self.waits.append("blocking copy to the device")

    @staticmethod
    def _check(func, args, kwargs):
        checked = (args, kwargs)
        if func in _INDICES:
            position = _INDICES[func]
            checked = ([a for i, a in enumerate(args) if i != position], kwargs)
        for t in tree_flatten(checked)[0]:
            if isinstance(t, torch.Tensor) and not isinstance(t, DeviceTensor) and t.dim() > 0:
                raise MixedDeviceError(
                    f"Expected all tensors to be on the same device, but found at least two devices, "
                    f"cuda:0 and cpu! ({func}: a CPU tensor of shape {tuple(t.shape)})")
        generator = kwargs.get("generator")
        if generator is not None and generator.device.type == "cpu":
            raise MixedDeviceError(f"Expected a 'cuda' device type for generator but found 'cpu' ({func})")

    # -- the Python-level entry points that would otherwise ask for a real CUDA -------------
    def __enter__(self):
        self._patches = contextlib.ExitStack()
        # factories with device="cuda" initialise CUDA first: say it is initialised
        self._patches.enter_context(_patched(torch.cuda, "_initialized", True))
        # headlab's check of a named device (-gpu 0) sees one: the simulated one
        self._patches.enter_context(_patched(devices, "cuda_devices", lambda: 1))
        # model.to(device) keeps each Parameter object (swapping its contents, as a real
        # device's .data assignment does), so tied weights stay tied
        swap = torch.__future__.get_swap_module_params_on_conversion()
        torch.__future__.set_swap_module_params_on_conversion(True)
        self._patches.callback(torch.__future__.set_swap_module_params_on_conversion, swap)
        to, tolist = torch.Tensor.to, torch.Tensor.tolist

        def tensor_to(t, *args, **kwargs):
            return to(t, *[_device_arg(a) for a in args], **{k: _device_arg(v) for k, v in kwargs.items()})

        def tensor_cuda(t, device=None, non_blocking=False, memory_format=torch.preserve_format):
            return to(t, DEVICE, non_blocking=non_blocking, memory_format=memory_format)

        self._patches.enter_context(_patched(torch.Tensor, "to", tensor_to))
        self._patches.enter_context(_patched(torch.Tensor, "cuda", tensor_cuda))

        def tensor_tolist(t):
            if isinstance(t, DeviceTensor):
                self.waits.append("tolist")
                return tolist(t.elem)
            return tolist(t)

        self._patches.enter_context(_patched(torch.Tensor, "tolist", tensor_tolist))
        numpy = torch.Tensor.numpy

        def tensor_numpy(t, *args, **kwargs):
            if isinstance(t, DeviceTensor):
                raise TypeError("can't convert cuda:0 device type tensor to numpy. Use Tensor.cpu() to copy "
                                "the tensor to host memory first.")
            return numpy(t, *args, **kwargs)

        self._patches.enter_context(_patched(torch.Tensor, "numpy", tensor_numpy))
        # Python constructors build their tensor below the dispatcher: route them through .to
        for name in ("tensor", "as_tensor"):
            self._patches.enter_context(_patched(torch, name, _factory(getattr(torch, name))))
        new_tensor = torch.Tensor.new_tensor

        def tensor_new_tensor(t, data, dtype=None, device=None, requires_grad=False, **kwargs):
            device = t.device if device is None else device
            if not _on_device(device):
                return new_tensor(values(t), data, dtype=dtype, device=device, requires_grad=requires_grad)
            made = torch.tensor(data, dtype=dtype or t.dtype, device=device)
            return made.requires_grad_() if requires_grad else made

        self._patches.enter_context(_patched(torch.Tensor, "new_tensor", tensor_new_tensor))
        # CUDA's memory-efficient SDPA kernel applies an explicit mask *and* is_causal
        # (OpenNMT-py's GPU decoder path passes both); the CPU math kernel refuses them
        sdpa = torch.nn.functional.scaled_dot_product_attention
        cuda_sdpa = _cuda_like_sdpa(sdpa)
        for module in list(sys.modules.values()):
            if getattr(module, "scaled_dot_product_attention", None) is sdpa:
                self._patches.enter_context(_patched(module, "scaled_dot_product_attention", cuda_sdpa))
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._patches.close()


def _cuda_like_sdpa(sdpa):
    @functools.wraps(sdpa)
    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *args, **kwargs):
        if is_causal and attn_mask is not None and on_device(query):
            causal = torch.ones(query.size(-2), key.size(-2), dtype=torch.bool, device=query.device).tril()
            attn_mask = attn_mask & causal if attn_mask.dtype == torch.bool else \
                attn_mask.masked_fill(~causal, float("-inf"))
            is_causal = False
        return sdpa(query, key, value, attn_mask, dropout_p, is_causal, *args, **kwargs)
    return attention


def _factory(original):
    def build(data, *args, device=None, **kwargs):
        if _on_device(device):
            return original(data, *args, **kwargs).to(DEVICE)
        return original(data, *args, device=device, **kwargs)
    return build


@contextlib.contextmanager
def _patched(owner, name, value):
    old = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, old)


def on_device(tensor) -> bool:
    return isinstance(tensor, DeviceTensor)


def values(tensor: torch.Tensor) -> torch.Tensor:
    """The CPU values of a device tensor (a CPU tensor as it is)."""
    return tensor.elem if isinstance(tensor, DeviceTensor) else tensor
