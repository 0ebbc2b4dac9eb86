"""Support and ops never raise on junk calls, and every figure they report stays in [0, 1]."""

from __future__ import annotations

import json
import random

import pytest

from env.registry import env_class, make

JUNK = [
    None,
    1,
    -1,
    1e308,
    float("nan"),
    "",
    "x" * 50,
    [],
    {},
    [[1]],
    True,
    "2026-03-02 15:00",
    "E-1000",
    "O-10000",
    "C-10000",
    "gateway",
    {"a": 1},
]


@pytest.mark.parametrize("name", ["support", "ops"])
def test_junk_calls_are_error_observations_never_exceptions(name: str):
    rng = random.Random(7)
    specs = env_class(name).tool_specs()
    env = make(name)
    for task in env.tasks:
        for seed in range(25):
            env.reset(seed=seed, task=task)
            for _ in range(20):
                spec = rng.choice(specs)
                props = spec.parameters.get("properties", {})
                args = {p: rng.choice(JUNK) for p in props if rng.random() < 0.8}
                if rng.random() < 0.1:
                    args["extra"] = 1
                tool = spec.name if rng.random() < 0.9 else "no_such_tool"
                obs = env.step({"tool": tool, "arguments": args})
                json.dumps(obs.model_dump())
                if obs.done:
                    break
            report = env.report()
            assert 0.0 <= report.grade.total <= 1.0
            assert all(0.0 <= v <= 1.0 for v in report.metrics.values())
            assert "evidence_coverage" in report.metrics
    assert env.internal_errors == 0
