"""Gang policies: the honest heuristic clears the bar; random and degenerate play fall short."""

from __future__ import annotations

import statistics

import pytest

import env
from env.base import ToolCallAction
from env.rollout import play
from env.seeds import split_seeds

SEEDS = split_seeds("eval", 120)  # the 300-seed figures are in env/gang/README.md


def _mean(policy: str, task: str) -> float:
    e = env.make("gang")
    factory = env.policies("gang")[policy]
    grades = [play(e, factory(s), task, s).report.grade.total for s in SEEDS]
    assert e.internal_errors == 0
    return statistics.mean(grades)


@pytest.mark.parametrize("task", ["easy", "medium", "hard"])
def test_heuristic_beats_random_and_degenerates_and_oracle_is_near_perfect(task):
    heuristic = _mean("heuristic", task)
    assert heuristic >= 0.60
    assert _mean("random", task) <= heuristic - 0.25
    degenerate = max(_mean("submit_at_once", task), _mean("flag_everything", task))
    assert degenerate <= heuristic - 0.20
    assert _mean("oracle", task) >= 0.85


def test_heuristic_reads_observations_only():
    """The same plan replays to the same grade, so nothing but observations drove it."""
    e = env.make("gang")
    seed = SEEDS[3]
    episode = play(e, env.policies("gang")["heuristic"](seed), "medium", seed)
    replayed = env.rollout.replay(e, "medium", seed, [ToolCallAction(**c) for c in episode.plan])
    assert replayed.grade == episode.report.grade


def test_flag_everything_flags_the_visible_accounts_then_submits():
    e = env.make("gang")
    episode = play(e, env.policies("gang")["flag_everything"](0), "hard", SEEDS[0])
    opening = episode.observations[0].result
    visible = len(opening["alerts"]) + len(opening["recently_active"])
    assert [a.tool for a in episode.actions] == ["flag"] * visible + ["submit"]
