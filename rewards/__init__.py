"""Decomposed GRPO rewards: parse a completion's tool calls, replay them once, score six ways.

``build_reward_functions(weights)`` returns the TRL reward functions and their weights, ready for
``GRPOTrainer(reward_funcs=funcs, args=GRPOConfig(reward_weights=weights))``. The default weights
are chosen so that every degenerate strategy of ``scripts/audit_rewards.py`` scores clearly below
the honest heuristic plan on every difficulty (``tests/test_audit_rewards.py`` asserts it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rewards.components import (
    decision_reward,
    decisions_reached,
    execution_reward,
    format_reward,
    grade_reward,
    investigation_reward,
    os_mechanics_reward,
)
from rewards.parsing import ParseResult, parse_tool_calls

REWARD_WEIGHTS_DEFAULT: dict[str, float] = {
    "format": 0.2,
    "investigation": 0.5,
    "execution": 1.0,
    "grade": 2.0,
    # OS mechanics already reach the total through the AML grade's os_mechanics component and
    # the step shaping in execution; weighting this component too would count them twice. It is
    # still computed and logged (weight 0) so the curve can be watched.
    "os_mechanics": 0.0,
    # The decision alone (right 1, wrong -1): already the gate of every component above, so off
    # by default; steps runs that train the decision weight it instead of the grade.
    "decision": 0.0,
}

REWARD_FUNCTIONS: dict[str, Callable[..., list]] = {
    "format": format_reward,
    "investigation": investigation_reward,
    "execution": execution_reward,
    "grade": grade_reward,
    "os_mechanics": os_mechanics_reward,
    "decision": decision_reward,
}


def resolve_weights(weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """Defaults overridden by ``weights``; an unknown component name is a configuration error."""
    merged = dict(REWARD_WEIGHTS_DEFAULT)
    for name, value in (weights or {}).items():
        if name not in REWARD_FUNCTIONS:
            raise ValueError(
                f"unknown reward component {name!r}; choose from {', '.join(REWARD_FUNCTIONS)}"
            )
        merged[name] = float(value)
    return merged


def build_reward_functions(
    weights: Mapping[str, float] | None = None,
) -> tuple[list[Callable[..., Any]], list[float]]:
    """The reward functions and their weights; a weight of 0 keeps a component logged, not counted.

    Args:
        weights: Component name -> weight; names not given keep ``REWARD_WEIGHTS_DEFAULT``.

    Returns:
        ``(funcs, weights)`` in the order format, investigation, execution, grade, os_mechanics,
        decision.
    """
    resolved = resolve_weights(weights)
    return [REWARD_FUNCTIONS[n] for n in resolved], list(resolved.values())


__all__ = [
    "REWARD_FUNCTIONS",
    "REWARD_WEIGHTS_DEFAULT",
    "ParseResult",
    "build_reward_functions",
    "execution_reward",
    "format_reward",
    "grade_reward",
    "investigation_reward",
    "os_mechanics_reward",
    "decision_reward",
    "decisions_reached",
    "parse_tool_calls",
    "resolve_weights",
]
