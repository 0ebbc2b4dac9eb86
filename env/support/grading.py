"""Grade a support episode: the outcome (money, queue, reply, closing code) and the process.

Order matters: a refund issued before the relevant policy section was read, or any account action
before the customer's records were fetched, is a process violation even if the amount was right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from env.base import Grade
from env.common.grading import make_grade, weighted_total
from env.common.text import fact_coverage
from env.support.config import SupportConfig
from env.support.world import SupportWorld


@dataclass
class Activity:
    """What the agent did, in order (filled by the environment's tools)."""

    fetched: bool = False
    topics: list[str] = field(default_factory=list)
    refunds: list[tuple[str, float]] = field(default_factory=list)
    escalations: list[str] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    checks: int = 0
    violations: int = 0

    def require(self, fetched: bool, topic: str | None) -> None:
        """Record one ordering constraint of an action: records fetched, topic read first."""
        self.checks += 1
        if not fetched or (topic is not None and topic not in self.topics):
            self.violations += 1


def grade(world: SupportWorld, act: Activity, resolution: str | None, cfg: SupportConfig) -> Grade:
    """Weighted total in [0, 1]; no closing decision means no credit at all."""
    truth = world.truth
    refunded: dict[str, float] = {}
    for order_id, amount in act.refunds:
        refunded[order_id] = refunded.get(order_id, 0.0) + amount
    if truth.refund_order is None:
        refund_ok = not refunded
    else:
        refund_ok = (
            set(refunded) == {truth.refund_order}
            and abs(refunded[truth.refund_order] - truth.refund_amount) < 0.01
        )
    queues = set(act.escalations)
    escalation_ok = queues == ({truth.queue} if truth.queue else set())
    reply = act.replies[-1] if act.replies else None
    components = {
        "refund": float(refund_ok),
        "escalation": float(escalation_ok),
        "reply": fact_coverage(
            reply, truth.reply_facts, cfg.max_reply_chars, truth.reply_avoid, own_ids(world)
        ),
        "resolution": float(resolution == truth.resolution),
        "process": (max(0.0, 1.0 - cfg.violation_cost * act.violations) if act.fetched else 0.0),
    }
    weights = {
        "refund": cfg.refund_weight,
        "escalation": cfg.escalation_weight,
        "reply": cfg.reply_weight,
        "resolution": cfg.resolution_weight,
        "process": cfg.process_weight,
    }
    total = weighted_total(components, weights)
    if resolution is None:
        total = 0.0
    return make_grade(total, components, resolution)


def own_ids(world: SupportWorld) -> list[str]:
    """The ticket's own record ids (its customer, its order): naming them in a reply is neutral."""
    return re.findall(r"\b[A-Z]{1,4}-\d{2,}\b", str(world.ticket))


def evidence_coverage(world: SupportWorld, act: Activity) -> float:
    """Share of the decision-relevant facts revealed: the records and each relevant section."""
    relevant = world.truth.topics
    seen = int(act.fetched) + sum(topic in act.topics for topic in relevant)
    return seen / (1 + len(relevant))
