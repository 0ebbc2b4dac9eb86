"""Baseline figures for both roles (the issue's bar, on fewer seeds than the 300 reported)."""

from __future__ import annotations

import statistics

import pytest

from benchmarks.fraud_baselines import measure
from env.fraud.environment import FraudEnvironment
from env.fraud.policies import POLICIES
from env.rollout import play

DEGENERATE = ("do_nothing", "freeze_everything", "cashout_at_once")


@pytest.fixture(scope="module")
def table():
    return measure(60)


@pytest.mark.parametrize("task", FraudEnvironment.tasks)
def test_heuristic_random_degenerate_and_oracle_keep_their_order(table, task):
    heuristic = table[(task, "heuristic")]["mean"]
    assert heuristic >= 0.60
    assert table[(task, "random")]["mean"] <= heuristic - 0.25
    for name in DEGENERATE:
        assert table[(task, name)]["mean"] <= heuristic - 0.20, name
    assert table[(task, "oracle")]["mean"] >= max(0.85, heuristic)
    assert all(row["internal_errors"] == 0 for row in table.values())


def test_doing_nothing_as_defender_scores_low(table):
    assert table[("defender", "do_nothing")]["mean"] <= 0.40


def test_policies_pick_their_role_from_the_observation():
    env = FraudEnvironment()
    for name, factory in POLICIES.items():
        for task in FraudEnvironment.tasks:
            episode = play(env, factory(5), task, 5)
            errors = [o.error for o in episode.observations if o.error and "tool;" in o.error]
            assert not errors, (name, task, errors)


class NoPeeking(FraudEnvironment):
    """Refuses to reveal the truth before the episode is over."""

    def reveal(self):
        if not self.done:
            raise AssertionError("reveal() before the end: this policy is not honest")
        return super().reveal()


@pytest.mark.parametrize("task", FraudEnvironment.tasks)
def test_honest_policies_never_read_the_truth(task):
    env = NoPeeking()
    totals = []
    for seed in range(20):
        for name in ("heuristic", "random", *DEGENERATE):
            report = play(env, POLICIES[name](seed), task, seed).report
            if name == "heuristic":
                totals.append(report.grade.total)
    assert statistics.mean(totals) >= 0.6
    with pytest.raises(AssertionError, match="not honest"):
        play(env, POLICIES["oracle"](0), task, 0)
