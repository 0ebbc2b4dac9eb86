"""Hand freed heap memory back to the operating system between the phases of a CPU run.

glibc's malloc keeps memory that PyTorch frees inside its heaps for later use. A steps run's
phases allocate differently sized tensors in turn (contexts of 2-4k tokens, lockstep
conversations, the loss over a batch's replies), so the heaps fragment and the process holds what
it has freed: the 100-cut steps learning run reached 22.7 GB of this machine's 24, and
``malloc_trim`` brought it to 15.8 GB at once (benchmarks/RESULTS.md, learning_cpu notes, run 23).
``release_free_memory`` trims after a Python collection; ``ReleaseMemoryCallback`` does it after
each optimizer step, before the next step's peak.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from typing import Any

from transformers import TrainerCallback

_LIBC: list[Any] = []


def _libc() -> Any | None:
    """glibc, or None where there is none (macOS, musl without ``malloc_trim``)."""
    if not _LIBC:
        name = ctypes.util.find_library("c")
        try:
            libc = ctypes.CDLL(name) if name else None
        except OSError:
            libc = None
        _LIBC.append(libc if libc is not None and hasattr(libc, "malloc_trim") else None)
    return _LIBC[0]


def release_free_memory() -> bool:
    """Collect Python garbage, then return glibc's free heap pages to the system. Returns
    whether anything could be trimmed (False without glibc: nothing to do there)."""
    gc.collect()
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


class ReleaseMemoryCallback(TrainerCallback):
    """``release_free_memory`` after every optimizer step (CPU runs)."""

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        release_free_memory()
        return control
