"""Seeded episodes -> GRPO prompt rows.

Each row is one episode that the trainer will ask the model to solve: the system prompt (tools,
protocol, output format), the opening observation of ``reset(seed, task)`` as the user message,
and the columns ``env``, ``task``, ``seed``, ``split`` that the reward functions (or the
interactive adapter) use to rebuild exactly the same hidden world. Seeds come from
``env.seeds.split_seeds``, so train and eval rows never share a world; tasks cycle evenly; several
environments interleave row by row into one dataset.

In steps mode (``pipeline.data.steps``) an episode gives one row per cut point of its reference
trajectory, with two more columns: ``prefix`` (the calls before the cut, as JSON) and ``cut``
(how many there are). The prompt then holds assistant tool calls, so it is stored with the
``datasets.Json`` feature type: Arrow would otherwise give every call's ``arguments`` the union of
all tools' keys, filled with nulls.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets

from env.registry import env_class, make
from env.seeds import split_seeds
from pipeline.data.prompts import MODES, system_prompt, user_message
from pipeline.data.steps import (
    cut_points,
    episode_rng,
    parse_cuts,
    prefix_json,
    reference,
    tool_turns,
)
from rewards.protocol import render_completion

__all__ = ["build_dataset", "build_rows", "render_completion"]


def _tasks_for(env_name: str, tasks: Sequence[str] | None) -> list[str]:
    available = list(env_class(env_name).tasks) or [""]
    if tasks is None:
        return available
    chosen = [t for t in tasks if t in available]
    if not chosen:
        raise ValueError(
            f"none of the tasks {list(tasks)} exist in env {env_name!r}; it has {available}"
        )
    return chosen


def build_rows(
    env_name: str,
    tasks: Sequence[str] | None = None,
    n: int = 100,
    split: str = "train",
    seed_offset: int = 0,
    mode: str = "plan",
    prompt_style: str = "full",
    cuts: str = "decision",
    detour: float = 0.0,
    result_style: str = "full",
) -> list[dict[str, Any]]:
    """Prompt rows of ``n`` episodes of one environment, tasks cycling, seeds from the split's
    range: one row per episode, or in steps mode one per cut point (``cuts``, ``detour``)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if not 0.0 <= detour <= 1.0:
        raise ValueError(f"detour must be a probability in [0, 1], got {detour!r}")
    parse_cuts(cuts)
    task_list = _tasks_for(env_name, tasks)
    env = make(env_name)
    system = system_prompt(env_name, mode, prompt_style)
    rows = []
    for i, seed in enumerate(split_seeds(split, n, seed_offset)):
        task = task_list[i % len(task_list)]
        if mode == "steps":
            rows += _step_rows(env, task, seed, split, system, cuts, detour, result_style)
            continue
        observation = env.reset(seed=seed, task=task or None)
        rows.append(
            {
                "prompt": [
                    {"role": "system", "content": system},
                    {
                        "role": "user",
                        "content": user_message(env_name, task, observation, mode, result_style),
                    },
                ],
                "env": env_name,
                "task": task,
                "seed": seed,
                "split": split,
            }
        )
    return rows


def _step_rows(
    env: Any,
    task: str,
    seed: int,
    split: str,
    system: str,
    cuts: str,
    detour: float,
    result_style: str,
) -> list[dict[str, Any]]:
    """The steps-mode rows of one episode: its reference conversation cut at each cut point."""
    ref = reference(env, task, seed, detour)
    opening = user_message(env.name, task, ref.observations[0], "steps", result_style)
    head = [{"role": "system", "content": system}, {"role": "user", "content": opening}]
    turns = tool_turns(ref.calls, ref.observations[1:], result_style)
    return [
        {
            "prompt": head + turns[: 2 * cut],
            "env": env.name,
            "task": task,
            "seed": seed,
            "split": split,
            "prefix": prefix_json(ref.calls[:cut]),
            "cut": cut,
        }
        for cut in cut_points(ref, cuts, episode_rng(env.name, task, seed, "cuts"))
    ]


def build_dataset(
    envs: str | Sequence[str],
    tasks: Sequence[str] | None = None,
    n: int = 100,
    split: str = "train",
    seed_offset: int = 0,
    mode: str = "plan",
    prompt_style: str = "full",
    cuts: str = "decision",
    detour: float = 0.0,
    result_style: str = "full",
) -> datasets.Dataset:
    """A prompt dataset: ``n`` rows per environment, interleaved when there are several.

    Args:
        envs: One environment name or several (e.g. ``["aml", "fraud"]``).
        tasks: Tasks to cycle through; ``None`` uses every task of each env. With several envs,
            each env takes the listed tasks it has (an env with none of them is an error).
        n: Rows per environment.
        split: "train", "eval" or "test": which disjoint seed range to draw from.
        seed_offset: Start this far into the split's range (to extend a dataset without overlap).
        mode: "plan" (opening observation in the user message), "interactive" or "steps"
            (``n`` episodes, each cut along its reference trajectory).
        prompt_style: "full" or "compact" tool list (``pipeline.data.prompts``).
        cuts: steps mode: "decision", "all" or "random:N" (``pipeline.data.steps``).
        detour: steps mode: probability that a reference call is replaced by a random one.
        result_style: "full" (JSON) or "compact" (``pipeline.data.compact``) tool results.

    Returns:
        A ``datasets.Dataset`` with columns prompt, env, task, seed, split (steps mode adds
        prefix and cut).
    """
    names = [envs] if isinstance(envs, str) else list(envs)
    if not names:
        raise ValueError("build_dataset needs at least one environment name")
    per_env = [
        build_rows(
            name, tasks, n, split, seed_offset, mode, prompt_style, cuts, detour, result_style
        )
        for name in names
    ]
    if mode != "steps":
        rows = [row for group in zip(*per_env, strict=True) for row in group]
        return datasets.Dataset.from_list(rows)
    # Environments give different numbers of cut rows: interleave round-robin until all are used.
    longest = max((len(group) for group in per_env), default=0)
    rows = [group[i] for i in range(longest) for group in per_env if i < len(group)]
    if not rows:
        raise ValueError(f"no steps rows: no reference decided in {n} episodes of {names}")
    features = datasets.Features(
        {
            "prompt": datasets.Json(),
            "env": datasets.Value("string"),
            "task": datasets.Value("string"),
            "seed": datasets.Value("int64"),
            "split": datasets.Value("string"),
            "prefix": datasets.Value("string"),
            "cut": datasets.Value("int64"),
        }
    )
    return datasets.Dataset.from_list(rows, features=features)
