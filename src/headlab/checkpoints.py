"""Reading a checkpoint a user named: one :class:`DataError` line when it is none.

OpenNMT-py's loaders fail on a file that is no checkpoint deep inside: a bare
``KeyError: 'opt'``, or pickle's ``Memo value not found at index 101`` for a file cut short.
Here the file is named with what it lacks. A module of its own, apart from
:mod:`headlab.io`, because it needs torch and the data commands (and their conda env) do not.
"""
from __future__ import annotations

import glob
import os
import zipfile

from headlab.errors import DataError

#: what every OpenNMT-py 3.5.1 checkpoint holds (``onmt/models/model_saver.py``): its
#: options and vocabulary (``optim`` too, None once stripped) ...
CHECKPOINT_KEYS = ("vocab", "opt")
#: ... and its weights, unless ``-save_format safetensors`` wrote them beside it
#: (``<name>.safetensors``; ``load_test_model`` then reads those)
WEIGHT_KEYS = ("model", "generator")


def weights_beside(path: str) -> list[str]:
    """The safetensors files that hold the weights of ``path`` saved with
    ``-save_format safetensors`` (the saver writes ``<name>.safetensors``; the loader reads
    the shards ``<name>.*.safetensors``)."""
    base = path[:-3] if path.endswith(".pt") else path
    return sorted(glob.glob(glob.escape(base) + ".safetensors") + glob.glob(glob.escape(base) + ".*.safetensors"))


def _load(path: str, mmap: bool):
    import torch
    return torch.load(path, map_location="cpu", weights_only=False, mmap=mmap)


def _unreadable(err: Exception) -> str:
    """Why torch.load failed, after ``not a readable checkpoint``."""
    reason = (str(err).splitlines() or [type(err).__name__])[0]
    if isinstance(err, ModuleNotFoundError):     # pickle names each class by module and name
        return f": it needs module {err.name!r}, which this install lacks (saved by other software?)"
    if isinstance(err, AttributeError):
        return f": it needs a class this install lacks (saved by another version?): {reason}"
    return f" (cut short, or not a torch.save file): {reason}"


def read_checkpoint(path: str | os.PathLike, needs: tuple[str, ...] | None = None, *,
                    mmap: bool = True, key: str | None = None) -> dict:
    """``torch.load`` of a checkpoint a user named, or one :class:`DataError` line saying why
    it is none: missing, empty, cut short or no ``torch.save`` file, pickled classes this
    install lacks, or a file without what ``needs`` names (default: a whole OpenNMT-py
    checkpoint, :data:`CHECKPOINT_KEYS` and the weights in it or beside it).

    ``mmap`` maps the tensors instead of reading them (a check before OpenNMT-py loads the
    file costs its options and vocabulary, not its weights); a file that cannot be mapped (an
    old non-zip file, a file system without mmap) is read. The file is unpickled whole, as
    OpenNMT-py's own loaders do: only load checkpoints you trust."""
    path = str(path)
    if not os.path.isfile(path):
        raise DataError("no such checkpoint", path=path, key=key)
    if os.path.getsize(path) == 0:
        raise DataError("not a readable checkpoint: the file is empty", path=path, key=key)
    mapped = mmap and zipfile.is_zipfile(path)
    try:
        try:
            checkpoint = _load(path, mapped)
        except Exception:  # noqa: BLE001  (mapping failed: reading decides)
            if not mapped:
                raise
            checkpoint = _load(path, False)
    except Exception as err:  # noqa: BLE001  (EOFError, UnpicklingError, RuntimeError: long)
        raise DataError(f"not a readable checkpoint{_unreadable(err)}", path=path, key=key) from None
    if not isinstance(checkpoint, dict):
        raise DataError(f"not an OpenNMT-py checkpoint: it holds a {type(checkpoint).__name__}, not a dict",
                        path=path, key=key)
    required = needs if needs is not None else CHECKPOINT_KEYS + (
        WEIGHT_KEYS if "model" in checkpoint or not weights_beside(path) else ())
    missing = [name for name in required if name not in checkpoint]
    if missing:
        held = ", ".join(map(repr, sorted(map(str, checkpoint)))) or "nothing"
        beside = " and no .safetensors beside it" if "model" in missing and needs is None else ""
        raise DataError(f"not an OpenNMT-py checkpoint: it has no {', '.join(map(repr, missing))}{beside} "
                        f"(it holds {held})", path=path, key=key)
    return checkpoint
