"""Seeded episodes -> GRPO prompt rows.

Each row is one episode that the trainer will ask the model to solve: the system prompt (tools,
protocol, output format), the opening observation of ``reset(seed, task)`` as the user message,
and the columns ``env``, ``task``, ``seed``, ``split`` that the reward functions (or the
interactive adapter) use to rebuild exactly the same hidden world. Seeds come from
``env.seeds.split_seeds``, so train and eval rows never share a world; tasks cycle evenly; several
environments interleave row by row into one dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import datasets

from env.registry import env_class, make
from env.seeds import split_seeds
from pipeline.prompts import MODES, render_completion, system_prompt, user_message

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
) -> list[dict[str, Any]]:
    """``n`` prompt rows of one environment, tasks cycling, seeds from the split's range."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    task_list = _tasks_for(env_name, tasks)
    env = make(env_name)
    system = system_prompt(env_name, mode, prompt_style)
    rows = []
    for i, seed in enumerate(split_seeds(split, n, seed_offset)):
        task = task_list[i % len(task_list)]
        observation = env.reset(seed=seed, task=task or None)
        rows.append(
            {
                "prompt": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": user_message(env_name, task, observation, mode)},
                ],
                "env": env_name,
                "task": task,
                "seed": seed,
                "split": split,
            }
        )
    return rows


def build_dataset(
    envs: str | Sequence[str],
    tasks: Sequence[str] | None = None,
    n: int = 100,
    split: str = "train",
    seed_offset: int = 0,
    mode: str = "plan",
    prompt_style: str = "full",
) -> datasets.Dataset:
    """A prompt dataset: ``n`` rows per environment, interleaved when there are several.

    Args:
        envs: One environment name or several (e.g. ``["aml", "fraud"]``).
        tasks: Tasks to cycle through; ``None`` uses every task of each env. With several envs,
            each env takes the listed tasks it has (an env with none of them is an error).
        n: Rows per environment.
        split: "train", "eval" or "test": which disjoint seed range to draw from.
        seed_offset: Start this far into the split's range (to extend a dataset without overlap).
        mode: "plan" (opening observation in the user message) or "interactive".
        prompt_style: "full" or "compact" plan-mode tool list (``pipeline.prompts``).

    Returns:
        A ``datasets.Dataset`` with columns prompt, env, task, seed, split.
    """
    names = [envs] if isinstance(envs, str) else list(envs)
    if not names:
        raise ValueError("build_dataset needs at least one environment name")
    per_env = [build_rows(name, tasks, n, split, seed_offset, mode, prompt_style) for name in names]
    rows = [row for group in zip(*per_env, strict=True) for row in group]
    return datasets.Dataset.from_list(rows)
