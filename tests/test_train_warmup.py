"""SFT warm start: the heuristic's plans on the training prompts, then a few SFT steps."""

from __future__ import annotations

import json
from pathlib import Path

from env.registry import make
from env.rollout import replay
from env.seeds import split_of
from pipeline.data.dataset import build_dataset
from pipeline.training.config import load_config
from pipeline.training.model import load_model_and_tokenizer
from pipeline.training.trainer import build_grpo_config
from pipeline.training.warmup import (
    ID_PATTERN,
    blind_decision_examples,
    blind_plan,
    heuristic_conversations,
    heuristic_examples,
    prompt_grouped,
    sft_warmup,
    tokenize_conversations,
)
from rewards import parse_tool_calls

from conftest import smollm2_tokenizer

ROOT = Path(__file__).resolve().parents[1]


def test_warmup_examples_are_the_heuristic_plans_of_train_episodes() -> None:
    prompts = build_dataset(["support"], n=3, split="train")
    examples = heuristic_examples(prompts)
    env = make("support")
    for prompt_row, example in zip(prompts, examples, strict=True):
        assert example["prompt"] == prompt_row["prompt"]
        assert split_of(prompt_row["seed"]) == "train"
        calls = parse_tool_calls(example["completion"][0]["content"]).calls
        assert calls, "the heuristic plan renders as parseable tool calls"
        report = replay(env, prompt_row["task"], prompt_row["seed"], calls)
        assert report.grade.total == example["grade"]


def test_sft_warmup_runs_the_requested_steps_and_lowers_the_loss(tmp_path: Path) -> None:
    cfg = load_config(
        ROOT / "configs/cpu.yaml",
        ["model.backend=tiny", "data.envs=[support]", f"output_dir={tmp_path}"],
    )
    model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.peft)
    dataset = build_dataset(["support"], n=2, split="train")
    summary = sft_warmup(model, tokenizer, dataset, 6, cfg, build_grpo_config(cfg, [1.0]))
    assert summary["steps"] == 6
    assert summary["losses"][-1] < summary["losses"][0]


def test_interactive_warmup_is_the_heuristic_episode_as_a_tool_conversation() -> None:
    """The conversation TRL's environment_factory would hold: opening appended to the prompt,
    one call per assistant turn, each result as the tool message the adapter returns."""
    from pipeline.training.interactive import environment_factory, tool_schemas

    prompts = build_dataset(["aml"], ["easy"], n=2, split="train", mode="interactive")
    rows = heuristic_conversations(prompts)
    for row, example in zip(prompts, rows, strict=True):
        adapter = environment_factory("aml")()
        opening = adapter.reset(**{k: row[k] for k in ("env", "task", "seed")})
        messages = example["messages"]
        assert messages[1]["content"] == row["prompt"][-1]["content"] + opening
        turns = messages[len(row["prompt"]) :]
        assert [m["role"] for m in turns] == ["assistant", "tool"] * (len(turns) // 2)
        for call_turn, result in zip(turns[::2], turns[1::2], strict=True):
            (call,) = call_turn["tool_calls"]
            name, arguments = call["function"]["name"], call["function"]["arguments"]
            assert None not in arguments.values(), "only the call's own arguments"
            assert result["content"] == getattr(adapter, name)(**arguments)
        assert adapter.env.report().decision_reached
        assert example["tools"] == tool_schemas("aml")


def test_interactive_sft_warmup_trains_the_assistant_turns_only(tmp_path: Path) -> None:
    cfg = load_config(
        ROOT / "configs/cpu_interactive.yaml",
        ["model.backend=tiny", "data.envs=[support]", "data.tasks=null", f"output_dir={tmp_path}"],
    )
    model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.peft)
    dataset = build_dataset(["support"], n=2, split="train", mode="interactive")
    summary = sft_warmup(model, tokenizer, dataset, 4, cfg, build_grpo_config(cfg, [1.0]))
    assert summary["steps"] == 4
    assert summary["losses"][-1] < summary["losses"][0]
    # The tokens SFT trains on (the training template's assistant mask) are the heuristic's calls
    # exactly as it made them, never the prompt or the tool results.
    conversation = heuristic_conversations(dataset)[0]
    (encoded,) = tokenize_conversations([conversation], tokenizer)
    ids, mask = encoded["input_ids"], encoded["assistant_masks"]
    trained = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
    calls = [
        {
            "tool": m["tool_calls"][0]["function"]["name"],
            "arguments": m["tool_calls"][0]["function"]["arguments"],
        }
        for m in conversation["messages"]
        if m["role"] == "assistant"
    ]
    assert parse_tool_calls(trained).calls == calls
    results = [m["content"] for m in conversation["messages"] if m["role"] == "tool"]
    assert not any(r.strip() and r.strip() in trained for r in results)


def test_interactive_sft_examples_carry_no_other_tools_arguments() -> None:
    """Arrow would store all calls' arguments under one struct of every tool's keys (null where
    absent); the tokenized AML examples must render each call with its own arguments only."""
    tokenizer = smollm2_tokenizer("compact")
    prompts = build_dataset(["aml"], ["easy"], n=2, split="train", mode="interactive")
    conversations = heuristic_conversations(prompts)
    examples = tokenize_conversations(conversations, tokenizer)
    for conversation, example in zip(conversations, examples, strict=True):
        ids = [
            t for t, m in zip(example["input_ids"], example["assistant_masks"], strict=True) if m
        ]
        trained = tokenizer.decode(ids)
        assert "null" not in trained
        actions = [m["tool_calls"][0]["function"] for m in conversation["messages"][2::2]]
        assert parse_tool_calls(trained).calls == [
            {"tool": a["name"], "arguments": a["arguments"]} for a in actions
        ]
        assert len(ids) < 60 * len(actions), "a call costs tens of tokens, not hundreds"


def test_blind_plan_keeps_only_what_the_prompt_shows() -> None:
    plan = [
        {"tool": "review_alert", "arguments": {"alert_id": "AL-1"}},
        {"tool": "request_wire_trace", "arguments": {"transaction_id": "T-99"}},
        {"tool": "write_to_case_file", "arguments": {"note": "Keep: C-7, T-99, SOF-3"}},
        {
            "tool": "file_sar",
            "arguments": {
                "findings": "layering; evidence: T-99, T-98",
                "typology": "layering",
                "entities_involved": ["C-7", "C-8"],
            },
        },
    ]
    assert blind_plan(plan, "Alert AL-1 on C-7") == [
        {"tool": "review_alert", "arguments": {"alert_id": "AL-1"}},
        {"tool": "write_to_case_file", "arguments": {"note": "Keep: C-7"}},
        {
            "tool": "file_sar",
            "arguments": {
                "findings": "layering; evidence:",
                "typology": "layering",
                "entities_involved": ["C-7"],
            },
        },
    ]


def test_aml_warmup_targets_cite_only_ids_of_their_prompt() -> None:
    prompts = build_dataset(["aml"], ["easy"], n=4, split="train", prompt_style="compact")
    examples = heuristic_examples(prompts)
    env = make("aml")
    for row, example in zip(prompts, examples, strict=True):
        visible = "\n".join(m["content"] for m in row["prompt"])
        completion = example["completion"][0]["content"]
        assert set(ID_PATTERN.findall(completion)) <= set(ID_PATTERN.findall(visible))
        calls = parse_tool_calls(completion).calls
        assert calls[-1]["tool"] in ("file_sar", "close_alert")
        assert replay(env, row["task"], row["seed"], calls).grade.total == example["grade"]


def test_adapter_weights_load_into_a_fresh_lora_model(tmp_path: Path) -> None:
    import dataclasses

    import pytest
    import torch

    from pipeline.training.model import load_adapter_weights

    cfg = load_config(ROOT / "configs/cpu.yaml", ["model.backend=tiny", f"output_dir={tmp_path}"])
    trained, _ = load_model_and_tokenizer(cfg.model, cfg.peft)
    lora = {n: p for n, p in trained.named_parameters() if "lora_B" in n}
    with torch.no_grad():
        for p in lora.values():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(0)))
    trained.save_pretrained(str(tmp_path / "adapter"))
    fresh, _ = load_model_and_tokenizer(cfg.model, cfg.peft)
    before = dict(fresh.named_parameters())
    assert not any(torch.equal(before[n], p) for n, p in lora.items())
    copied = load_adapter_weights(fresh, tmp_path / "adapter")
    assert copied == len([n for n, _ in trained.named_parameters() if "lora_" in n])
    after = dict(fresh.named_parameters())
    assert all(torch.equal(after[n], p) for n, p in lora.items())
    with pytest.raises(FileNotFoundError, match="no adapter weights"):
        load_adapter_weights(fresh, tmp_path / "missing")
    wider, _ = load_model_and_tokenizer(cfg.model, dataclasses.replace(cfg.peft, r=4))
    with pytest.raises(ValueError, match="does not fit"):
        load_adapter_weights(wider, tmp_path / "adapter")


def test_steps_warm_start_teaches_both_decisions_and_the_diagnostic_the_evidence() -> None:
    """The admissible steps warm start (blind_decision) teaches every case both decisions, once
    each, so no decision can be learnt as a function of the case; the reference's replies (only
    for benchmarks/steps_sft_ceiling.py) carry the right decision, one per row."""
    rows = build_dataset("aml", ["easy"], n=24, mode="steps", prompt_style="compact")
    env = make("aml")
    truth = []
    for row in rows:
        env.reset(seed=row["seed"], task=row["task"])
        truth.append(not env.reveal()["clean"])

    reference = blind_decision_examples(rows, "reference")
    assert [e["prompt"] for e in reference] == [r["prompt"] for r in rows]
    assert ["file_sar" in e["completion"][0]["content"] for e in reference] == truth

    blind = blind_decision_examples(rows, "blind_decision")
    assert [e["prompt"] for e in blind] == [r["prompt"] for r in rows for _ in (0, 1)]
    replies = [e["completion"][0]["content"] for e in blind]
    for coin, other in zip(replies[::2], replies[1::2], strict=True):
        assert {"file_sar" in coin, "file_sar" in other} == {True, False}
        assert {"close_alert" in coin, "close_alert" in other} == {True, False}
    again = blind_decision_examples(rows, "blind_decision")
    assert [e["completion"] for e in again] == [e["completion"] for e in blind]  # seeded coins

    grouped = prompt_grouped(blind, seed=7)
    prompts = [json.dumps(e["prompt"]) for e in grouped]
    assert all(a == b for a, b in zip(prompts[::2], prompts[1::2], strict=True))  # pairs adjacent
    assert sorted(json.dumps(e, sort_keys=True) for e in grouped) == sorted(
        json.dumps(e, sort_keys=True) for e in blind
    )  # every example kept, once
    assert prompts != [json.dumps(e["prompt"]) for e in blind]  # the cuts come shuffled
    assert [e["completion"] for e in prompt_grouped(blind, seed=7)] == [
        e["completion"] for e in grouped
    ]  # seeded


def test_the_cpu_steps_reply_cap_holds_every_decision_reply_the_warm_start_and_reference_write():
    """A filing cites every evidence id, so right replies at decision cuts run long (33-183
    SmolLM2 tokens over 200 cuts): a cap below them cuts the right answer off undecided."""
    cfg = load_config(ROOT / "configs/cpu_steps.yaml")
    cap = cfg.training["max_completion_length"]
    rows = build_dataset("aml", ["easy"], n=48, mode="steps", prompt_style="compact")
    tokenizer = smollm2_tokenizer()
    for policy in ("reference", "blind_decision"):
        for example in blind_decision_examples(rows, policy):
            reply = example["completion"][0]["content"]
            assert len(tokenizer(reply)["input_ids"]) + 1 <= cap, (policy, reply)  # + end token
