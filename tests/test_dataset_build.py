"""Prompt datasets: columns, seeds from disjoint splits, even tasks, mixing, prompt contents."""

from __future__ import annotations

from collections import Counter

import pytest

from env.registry import env_class
from env.seeds import split_of
from pipeline.data.dataset import build_dataset
from pipeline.data.prompts import system_prompt
from rewards.parsing import parse_tool_calls
from rewards.protocol import render_completion

ENV = "support"


def test_rows_have_the_contract_columns_and_a_system_user_prompt():
    ds = build_dataset(ENV, n=6, split="train")
    assert ds.column_names == ["prompt", "env", "task", "seed", "split"]
    row = ds[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["prompt"][0]["content"] == system_prompt(ENV, "plan")
    assert row["env"] == ENV and row["split"] == "train"
    assert "Steps left" in row["prompt"][1]["content"]


def test_train_and_eval_seeds_never_overlap_and_tasks_cycle_evenly():
    train = build_dataset(ENV, n=9, split="train")
    evals = build_dataset(ENV, n=9, split="eval")
    assert not set(train["seed"]) & set(evals["seed"])
    assert {split_of(s) for s in evals["seed"]} == {"eval"}
    assert Counter(train["task"]) == {t: 3 for t in env_class(ENV).tasks}
    more = build_dataset(ENV, n=3, split="train", seed_offset=9)
    assert not set(more["seed"]) & set(train["seed"])


def test_same_arguments_build_the_same_dataset():
    a = build_dataset(ENV, tasks=["hard"], n=4, split="eval")
    b = build_dataset(ENV, tasks=["hard"], n=4, split="eval")
    assert a.to_list() == b.to_list() and set(a["task"]) == {"hard"}


def test_several_environments_interleave():
    ds = build_dataset([ENV, "gang"], tasks=["easy"], n=2)
    assert ds["env"] == [ENV, "gang", ENV, "gang"]
    assert ds[1]["prompt"][0]["content"] == system_prompt("gang", "plan")


def test_unknown_task_or_mode_is_a_clear_error():
    with pytest.raises(ValueError, match="none of the tasks"):
        build_dataset(ENV, tasks=["impossible"], n=1)
    with pytest.raises(ValueError, match="unknown mode"):
        build_dataset(ENV, n=1, mode="chatty")


def test_plan_prompt_lists_every_tool_and_the_output_format():
    text = system_prompt(ENV, "plan")
    for spec in env_class(ENV).tool_specs():
        assert spec.signature() in text
    assert '<tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>' in text
    assert "close_ticket" in text.split("End with exactly one terminal tool")[1]


def test_interactive_prompt_leaves_tools_to_the_template_and_user_is_a_header():
    text = system_prompt(ENV, "interactive")
    assert "one at a time" in text and "fetch_user_data(" not in text
    row = build_dataset(ENV, n=1, mode="interactive")[0]
    assert row["prompt"][1]["content"].endswith("\n\n")


def test_render_completion_parses_back_to_the_plan():
    plan = [
        {"tool": "fetch_user_data", "arguments": {"customer_id": "C-1"}},
        {"tool": "close_ticket", "arguments": {"resolution": "resolved", "note": "a {b} [c]"}},
    ]
    assert parse_tool_calls(render_completion(plan)).calls == plan


def test_compact_plan_prompt_keeps_every_signature_and_drops_the_notes():
    full, compact = system_prompt("aml", "plan"), system_prompt("aml", "plan", "compact")
    assert len(compact) < 0.7 * len(full)
    for spec in env_class("aml").tool_specs():
        assert f"- {spec.signature()}\n" in compact + "\n"
        assert spec.description.split()[0] in full
    assert not [line for line in compact.splitlines() if line.startswith("    ")]
    assert compact.endswith(full.split("## Output format")[1]) and "## Output format" in compact
    rows = build_dataset("aml", ["easy"], n=2, mode="plan", prompt_style="compact")
    assert rows[0]["prompt"][0]["content"] == compact
    assert system_prompt("aml", "interactive", "compact") == system_prompt("aml", "interactive")
    with pytest.raises(ValueError, match="prompt style"):
        system_prompt("aml", "plan", "tiny")
