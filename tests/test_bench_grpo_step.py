"""The GRPO step benchmark's report: encoding and stored steps told apart within each run."""

from __future__ import annotations

import argparse

from benchmarks.bench_grpo_step import report


def test_the_report_splits_each_runs_leading_encoding_steps_from_its_stored_ones() -> None:
    args = argparse.Namespace(steps=3, encoding_steps=1, repeats=2, init_adapter=None)
    times = {  # two runs of three steps each: (wall, cpu)
        "float32 (the model)": [(100, 190), (60, 110), (62, 112), (104, 198), (58, 108), (64, 118)],
        "bfloat16 copy": [(50, 95), (40, 75), (42, 77), (54, 99), (38, 73), (44, 79)],
    }
    lengths = {"float32 (the model)": [80.0, 84.0], "bfloat16 copy": [70.0, 90.0]}
    text = "\n".join(report(args, times, lengths))
    assert "| float32 (the model) | 102.0 / 194.0 | 61.0 / 111.0 | 82 |" in text
    assert "| bfloat16 copy | 52.0 / 97.0 | 41.0 / 76.0 | 80 |" in text
    assert "1.96x on a step that encodes, 1.49x on a step that reads the store" in text
