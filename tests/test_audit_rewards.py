"""Reward-hacking audit: the honest plan beats every degenerate strategy by a clear margin."""

from __future__ import annotations

import importlib.util
import random

import pytest

from env.registry import make, names
from env.seeds import split_seeds
from rewards.audit import HONEST, audit, degenerate_completions
from rewards.score import score_batch

# The margin stated in rewards/README.md: honest mean total minus the best degenerate's, AML.
AML_MARGIN = 1.0
OTHER_MARGIN = 0.2
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
}


def _available(name: str) -> bool:
    try:
        return all(
            importlib.util.find_spec(f"env.{name}.{part}") for part in ("environment", "policies")
        )
    except ModuleNotFoundError:
        return False


def test_aml_honest_plan_beats_every_degenerate_on_every_difficulty():
    if not _available("aml"):
        pytest.skip("env.aml is not importable yet")
    table = audit("aml", n_seeds=200)
    assert set(table.totals) >= SYNTHETIC
    assert {"policy:always_file", "policy:tool_spam", "policy:os_spam_then_file"} <= set(
        table.totals
    )
    for task in ("easy", "medium", "hard"):
        margin, rival = table.margin(task)
        assert margin >= AML_MARGIN, (task, rival, table.markdown())
        assert table.totals[HONEST][task] > table.totals["prose_only"][task] == 0.0


@pytest.mark.parametrize("env_name", [n for n in names() if n != "aml"])
def test_other_envs_honest_plan_beats_every_degenerate(env_name):
    if not _available(env_name):
        pytest.skip(f"env.{env_name} is not importable yet")
    table = audit(env_name, n_seeds=6)
    for task in table.tasks:
        margin, rival = table.margin(task)
        assert margin >= OTHER_MARGIN, (task, rival, table.markdown())


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
