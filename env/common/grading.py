"""The weighted grade every environment reports: components in [0, 1], one weighted total.

Each environment decides its components and weights; this module owns the arithmetic, so a total
is computed, clamped and rounded the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from env.base import Grade


def weighted_total(
    parts: Mapping[str, float], weights: Mapping[str, float], *, normalize: bool = True
) -> float:
    """Sum of weight x component over the weighted components (unweighted ones are reported only).

    With ``normalize`` the sum is divided by the sum of the weights, so weights need not add to 1.
    """
    total = sum(weights[k] * v for k, v in parts.items() if k in weights)
    return total / (sum(weights.values()) or 1.0) if normalize else total


def clamp(total: float) -> float:
    """A total as reported: clamped to [0, 1], four decimals."""
    return round(min(1.0, max(0.0, total)), 4)


def make_grade(total: float, parts: Mapping[str, float], decision: str | None) -> Grade:
    """A ``Grade`` with the total clamped and every component rounded to four decimals."""
    components = {k: round(v, 4) for k, v in parts.items()}
    return Grade(total=clamp(total), components=components, decision=decision)
