"""The memory-trim benchmark's report: the encoding epoch told apart, medians per variant."""

from __future__ import annotations

import argparse

from benchmarks.bench_memory_trim import StepMemory, report


def _step(wall: float, before: float, after: float) -> dict[str, float]:
    return {"wall": wall, "cpu": 2 * wall, "rss_before_gb": before, "rss_after_gb": after}


def test_the_report_gives_each_variants_memory_and_step_times() -> None:
    args = argparse.Namespace(steps=3, cases=4, repeats=1)  # 8 examples / 4 a step: 2 encode
    runs = {
        "a trim after every step": [
            {
                "steps": [_step(30, 6.0, 4.0), _step(28, 6.4, 4.2), _step(15, 6.2, 4.4)],
                "peak_gb": 7.5,
                "batch": 4,
            }
        ],
        "no trim": [
            {
                "steps": [_step(29, 6.0, 6.0), _step(27, 7.0, 7.0), _step(10, 8.0, 8.0)],
                "peak_gb": 8.5,
                "batch": 4,
            }
        ],
    }
    text = "\n".join(report(args, runs))
    assert "steps 1-2 encode their cases" in text
    assert (
        "| a trim after every step | 1 | 6.20 | 4.20 | 4.40 | 7.50 | 29.0 / 58.0 | 15.0 / 30.0 |"
        in text
    )
    assert "| no trim | 1 | 7.00 | 7.00 | 8.00 | 8.50 | 28.0 / 56.0 | 10.0 / 20.0 |" in text
    assert "1.50x the time without" in text


def test_step_memory_records_each_steps_seconds_and_resident_memory() -> None:
    memory = StepMemory()
    for _ in range(2):
        memory.on_step_begin(None, None, None)
        memory.on_optimizer_step(None, None, None)
        memory.on_step_end(None, None, None)
    steps = memory.steps()
    assert len(steps) == 2
    for step in steps:
        assert step["wall"] >= 0 and step["cpu"] >= 0
        assert 0 < step["rss_before_gb"] < 1e3 and 0 < step["rss_after_gb"] < 1e3
