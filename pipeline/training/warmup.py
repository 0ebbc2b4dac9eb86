"""Format warm start: a few SFT steps on the honest heuristic's plans before GRPO.

A small model at the start of GRPO rarely writes a parseable tool call, so every completion in a
group scores the same and the group teaches nothing (``frac_reward_zero_std`` = 1). The warm start
plays the registered ``heuristic`` policy (it reads observations only, never the hidden truth) on the
very prompts of the training dataset (train seeds only, so no evaluation world leaks in), renders
each played episode as a plan-mode completion, and runs TRL's SFTTrainer for N steps on those
prompt/completion pairs (loss on the completion only). The same LoRA model then goes on to GRPO.

Interactive mode learns another format: the tools arrive in the chat template (JSON schemas, or
signature lines with ``prompt_style: compact``) and each turn answers the tool results before it. A plan-mode warm start does not carry over to it
(SmolLM2-135M copied the schemas as call arguments, benchmarks/RESULTS.md), so there the heuristic's
episode becomes the conversation TRL's ``environment_factory`` would hold: the prompt with the
opening observation appended, one assistant tool call per turn, each result as a tool message. The
loss covers the assistant turns only (TRL's ``assistant_only_loss``).

The heuristic plays interactively, so its calls cite ids it read in tool results (transactions,
source-of-funds files, trace jobs). A plan is written before any result is seen: imitating those ids
would teach the model to invent them. ``blind_plan`` keeps what the prompt supports: calls whose id
arguments appear in the prompt, and free text with unseen ids taken out.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SFT_LEARNING_RATE = 2e-4
"""LoRA SFT on a few hundred tokens of plans: the usual LoRA rate learns the format in tens of steps
(lower rates left plans without a decision: TRAINING.md, "Format warm start")."""

INTERACTIVE_SFT_LEARNING_RATE = 5e-4
"""Interactive conversations are thousands of tokens, so a CPU affords fewer steps than plan mode
takes: a higher LoRA rate makes each of them count. Each step is one conversation, since padding
two to the longer one costs up to half again as much."""


STEPS_SFT_LEARNING_RATE = 1e-3
"""Steps examples are a 2-3k-token decision cut and a ~60-token terminal call, so a CPU affords a
handful of steps: a high LoRA rate makes each of them count (the rates tried: benchmarks/RESULTS.md,
learning_cpu notes)."""


ID_PATTERN = re.compile(r"\b[A-Z]{1,4}-\d+\b")
"""Entity and evidence ids of every environment (C-38047, T-238880, AL-265743, INV-..., JOB-...)."""


def _scrub(text: str, seen: set[str]) -> str:
    """Free text with the ids outside ``seen`` removed and the separators they leave tidied."""
    text = ID_PATTERN.sub(lambda m: m.group(0) if m.group(0) in seen else "", text)
    text = re.sub(r"(\s*,)+\s*(?=,|;|$)", "", text)
    text = re.sub(r"(\s*,\s*){2,}", ", ", text)
    return re.sub(r"\s{2,}", " ", text).strip(" ,;")


def blind_plan(plan: list[Any], visible: str) -> list[dict[str, Any]]:
    """The calls of ``plan`` a model could write having read only ``visible`` (the prompt).

    A call whose argument is exactly an id not in ``visible`` is dropped (it needs a result the
    plan never sees); unseen ids leave free text and lists; everything else is kept verbatim."""
    seen = set(ID_PATTERN.findall(visible))
    kept = []
    for call in plan:
        tool, arguments = (
            (call["tool"], call["arguments"])
            if isinstance(call, dict)
            else (
                call.tool,
                call.arguments,
            )
        )
        args: dict[str, Any] = {}
        for key, value in arguments.items():
            if isinstance(value, str) and ID_PATTERN.fullmatch(value.strip()):
                if value.strip() not in seen:
                    break
            elif isinstance(value, str):
                value = _scrub(value, seen)
            elif isinstance(value, list):
                value = [
                    v
                    for v in value
                    if not isinstance(v, str) or v in seen or not ID_PATTERN.fullmatch(v)
                ]
            args[key] = value
        else:
            kept.append({"tool": tool, "arguments": args})
    return kept


def _heuristic_episodes(dataset: Any) -> Iterator[tuple[dict[str, Any], Any, Any]]:
    """``(row, env, episode)``: the honest heuristic played on each training row's episode."""
    from env.registry import make, policies
    from env.rollout import play

    envs: dict[str, Any] = {}
    for row in dataset:
        name = row["env"]
        env = envs.setdefault(name, make(name))
        policy = policies(name)["heuristic"](row["seed"])
        yield row, env, play(env, policy, row["task"] or None, row["seed"])


def heuristic_examples(dataset: Any) -> Any:
    """Prompt/completion rows: each training prompt with the heuristic's plan for its episode."""
    import datasets

    from env.rollout import replay
    from rewards.protocol import render_completion

    rows = []
    for row, env, episode in _heuristic_episodes(dataset):
        visible = "\n".join(m["content"] for m in row["prompt"])
        plan = blind_plan(episode.plan, visible)
        rows.append(
            {
                "prompt": row["prompt"],
                "completion": [{"role": "assistant", "content": render_completion(plan)}],
                "grade": replay(env, row["task"] or None, row["seed"], plan).grade.total,
            }
        )
    return datasets.Dataset.from_list(rows)


def heuristic_conversations(dataset: Any) -> list[dict[str, Any]]:
    """Interactive rows: each training prompt's heuristic episode as a tool-calling conversation
    (``messages``) with the tool schemas TRL renders (``tools``).

    Plain Python, not a ``datasets.Dataset``: Arrow stores every call's ``arguments`` under one
    struct type, the union of all tools' keys, so each rendered call would carry every other tool's
    arguments as ``null`` (~130 tokens a call instead of ~30, and calls the environment rejects)."""
    from pipeline.data.prompts import render_observation
    from pipeline.data.steps import tool_turns
    from pipeline.training.interactive import tool_schemas

    rows, schemas = [], {}
    for row, _, episode in _heuristic_episodes(dataset):
        *head, user = row["prompt"]
        opening = render_observation(episode.observations[0])
        messages = [*head, {**user, "content": user["content"] + opening}]
        messages += tool_turns(episode.actions, episode.observations[1:])
        if row["env"] not in schemas:  # one env's schemas serve all its rows
            schemas[row["env"]] = tool_schemas(row["env"])
        rows.append({"messages": messages, "tools": schemas[row["env"]]})
    return rows


def blind_decision_examples(dataset: Any, policy: str = "blind_decision") -> Any:
    """Steps mode: each training row's prompt with the rest of its episode as played by the env's
    ``blind_decision`` reference (its decision a seeded coin, its other fields filled as the
    reference fills them for that decision), and the same prompt again with the other side of
    that coin (``blind_decision_flipped``). It teaches what a reply from a cut looks like and that
    it ends in a decision, not which decision the evidence calls for: that is left to GRPO.

    Every case is taught both decisions, once each, so the loss is least where the model gives
    each case's two decisions the same chance: no case-dependent decision is learnable. One coin
    per case was not enough, even balanced within each verdict: SFT fits 64 coins as a function of
    the cases, and that function reads held-out cases one way or the other by chance (the warm
    start of the seventeenth steps run, balanced coins: AUC 0.34 [0.23, 0.45] on 100 held-out
    cuts, backwards; benchmarks/RESULTS.md, decision_margin).

    ``policy="reference"`` takes the honest reference's replies instead (one per row), which do
    teach the decision: only for the diagnostic of what supervision reaches on the same data
    (``benchmarks/steps_sft_ceiling.py``), never as a warm start before GRPO."""
    import datasets

    from env.registry import make, references
    from pipeline.data.steps import reference
    from rewards.protocol import render_completion

    envs: dict[str, Any] = {}
    rows = []
    for row in dataset:
        name = row["env"]
        if policy not in references(name):
            raise ValueError(
                f"env {name!r} has no {policy} reference (REFERENCES in its policies "
                "module): the steps warm start would have to teach its decisions"
            )
        env = envs.setdefault(name, make(name))
        sides = [policy]
        if f"{policy}_flipped" in references(name):  # "reference" has no other side
            sides.append(f"{policy}_flipped")
        for side in sides:
            played = reference(env, row["task"], row["seed"], policy=side)
            reply = render_completion(played.rest(row["cut"]))
            rows.append(
                {"prompt": row["prompt"], "completion": [{"role": "assistant", "content": reply}]}
            )
    features = datasets.Features({"prompt": datasets.Json(), "completion": datasets.Json()})
    return datasets.Dataset.from_list(rows, features=features)


def prompt_grouped(examples: Any, seed: int) -> Any:
    """``examples`` reordered so that rows with the same prompt are adjacent, the groups in a
    seeded random order: read in this order, a batch of the steps warm start holds a cut's two
    decisions together and the fixed-context loss encodes their prompt once
    (``context_grad.context_sft_trainer``), half the encodings of a shuffled batch."""
    import json
    import random

    groups: dict[str, list[int]] = {}
    for index, prompt in enumerate(examples["prompt"]):
        groups.setdefault(json.dumps(prompt, sort_keys=True), []).append(index)
    order = list(groups.values())
    random.Random(seed).shuffle(order)
    return examples.select([index for group in order for index in group])


def tokenize_conversations(conversations: list[dict[str, Any]], tokenizer: Any) -> Any:
    """``input_ids`` and ``assistant_masks`` of each conversation under the training chat template
    TRL's SFTTrainer would use; SFTTrainer turns the mask into labels (loss on the calls only)."""
    import datasets
    from trl.chat_template_utils import get_training_chat_template

    template = get_training_chat_template(tokenizer)
    columns: dict[str, list[list[int]]] = {"input_ids": [], "assistant_masks": []}
    for row in conversations:
        encoded = tokenizer.apply_chat_template(
            row["messages"],
            tools=row["tools"],
            chat_template=template,
            return_dict=True,
            return_assistant_tokens_mask=True,
        )
        columns["input_ids"].append(list(encoded["input_ids"]))
        columns["assistant_masks"].append(list(encoded["assistant_masks"]))
    return datasets.Dataset.from_dict(columns)


def sft_run_name(grpo_args: Any) -> str:
    """The warm start's run name in the tracker: the GRPO run's (or its output folder's) name,
    ``-sft-warmup`` and the start time, so a second run never appends to the first one."""
    name = grpo_args.run_name or Path(grpo_args.output_dir).name
    return f"{name}-sft-warmup-{time.strftime('%Y%m%d-%H%M%S')}"


def sft_batch_size(cfg: Any) -> int:
    """Examples per SFT step: one conversation (interactive mode), else half the GRPO batch."""
    if cfg.data.mode == "interactive":
        return 1
    return max(1, cfg.training.get("per_device_train_batch_size", 4) // 2)


def sft_warmup(
    model: Any,
    tokenizer: Any,
    dataset: Any,
    steps: int,
    cfg: Any,
    grpo_args: Any,
    steps_policy: str = "blind_decision",
    callbacks: list[Any] | None = None,
) -> dict[str, Any]:
    """Run ``steps`` SFT steps on the heuristic's plans (plan mode), conversations (interactive
    mode) or ``steps_policy``'s replies (steps mode); returns the SFT log summary. ``callbacks``
    join the trainer's own (a benchmark's recorders).

    Precision follows the GRPO run's (``grpo_args``): accelerate allows one setting per process."""
    from trl import SFTConfig, SFTTrainer

    interactive = cfg.data.mode == "interactive"
    if interactive:
        examples = tokenize_conversations(heuristic_conversations(dataset), tokenizer)
    elif cfg.data.mode == "steps":
        examples = prompt_grouped(
            blind_decision_examples(dataset, steps_policy), cfg.training.get("seed", 42)
        )
    else:
        examples = heuristic_examples(dataset).remove_columns("grade")
    rates = {"interactive": INTERACTIVE_SFT_LEARNING_RATE, "steps": STEPS_SFT_LEARNING_RATE}
    learning_rate = rates.get(cfg.data.mode, SFT_LEARNING_RATE)
    t = cfg.training
    args = SFTConfig(
        output_dir=str(Path(cfg.output_dir) / "sft_warmup"),
        max_steps=steps,
        per_device_train_batch_size=sft_batch_size(cfg),
        learning_rate=learning_rate,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        # Logged where the GRPO run logs (trackio, wandb, ...), as a run of its own.
        report_to=grpo_args.report_to,
        project=grpo_args.project,
        run_name=sft_run_name(grpo_args),
        seed=t.get("seed", 42),
        completion_only_loss=not interactive,
        # Steps examples come shuffled in prompt groups (``prompt_grouped``): kept in that order,
        # a batch holds both decisions of each of its cuts, which share one prompt encoding.
        train_sampling_strategy="sequential" if cfg.data.mode == "steps" else "random",
        # Interactive examples arrive tokenized; their assistant_masks column becomes the labels.
        assistant_only_loss=False,
        max_length=None,  # AML prompts are ~1.5k tokens (interactive ~2.4k): never cut them off
        use_cpu=cfg.model.on_cpu,
        bf16=grpo_args.bf16,
        fp16=grpo_args.fp16,
        gradient_checkpointing=grpo_args.gradient_checkpointing,
    )
    if cfg.data.mode == "steps" and not cfg.model.context_grad:
        from pipeline.training.context_grad import context_sft_trainer

        SFTTrainer = context_sft_trainer(SFTTrainer)  # noqa: N806 (TRL's class)
    from pipeline.training.memory import release_callbacks

    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=examples,
        processing_class=tokenizer,
        callbacks=[*release_callbacks(cfg.model), *(callbacks or [])],
    )
    result = trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    logger.info("SFT warm start: %d steps, loss %s -> %s", steps, losses[:1], losses[-1:])
    return {
        "steps": trainer.state.global_step,
        "losses": losses,
        "train_loss": result.training_loss,
    }
