"""Issue 8's figures on 300 eval seeds per task, for both environments."""

from __future__ import annotations

import pytest

from benchmarks.policy_grades import mean_grades
from env.registry import env_class, policies
from env.seeds import split_seeds

EVAL = split_seeds("eval", 300)
CASES = [(name, task) for name in ("support", "ops") for task in env_class(name).tasks]


@pytest.mark.parametrize(("env_name", "task"), CASES)
def test_figures_on_300_eval_seeds(env_name: str, task: str):
    grades = mean_grades(env_name, task, EVAL)
    heuristic = grades["heuristic"]
    degenerate = max(v for k, v in grades.items() if k not in ("heuristic", "random", "oracle"))
    assert heuristic >= 0.60
    assert grades["random"] <= heuristic - 0.25
    assert degenerate <= heuristic - 0.20
    assert grades["oracle"] >= 0.85
    assert set(policies(env_name)) >= {"heuristic", "random", "oracle"}
