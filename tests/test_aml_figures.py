"""Issue 2's figures on 300 eval seeds per difficulty: honest work beats every shortcut."""

from __future__ import annotations

import pytest

from env.aml.policies import DEGENERATE, POLICIES
from pipeline.evaluation.episodes import evaluate

N = 300


@pytest.fixture(scope="module")
def grades() -> dict[str, dict[str, float]]:
    table = {}
    for name in POLICIES:
        summary = evaluate("aml", name, "all", N, "eval", progress=False)["summary"]
        assert summary["internal_errors"] == 0
        table[name] = {t: s["mean_grade"] for t, s in summary["per_task"].items()}
    return table


@pytest.mark.parametrize("task", ["easy", "medium", "hard"])
def test_figures_per_difficulty(grades, task):
    g = {name: grades[name][task] for name in grades}
    assert g["heuristic"] >= 0.60, g
    assert g["oracle"] >= 0.90, g
    assert g["always_file"] <= 0.45, g
    assert g["always_close"] <= 0.35, g
    assert g["random"] <= 0.25, g
    best_shortcut = max(g[name] for name in (*DEGENERATE, "random"))
    assert g["heuristic"] >= best_shortcut + 0.20, g
    assert g["oracle"] >= g["heuristic"], g
