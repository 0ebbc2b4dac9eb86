"""benchmarks/plan_ceiling.py: blind plans replayed on eval seeds, scored by the reward functions."""

from __future__ import annotations

import re

from benchmarks.plan_ceiling import blind_plan, main
from env.seeds import split_of
from pipeline.data.dataset import build_rows


def test_blind_plans_use_only_prompt_ids_and_a_rule_effect_pays(capsys) -> None:
    row = build_rows("aml", ["easy"], 1, "eval", 0, "plan", "compact")[0]
    prompt_ids = set(re.findall(r"\b[A-Z]{1,4}-\d+\b", row["prompt"][-1]["content"]))
    plan = blind_plan(row, "+ rule mode with an effect", "layering")
    used = {v for call in plan for v in call["arguments"].values() if isinstance(v, str)}
    assert {u for u in used if re.fullmatch(r"[A-Z]{1,4}-\d+", u)} <= prompt_ids
    assert split_of(row["seed"]) == "eval"

    assert main(["--episodes", "8", "--n-train", "8", "--no-results"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    rewards = {
        tuple(c.strip() for c in line.split("|")[1:3]): float(line.split("|")[5])
        for line in table[1:]
    }
    assert len(rewards) == 4
    assert (
        rewards[("+ rule mode with an effect", "mule_ring")]
        > rewards[("warm start's plan", "mule_ring")]
    )
