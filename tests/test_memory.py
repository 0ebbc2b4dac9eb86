"""Freed heap memory goes back to the system between a CPU run's phases."""

from __future__ import annotations

import sys

import pytest

from pipeline.training import memory
from pipeline.training.config import ConfigError, load_config
from pipeline.training.memory import (
    ReleaseMemoryCallback,
    memory_limit_bytes,
    release_callbacks,
    release_free_memory,
    resident_share,
)


def _rss_kb() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_small_blocks_are_handed_back_to_the_system() -> None:
    """Many small blocks (below malloc's mmap threshold) stay in the heap once freed, but for
    the last one held; the trim returns their pages."""
    blocks = [bytearray(64 * 1024) for _ in range(4000)]  # ~256 MB in the heap
    keep = blocks[-1]
    held = _rss_kb()
    del blocks
    before = _rss_kb()
    assert release_free_memory() is True
    after = _rss_kb()
    assert held - after > 150_000  # kB: most of the 256 MB is back
    assert after < before
    assert len(keep) == 64 * 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/statm")
def test_the_callback_trims_only_above_its_share_of_memory() -> None:
    share = resident_share()
    assert share is not None and 0 < share < 1
    control = object()
    above = ReleaseMemoryCallback(above=0.0)  # any process holds more than none
    assert above.on_step_end(None, None, control) is control and above.releases == 1
    below = ReleaseMemoryCallback(above=1.0)  # none holds more than all
    assert below.on_step_end(None, None, control) is control and below.releases == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sysconf memory pages")
def test_a_container_limit_below_the_machine_sets_the_share(tmp_path, monkeypatch) -> None:
    """A cgroup limit smaller than the machine's memory is what the share is of; "max" (v2) and
    v1's huge "unlimited" number leave the machine's."""
    machine = memory_limit_bytes()
    unlimited_v2, unlimited_v1, limited = (tmp_path / n for n in ("v2", "v1", "limit"))
    unlimited_v2.write_text("max\n")
    unlimited_v1.write_text("9223372036854771712\n")
    monkeypatch.setattr(memory, "CGROUP_LIMITS", (unlimited_v2, unlimited_v1, tmp_path / "none"))
    assert memory_limit_bytes() == machine
    share = resident_share()
    limited.write_text(f"{machine // 4}\n")
    monkeypatch.setattr(memory, "CGROUP_LIMITS", (unlimited_v2, limited))
    assert memory_limit_bytes() == machine // 4
    assert resident_share() == pytest.approx(4 * share, rel=0.05)


def test_the_model_section_sets_the_callbacks_threshold() -> None:
    cpu = load_config(None, ["model.backend=tiny", "model.release_memory_above=0.25"])
    (callback,) = release_callbacks(cpu.model)
    assert isinstance(callback, ReleaseMemoryCallback) and callback.above == 0.25
    assert release_callbacks(load_config(None, ["model.backend=transformers"]).model) == []
    with pytest.raises(ConfigError, match="release_memory_above"):
        load_config(None, ["model.release_memory_above=1.5"])
