"""Receding-horizon play of steps-trained models (``pipeline.evaluation.model_policy``, mode ``steps``).

The conversation a model sees at test time must be the steps prompt it was trained on: at each
turn, the policy's messages equal the training row cut at that point. A backend that answers
every turn with the rest of the reference trajectory (a deterministic stand-in for a perfect
steps model: its reply is a plan, exactly what the steps rewards score) must replay the
reference episode call for call, whatever the horizon; the tiny real model plays to the step limit
without a crash.
"""

from __future__ import annotations

from typing import Any

import pytest

import env as registry
from env.rollout import play
from pipeline.data.dataset import build_rows
from pipeline.data.steps import reference
from pipeline.evaluation.backends import GenerationSettings
from pipeline.evaluation.model_policy import ModelPolicy, text_protocol
from rewards.protocol import render_completion

SEED_INDEX = 0


class ReferenceBackend:
    """Answers each turn with the remaining calls of the reference trajectory (text protocol)."""

    tool_messages_need_ids = False

    def __init__(self, ref: Any) -> None:
        self.ref = ref
        self.prompts: list[list[dict[str, Any]]] = []

    def complete(self, messages, tools, seed):
        assert tools is None  # steps prompts list the tools in the system message
        self.prompts.append([dict(m) for m in messages])
        done = sum(1 for m in messages if m.get("tool_calls"))
        return {"role": "assistant", "content": render_completion(self.ref.rest(done))}

    def tool_schemas(self, env_name):
        return []


@pytest.mark.parametrize("name", ["aml", "support"])
@pytest.mark.parametrize("horizon", ["receding", "whole"])
def test_receding_play_sees_the_training_prompts_and_replays_the_reference(name, horizon):
    rows = build_rows(name, None, 1, "eval", mode="steps", cuts="all", result_style="compact")
    row = rows[0]
    environment = registry.make(name)
    ref = reference(environment, row["task"], row["seed"])
    backend = ReferenceBackend(ref)
    settings = GenerationSettings(prompt_style="full", result_style="compact", horizon=horizon)
    policy = ModelPolicy(backend, name, "steps", 0, settings)
    episode = play(environment, policy, row["task"] or None, row["seed"])
    played = ref.calls[: len(episode.plan)]
    assert episode.plan == played and episode.report.decision_reached
    if horizon == "receding":
        # One reply per call played, each from exactly the prompt of that cut in training.
        assert len(backend.prompts) == len(episode.plan)
        for cut, prompt in enumerate(backend.prompts[: len(rows)]):
            assert prompt == rows[cut]["prompt"]
    else:
        assert len(backend.prompts) == 1  # the whole first plan ran


def test_openai_endpoints_get_the_earlier_calls_as_text() -> None:
    row = build_rows("aml", ["easy"], 1, "eval", mode="steps", cuts="decision")[0]
    messages = text_protocol(row["prompt"])
    assert [m["role"] for m in messages[:4]] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"].startswith("<tool_call>{")
    assert messages[3]["content"].startswith("<tool_response>\n")
    assert not any("tool_calls" in m or m["role"] == "tool" for m in messages)


def test_tiny_checkpoint_plays_steps_mode_to_the_end(tmp_path) -> None:
    from transformers import AutoTokenizer

    from pipeline.evaluation.model_policy import make_model_policy
    from pipeline.training.model import apply_tool_chat_template, build_tiny_model, smollm2_path

    tokenizer = apply_tool_chat_template(AutoTokenizer.from_pretrained(smollm2_path()))
    build_tiny_model(tokenizer, seed=5).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    policy = make_model_policy(
        f"checkpoint:{tmp_path}",
        "support",
        "steps",
        plan_max_new_tokens=8,
        max_idle_turns=2,
        train_template=True,
    )
    episode = play(registry.make("support", max_steps=4), policy, "easy", 7)
    assert episode.report.steps == 4 and not episode.report.decision_reached
    assert policy.turns == 2  # two idle turns, then the step limit ends it without decoding
    assert all(m["role"] != "assistant" or m.get("tool_calls") for m in policy.messages)
