"""Reply-quality checks: does a free-text message mention the concrete facts of the case?

The reference systems accepted any string as a reply. Here a reply earns credit only for the facts
it states (an order id, an amount, the next step), and a message longer than a limit earns nothing,
so dumping every number in sight is not a strategy. Ids are held to precision as well: every
record id the text names that is not one of the case's facts costs its share: the score is fact recall times id precision.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

Fact = str | float | tuple[str, ...]
"""A phrase (case-insensitive), an amount (any common spelling), or alternative phrases."""

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_RECORD_ID = re.compile(r"\b[A-Z]{1,4}-\d{2,}\b")


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
    text: str | None,
    facts: Sequence[Fact],
    max_chars: int,
    avoid: Sequence[Fact] = (),
    neutral: Sequence[str] = (),
) -> float:
    """Share of ``facts`` that ``text`` mentions, times the share of the record ids it names that
    are facts (``neutral`` ids, such as the ticket's own, do not count); 0 for no text, text over
    ``max_chars``, or text that states anything in ``avoid`` (a claim that contradicts the case,
    e.g. "we refunded").

    >>> fact_coverage("Refunded $42.50 for order O-1001.", ["O-1001", 42.5], 400)
    1.0
    >>> fact_coverage("We refunded order O-1001.", ["O-1001"], 400, avoid=["we refunded"])
    0.0
    >>> round(fact_coverage("Order O-1001; also O-1002, O-1003, O-1004.", ["O-1001"], 400), 3)
    0.25
    """
    if not text or len(text) > max_chars or not facts:
        return 0.0
    if any(mentions(text, fact) for fact in avoid):
        return 0.0
    recall = sum(mentions(text, fact) for fact in facts) / len(facts)
    named = set(_RECORD_ID.findall(text)) - set(neutral)
    if not recall or not named:
        return recall
    relevant = {i for i in named if any(mentions(i, f) for f in facts if not isinstance(f, float))}
    return recall * len(relevant) / len(named)
