"""Prompt order with the outcomes in equal share: one clean case, one suspicious, in turn.

In steps mode GRPO sees a few prompts a step. With AML-easy's train cuts about two thirds
suspicious, the groups that reward filing outnumber those that reward closing, and the learning
runs drifted to one decision for every case (benchmarks/RESULTS.md, learning_cpu steps runs 4-6):
the step's net push is toward the majority, whatever each case's evidence. Ordering the prompts so
that every run of consecutive prompts holds both outcomes equally, and training in that order,
leaves a drift to either decision no net reward; only reading each case's evidence gains.

The outcome is the hidden ``clean`` flag of the row's episode (``reveal()``). It decides the order
only: it is not a column, so neither the prompt nor the rewards see it.
"""

from __future__ import annotations

import random
from typing import Any

from env.registry import make


def outcome(env: Any, row: dict[str, Any]) -> bool:
    """The hidden ``clean`` flag of the episode behind ``row``."""
    env.reset(seed=row["seed"], task=row["task"] or None)
    truth = env.reveal()
    if "clean" not in truth:
        raise ValueError(f"data.balance: env {env.name!r} reveals no 'clean' outcome to balance")
    return bool(truth["clean"])


def balanced(rows: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """``rows`` reordered to alternate clean and suspicious episodes, each outcome in a seeded
    random order; the minority outcome's rows repeat (in the same order) until the majority's are
    used up, so the result is longer than ``rows`` unless they were already even. With a single
    outcome there is nothing to balance: the error says so."""
    envs: dict[str, Any] = {}
    by_outcome: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
    for row in rows:
        env = envs.setdefault(row["env"], make(row["env"]))
        by_outcome[outcome(env, row)].append(row)
    if not by_outcome[True] or not by_outcome[False]:
        raise ValueError(
            "data.balance needs both clean and suspicious episodes among the train rows; "
            f"got {len(by_outcome[True])} clean and {len(by_outcome[False])} suspicious"
        )
    rng = random.Random(f"balance:{seed}")
    clean, suspicious = (rng.sample(group, len(group)) for group in by_outcome.values())
    pairs = max(len(clean), len(suspicious))
    order: list[dict[str, Any]] = []
    for k in range(pairs):
        first, second = (clean, suspicious) if k % 2 else (suspicious, clean)
        order += [first[k % len(first)], second[k % len(second)]]
    return order
