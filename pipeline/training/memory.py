"""Hand freed heap memory back to the operating system when a CPU run's process holds too much.

glibc's malloc keeps memory that PyTorch frees inside its heaps for later use. A steps run's
phases allocate differently sized tensors in turn (contexts of 2-4k tokens, lockstep
conversations, the loss over a batch's replies), so the heaps fragment and the process holds what
it has freed: the 100-cut steps learning run reached 22.7 GB of this machine's 24, and
``malloc_trim`` brought it to 15.8 GB at once (benchmarks/RESULTS.md, learning_cpu notes, run 23).
A trim is not free: the pages it returns are faulted in again by the next step that needs them,
and a trim after every SFT step made a step that reads stored contexts 1.33x as long
(RESULTS.md, bench_memory_trim). So ``ReleaseMemoryCallback`` trims after an optimizer step only
while the process holds more than a share of the memory it may use (``model.release_memory_above``,
default ``RELEASE_ABOVE``; the machine's memory, or its container's limit where smaller);
``release_free_memory`` trims unconditionally (between a run's stages).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

RELEASE_ABOVE = 0.6
"""Share of its memory a process may hold before a step's end trims its heaps (the default of
``model.release_memory_above``)."""

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


CGROUP_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


def memory_limit_bytes() -> int | None:
    """The memory this process may use: the machine's, or its container's limit where that is
    smaller (a process killed at a cgroup's limit never reaches a share of the machine's)."""
    try:
        limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None
    for path in CGROUP_LIMITS:
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # v2 says "max" when unlimited; v1's huge number loses to the machine
            limit = min(limit, int(text))
    return limit


def resident_share() -> float | None:
    """This process's resident memory as a share of ``memory_limit_bytes`` (None where
    ``/proc`` or ``sysconf`` cannot say)."""
    limit = memory_limit_bytes()
    try:
        with open("/proc/self/statm") as statm:
            resident_pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE") / limit if limit else None


class ReleaseMemoryCallback(TrainerCallback):
    """``release_free_memory`` after an optimizer step while the process holds more than
    ``above`` of the memory it may use (CPU runs)."""

    def __init__(self, above: float = RELEASE_ABOVE) -> None:
        self.above = above
        self.releases = 0

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        share = resident_share()
        if share is not None and share > self.above:
            release_free_memory()
            self.releases += 1
        return control


def release_callbacks(model: Any) -> list[TrainerCallback]:
    """The trainer callbacks for a run's ``model`` section: ``ReleaseMemoryCallback`` at its
    ``release_memory_above`` on the CPU backends, none on a GPU (glibc's heaps hold the host
    side only; CUDA memory has its own caching allocator)."""
    return [ReleaseMemoryCallback(model.release_memory_above)] if model.on_cpu else []
