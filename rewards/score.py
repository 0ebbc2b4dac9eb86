"""Score completions outside training: per-component rewards and the weighted total.

The same functions TRL calls during training score each row here, so a number printed by
``scripts/score_completions.py`` or the audit is exactly what the trainer would have computed
(TRL sums ``weight * reward`` over components and ignores ``None``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rewards import REWARD_FUNCTIONS, resolve_weights
from rewards.replay import CACHE

ROW_KEYS = ("env", "task", "seed", "completion")


def weighted_total(rewards: Mapping[str, float | None], weights: Mapping[str, float]) -> float:
    """TRL's total: the weighted sum of the components, a ``None`` component counting 0."""
    return round(sum(weights[k] * (v or 0.0) for k, v in rewards.items() if k in weights), 6)


def score_batch(
    rows: list[Mapping[str, Any]], weights: Mapping[str, float] | None = None
) -> list[dict[str, Any]]:
    """Score rows ``{env, task, seed, completion}`` (plus ``prefix`` for steps-mode rows) as one
    TRL batch; one result dict per row.

    Each result has ``rewards`` (component -> value), ``total`` (weighted), ``n_calls`` and
    ``parse_errors``. Components with weight 0 are still reported but add nothing to the total.
    """
    resolved = resolve_weights(weights)
    kwargs = {key: [row.get(key) for row in rows] for key in ("env", "task", "seed", "prefix")}
    completions = [row.get("completion") for row in rows]
    prompts = [None] * len(rows)
    per_component = {
        name: fn(prompts, completions, **kwargs) for name, fn in REWARD_FUNCTIONS.items()
    }
    results = []
    for i, row in enumerate(rows):
        rewards = {name: values[i] for name, values in per_component.items()}
        outcome = CACHE.outcome(
            row.get("env"), row.get("task"), row.get("seed"), completions[i], row.get("prefix")
        )
        errors = list(outcome.parse.errors)
        if outcome.problem:
            errors.insert(0, outcome.problem)
        results.append(
            {
                "rewards": rewards,
                "total": weighted_total(rewards, resolved),
                "n_calls": len(outcome.parse.calls),
                "parse_errors": errors,
                "grade": None if outcome.broken else outcome.report.grade.total,
                "decision_reached": None if outcome.broken else outcome.report.decision_reached,
            }
        )
    return results


def check_row(row: Any) -> str | None:
    """Why an input row cannot be scored, or None when it can."""
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    missing = [key for key in ROW_KEYS if key not in row]
    if missing:
        return f"missing key(s) {', '.join(missing)}"
    if isinstance(row["seed"], bool) or not isinstance(row["seed"], int):
        return f"seed must be an integer, got {row['seed']!r}"
    if not isinstance(row["env"], str) or not isinstance(row["task"], str):
        return "env and task must be strings"
    if not isinstance(row["completion"], (str, list)):
        return "completion must be a string or a list of chat messages"
    return None


def mean(values: Iterable[float]) -> float:
    items = list(values)
    return sum(items) / len(items) if items else 0.0
