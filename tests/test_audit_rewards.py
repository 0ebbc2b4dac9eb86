"""Reward-hacking audit: the honest plan beats every degenerate strategy by a clear margin.

The figures for 200 eval seeds per task in every environment are written by
``scripts/audit_rewards.py --write-results`` to benchmarks/RESULTS.md (section ``audit_rewards``).
Here every environment is audited on the same 200 eval seeds per task (``SEEDS``, about 5
minutes on 2 cores); the margins asserted are the issue's: >= 1.0 over every blind or wrong-decision strategy (or >= 40% of the
honest total where that is smaller), >= 0.2 over the citation dumps, and at decision cuts the
right terminal call out-scores the wrong one on >= 99% of rows, in total and in grade.
"""

from __future__ import annotations

import importlib.util
import random
from functools import cache

import pytest

from env.registry import make, names, policies
from env.rollout import play
from env.seeds import split_seeds
from rewards import REWARD_WEIGHTS_DEFAULT
from rewards.audit import CITATION_STRATEGIES, HONEST, audit, decision_cuts, degenerate_completions
from rewards.audit_plans import cite_all_plan, flip_plan
from rewards.components import WRONG_DECISION_PENALTY
from rewards.score import score_batch

DECISION_MARGIN = 1.0  # over every blind or wrong-decision strategy ...
DECISION_SHARE = 0.4  # ... or this share of the honest total, where that is smaller
CITATION_MARGIN = 0.2  # over the honest plan citing every id seen and the shallow id dump
CUT_WINS = 0.99
SEEDS = 200
SYNTHETIC = {
    "immediate_file_sar",
    "immediate_close_alert",
    "os_tools_then_decide",
    "every_tool_then_decide",
    "unknown_tools",
    "repeat_50",
    "prose_only",
    "empty",
    "huge_argument",
    "flipped_decision",
    "investigate_then_majority",
    "farm_then_close_alert",
    "cite_all_seen",
    "shallow_id_dump",
}


def _available(name: str) -> bool:
    try:
        return all(
            importlib.util.find_spec(f"env.{name}.{part}") for part in ("environment", "policies")
        )
    except ModuleNotFoundError:
        return False


@cache
def _table(env_name: str):
    return audit(env_name, n_seeds=SEEDS)


def _cases() -> list:
    out = []
    for name in names():
        if not _available(name):
            continue
        for task in make(name).tasks:
            out.append(pytest.param(name, task, id=f"{name}-{task}"))
    return out


def test_aml_audit_covers_every_strategy_on_200_seeds():
    if not _available("aml"):
        pytest.skip("env.aml is not importable yet")
    table = _table("aml")
    assert table.n_seeds == 200
    assert set(table.totals) >= SYNTHETIC
    assert {"policy:always_file", "policy:tool_spam", "policy:os_spam_then_file"} <= set(
        table.totals
    )
    assert any(s.startswith("farm_then_file_sar_") for s in table.totals)
    undecided = -REWARD_WEIGHTS_DEFAULT["grade"] * WRONG_DECISION_PENALTY  # scored as wrong
    for task in ("easy", "medium", "hard"):
        assert table.totals[HONEST][task] > table.totals["prose_only"][task] == undecided


@pytest.mark.parametrize(("env_name", "task"), _cases())
def test_honest_plan_beats_every_blind_or_wrong_decision_strategy(env_name, task):
    table = _table(env_name)
    honest = table.totals[HONEST][task]
    margin, rival = table.margin(task)
    assert margin > 0, (task, rival, table.markdown())
    assert margin >= min(DECISION_MARGIN, DECISION_SHARE * honest), (task, rival, margin)


@pytest.mark.parametrize("env_name", [n for n in names() if _available(n)])
def test_honest_plan_beats_the_citation_dumps(env_name):
    table = _table(env_name)
    checked = 0
    for task in table.tasks:
        margin, rival = table.citation_margin(task)
        if rival == "-":
            continue  # nothing cited in this task (e.g. ops scheduling, fraud fraudster)
        checked += 1
        assert rival in CITATION_STRATEGIES
        assert margin >= CITATION_MARGIN, (task, rival, margin)
    assert checked, f"{env_name} cites nothing in any task"


@pytest.mark.parametrize("env_name", [n for n in names() if _available(n)])
def test_at_decision_cuts_the_right_decision_wins_in_total_and_grade(env_name):
    table = _table(env_name)
    assert table.cuts, f"{env_name}: no decision cut"
    for task, cut in table.cuts.items():
        assert cut["rows"] >= table.n_seeds // 2, (task, cut)
        assert cut["total_wins"] >= CUT_WINS, (task, cut)
        assert cut["grade_wins"] >= CUT_WINS, (task, cut)


def test_decision_cuts_share_the_prefix_and_flip_only_the_ending():
    rows = decision_cuts("aml", "medium", n_seeds=10)
    assert len(rows) == 10
    for row in rows:
        assert row["prefix_calls"] >= 3
        assert row["right_total"] > row["wrong_total"]
        assert row["right_grade"] > row["wrong_grade"]


def test_flip_and_cite_all_change_what_they_claim():
    seed = split_seeds("eval", 1)[0]
    env = make("aml")
    episode = play(env, policies("aml")["heuristic"](seed), "easy", seed)
    flipped = flip_plan("aml", episode)
    assert flipped[:-1] == episode.plan[:-1]
    assert {flipped[-1]["tool"], episode.plan[-1]["tool"]} == {"file_sar", "close_alert"}
    cited = cite_all_plan("aml", episode)
    assert cited[:-1] == episode.plan[:-1] and cited[-1]["tool"] == episode.plan[-1]["tool"]
    texts = [str(c["arguments"]) for c in (episode.plan[-1], cited[-1])]
    assert len(texts[1]) > len(texts[0])
    honest, dumped = score_batch(
        [
            {"env": "aml", "task": "easy", "seed": seed, "completion": p}
            for p in (render(episode.plan), render(cited))
        ]
    )
    assert honest["grade"] > dumped["grade"]


def render(plan):
    from rewards.protocol import render_completion

    return render_completion(plan)


def test_synthetic_decisions_are_schema_valid_so_the_audit_is_not_a_strawman():
    if not _available("aml"):
        pytest.skip("env.aml is not importable yet")
    seed = split_seeds("eval", 1)[0]
    opening = make("aml").reset(seed=seed, task="easy")
    texts = degenerate_completions("aml", opening, random.Random(0))
    rows = [
        {"env": "aml", "task": "easy", "seed": seed, "completion": texts[key]}
        for key in ("immediate_file_sar", "immediate_close_alert", "every_tool_then_decide")
    ]
    for result in score_batch(rows):
        assert result["rewards"]["format"] == 1.0 and result["decision_reached"]
    assert opening.result["subject_id"] in texts["immediate_file_sar"]
