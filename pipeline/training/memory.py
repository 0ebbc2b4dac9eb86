"""Hand freed heap memory back to the operating system when a CPU run's process holds too much.

glibc's malloc keeps memory that PyTorch frees inside its heaps for later use. A steps run's
phases allocate differently sized tensors in turn (contexts of 2-4k tokens, lockstep
conversations, the loss over a batch's replies), so the heaps fragment and the process holds what
it has freed: the 100-cut steps learning run reached 22.7 GB of this machine's 24, and
``malloc_trim`` brought it to 15.8 GB at once (benchmarks/RESULTS.md, learning_cpu notes, run 23).
A trim is not free: the pages it returns are faulted in again by the next step that needs them,
and a trim after every SFT step slowed the warm start (same notes). So ``ReleaseMemoryCallback``
trims after an optimizer step only while the process holds more than ``RELEASE_ABOVE`` of the
machine's memory; ``release_free_memory`` trims unconditionally (between a run's stages).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from typing import Any

from transformers import TrainerCallback

RELEASE_ABOVE = 0.6
"""Share of the machine's memory a process may hold before a step's end trims its heaps."""

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


def resident_share() -> float | None:
    """This process's resident memory as a share of the machine's (None where ``/proc`` or
    ``sysconf`` cannot say)."""
    try:
        with open("/proc/self/statm") as statm:
            resident_pages = int(statm.read().split()[1])
        return resident_pages / os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, IndexError):
        return None


class ReleaseMemoryCallback(TrainerCallback):
    """``release_free_memory`` after an optimizer step while the process holds more than
    ``above`` of the machine's memory (CPU runs)."""

    def __init__(self, above: float = RELEASE_ABOVE) -> None:
        self.above = above
        self.releases = 0

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        share = resident_share()
        if share is not None and share > self.above:
            release_free_memory()
            self.releases += 1
        return control
