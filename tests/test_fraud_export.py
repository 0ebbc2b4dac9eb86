"""Rollouts and grades export as CSV files and as a datasets table."""

from __future__ import annotations

import csv

from env.fraud.environment import FraudEnvironment
from env.fraud.export import grade_row, run_and_export, step_rows, to_dataset
from env.fraud.policies import POLICIES
from env.rollout import play


def test_run_and_export_writes_one_row_per_step_and_per_episode(tmp_path):
    paths = run_and_export("heuristic", "fraudster", range(3), tmp_path)
    steps = list(csv.DictReader(paths["steps"].open()))
    grades = list(csv.DictReader(paths["grades"].open()))
    assert len(grades) == 3 and {g["seed"] for g in grades} == {"0", "1", "2"}
    assert len(steps) == sum(int(g["steps"]) for g in grades)
    assert all(g["family"] for g in grades), "the scheme family is exported after the episode"
    assert {"c_laundered", "c_stealth", "c_decision", "m_evidence_coverage"} <= set(grades[0])
    last = [s for s in steps if s["seed"] == "0"][-1]
    assert last["done"] == "True" and last["step"] == grades[0]["steps"]


def test_rows_become_a_datasets_table():
    env = FraudEnvironment()
    episodes = [play(env, POLICIES["heuristic"](s), "defender", s) for s in range(4)]
    rows = [r for e in episodes for r in step_rows(e, "heuristic")]
    table = to_dataset(rows)
    assert table.num_rows == len(rows) == sum(len(e.actions) for e in episodes)
    assert set(table.column_names) >= {"tool", "arguments", "reward", "done"}
    grades = to_dataset([grade_row(e, "heuristic") for e in episodes])
    assert grades["total"] == [e.report.grade.total for e in episodes]
    assert all(0.0 <= t <= 1.0 for t in grades["total"])
