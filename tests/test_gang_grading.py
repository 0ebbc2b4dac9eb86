"""Gang grading: precision, recall, unused steps; clean episodes; no decision, no credit."""

from __future__ import annotations

from env.gang.config import DEFAULT_TASKS, GangConfig
from env.gang.environment import GangEnvironment
from env.gang.grading import grade_flags

from conftest import call

CFG = GangConfig()
EASY = DEFAULT_TASKS["easy"]


def test_precision_recall_and_efficiency_components():
    g = grade_flags({1, 2, 3, 9}, {1, 2, 3, 4, 5, 6}, 10, True, CFG, EASY, 30)
    assert g.components["precision"] == 0.75 and g.components["recall"] == 0.5
    assert abs(g.components["efficiency"] - 2 / 3) < 1e-3
    assert abs(g.total - (0.45 * 0.5 + 0.40 * 0.75 + 0.15 * (2 / 3))) < 1e-3
    assert g.components["success"] == 0.0


def test_win_rule_is_reported_as_success():
    g = grade_flags({1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6}, 12, True, CFG, EASY, 30)
    assert g.components["success"] == 1.0
    hard = grade_flags(
        {1, 2, 3, 4, 5}, {1, 2, 3, 4, 5, 6}, 12, True, CFG, DEFAULT_TASKS["hard"], 80
    )
    assert hard.components["success"] == 0.0


def test_empty_submission_scores_only_on_clean_episodes():
    clean = grade_flags(set(), set(), 1, True, CFG, EASY, 30)
    assert clean.total > 0.95 and clean.decision == "no_gang" and clean.components["decision"] == 1
    # a "gang" call is right only when it names a gang member, and speed counts only then
    missed = grade_flags({4}, {1, 2}, 2, True, CFG, EASY, 30)
    assert missed.components["decision"] == 0 and missed.total == 0.0
    assert grade_flags({4, 1}, {1, 2}, 2, True, CFG, EASY, 30).components["decision"] == 1
    assert grade_flags(set(), {1, 2}, 1, True, CFG, EASY, 30).total < 0.16
    two_false = grade_flags({7, 8}, set(), 3, True, CFG, EASY, 30)
    assert two_false.components["precision"] < 0.34 and two_false.total < 0.5


def test_no_decision_gets_no_credit():
    g = grade_flags({1, 2}, {1, 2}, 30, False, CFG, EASY, 30)
    assert g.total == 0.0 and g.decision is None and g.components["decision"] == 0.0


def test_episode_grade_and_coverage_through_the_tools():
    env = GangEnvironment()
    seed = next(s for s in range(40) if env.reset(seed=s, task="easy") and env.reveal()["gang"])
    env.reset(seed=seed, task="easy")
    gang = env.reveal()["gang"]
    env.step(call("inspect", account_id=gang[0]))
    assert env.report().metrics["evidence_coverage"] == round(1 / len(gang), 4)
    for x in gang:
        env.step(call("flag", account_id=x))
    obs = env.step(call("submit"))
    assert obs.done and obs.grade.components["precision"] == 1.0
    assert obs.grade.components["recall"] == 1.0 and obs.grade.decision == "gang"
    assert env.report().decision_reached


def test_step_limit_without_submit_scores_zero():
    env = GangEnvironment()
    obs = env.reset(seed=2, task="easy")
    target = obs.result["alerts"][0]["account_id"]
    for _ in range(obs.steps_left):
        obs = env.step(call("inspect", account_id=target))
    assert obs.done and obs.grade.total == 0.0 and obs.grade.decision is None
