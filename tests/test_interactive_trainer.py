"""Interactive GRPO end to end: TRL's GRPOTrainer plays support episodes through the adapter.

The model is the tiny 2-layer model with the SmolLM2 tokenizer and TRL's qwen2_5 template (and its
compact-tool variant, which TRL does not know by name: pipeline/training/chat_templates.py); only its
``generate`` is scripted (it writes fixed tool calls chosen from the prompt), everything else is
TRL's real loop: tool-call parsing, tool execution, result tokens appended, rewards, loss masks.
Episode A follows the oracle's calls to a decision; episode B investigates and then stops without
one. The test reads the batch the trainer builds for the loss.
"""

from __future__ import annotations

import json
import os

import pytest
import torch

import env
from env.rollout import play
from pipeline.data.dataset import build_dataset
from pipeline.data.prompts import render_observation
from pipeline.training.interactive import environment_factory, tool_schemas
from rewards import build_reward_functions
from rewards.components import WRONG_DECISION_PENALTY

from conftest import tiny_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _call(action) -> str:
    payload = json.dumps({"name": action.tool, "arguments": action.arguments})
    return f"<tool_call>\n{payload}\n</tool_call>"


@pytest.fixture(scope="module", params=["full", "compact"])
def run(request):
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = tiny_model(style=request.param)
    tokenizer.padding_side = "left"
    dataset = build_dataset("support", ["easy"], n=2, mode="interactive")
    support = env.make("support")
    scripts, openings, episodes = {}, {}, {}
    for i, row in enumerate(dataset):
        episode = play(support, env.policies("support")["oracle"](0), row["task"], row["seed"])
        turns = [_call(a) for a in episode.actions] + ["The ticket is closed."]
        if i == 1:  # episode B: investigate, then answer in prose without deciding
            turns = turns[:2] + ["I cannot decide this ticket."]
        scripts[row["seed"]] = turns
        openings[row["seed"]] = render_observation(episode.observations[0])
        episodes[row["seed"]] = episode

    def seed_of(text: str) -> int:
        return next(seed for seed, opening in openings.items() if opening in text)

    def scripted_generate(input_ids, attention_mask=None, **kwargs):
        rows = []
        for ids in input_ids:
            text = tokenizer.decode(ids)
            turns = scripts[seed_of(text)]
            turn = turns[min(text.count("<tool_response>"), len(turns) - 1)]
            rows.append(tokenizer(turn, add_special_tokens=False)["input_ids"])
        width = max(len(r) for r in rows) + 1
        pad = tokenizer.pad_token_id
        out = [r + [tokenizer.eos_token_id] + [pad] * (width - len(r) - 1) for r in rows]
        return torch.cat([input_ids, torch.tensor(out, device=input_ids.device)], dim=1)

    model.generate = scripted_generate
    batches = []

    class RecordingTrainer(GRPOTrainer):
        def compute_loss(self, model, inputs, *args, **kwargs):
            batches.append(inputs)
            return super().compute_loss(model, inputs, *args, **kwargs)

    funcs, weights = build_reward_functions()
    args = GRPOConfig(
        output_dir="/tmp/test_interactive_trainer",
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=1536,
        max_tool_calling_iterations=8,
        max_steps=1,
        beta=0.0,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_steps=1,
        reward_weights=weights,  # TRL appends weight 1 for the environment's get_reward
    )
    trainer = RecordingTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=funcs,
        train_dataset=dataset,
        environment_factory=environment_factory("support"),
        args=args,
    )
    trainer.train()
    return {
        "trainer": trainer,
        "batch": batches[0],
        "tokenizer": tokenizer,
        "scripts": scripts,
        "episodes": episodes,
        "seed_of": seed_of,
        "log": trainer.state.log_history[0],
        "decided": int(dataset[0]["seed"]),
        "style": request.param,
    }


def test_scripted_tool_calls_ran_against_the_environment(run):
    adapters = run["trainer"].environments
    assert len(adapters) == 4
    for adapter in adapters:
        seed = adapter.env.seed
        episode = run["episodes"][seed]
        played = [(r.tool, r.arguments) for r in adapter.env.trace]
        expected = [(a.tool, a.arguments) for a in episode.actions]
        n = len(expected) if seed == run["decided"] else 2
        assert played == expected[:n]
        assert adapter.env.internal_errors == 0


def test_grade_is_the_reward_and_no_decision_earns_zero(run):
    adapters = run["trainer"].environments
    rewards = {a.env.seed: a.get_reward() for a in adapters}
    oracle = run["episodes"][run["decided"]].report.grade.total
    assert rewards[run["decided"]] == oracle > 0.5
    undecided = next(seed for seed in rewards if seed != run["decided"])
    assert rewards[undecided] == 0.0
    log = run["log"]
    assert log["rewards/SupportEnvironmentTools/mean"] == pytest.approx(oracle / 2)
    # The decomposed grade component reads the same finished episodes (environments kwarg); it
    # scores the undecided one as a wrong decision, where the adapter's own reward gives 0.
    assert log["rewards/grade_reward/mean"] == pytest.approx((oracle - WRONG_DECISION_PENALTY) / 2)
    assert log["tools/failure_frequency"] == 0.0


def test_tool_result_tokens_are_masked_out_of_the_loss(run):
    batch, tokenizer = run["batch"], run["tokenizer"]
    assert "tool_mask" in batch
    for prompt_ids, ids, mask, tool_mask in zip(
        batch["prompt_ids"],
        batch["completion_ids"],
        batch["completion_mask"],
        batch["tool_mask"],
        strict=True,
    ):
        seed = run["seed_of"](tokenizer.decode(prompt_ids))
        trained = tokenizer.decode(ids[(mask * tool_mask).bool()])
        masked = tokenizer.decode(ids[(mask * (1 - tool_mask)).bool()])
        turns = run["scripts"][seed]
        assert trained == "".join(turn + tokenizer.eos_token for turn in turns)
        assert "<tool_call>" not in masked
        results = run["episodes"][seed].observations[1:]
        if seed != run["decided"]:
            results = results[:2]
        assert masked.count("<tool_response>") == len(results)
        for observation in results:
            assert render_observation(observation) in masked


def test_prompts_list_the_tools_in_the_template_style(run):
    batch, tokenizer = run["batch"], run["tokenizer"]
    prompt = tokenizer.decode(batch["prompt_ids"][0], skip_special_tokens=False)
    tools = prompt.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].splitlines()
    names = sorted(s.name for s in env.env_class("support").tool_specs())  # TRL's order
    # evaluation and the warm start render the list TRL renders
    assert [schema["function"]["name"] for schema in tool_schemas("support")] == names
    assert len(tools) == len(names)
    if run["style"] == "compact":
        assert [line.split("(")[0] for line in tools] == [f"- {n}" for n in names]
    else:
        assert [json.loads(line)["function"]["name"] for line in tools] == names
