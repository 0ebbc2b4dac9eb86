"""Reply-quality checks: does a free-text message mention the concrete facts of the case?

The reference systems accepted any string as a reply. Here a reply earns credit only for the facts
it states (an order id, an amount, the next step), and a message longer than a limit earns nothing,
so dumping every number in sight is not a strategy.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Fact = str | float | tuple[str, ...]
"""A phrase (case-insensitive), an amount (any common spelling), or alternative phrases."""

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def normalise(text: str) -> str:
    """Lower case, single spaces, hyphens and underscores read as spaces."""
    return " ".join(re.sub(r"[-_]", " ", text.lower()).split())


def amounts_in(text: str) -> list[float]:
    """Every number written in ``text`` ("$1,250.00" -> 1250.0)."""
    values = []
    for match in _NUMBER.findall(text):
        try:
            values.append(float(match.replace(",", "")))
        except ValueError:
            continue
    return values


def mentions(text: str, fact: Fact) -> bool:
    """True when ``text`` states ``fact``."""
    if isinstance(fact, float | int) and not isinstance(fact, bool):
        return any(abs(value - float(fact)) < 0.005 for value in amounts_in(text))
    options = fact if isinstance(fact, tuple) else (fact,)
    body = normalise(text)
    return any(normalise(option) in body for option in options)


def fact_coverage(
    text: str | None, facts: Sequence[Fact], max_chars: int, avoid: Sequence[Fact] = ()
) -> float:
    """Share of ``facts`` that ``text`` mentions; 0 for no text, text over ``max_chars``, or text
    that states anything in ``avoid`` (a claim that contradicts the case, e.g. "we refunded").

    >>> fact_coverage("Refunded $42.50 for order O-1001.", ["O-1001", 42.5], 400)
    1.0
    >>> fact_coverage("We refunded order O-1001.", ["O-1001"], 400, avoid=["we refunded"])
    0.0
    """
    if not text or len(text) > max_chars or not facts:
        return 0.0
    if any(mentions(text, fact) for fact in avoid):
        return 0.0
    return sum(mentions(text, fact) for fact in facts) / len(facts)
