"""SupportEnvironment ("support"): resolve one customer ticket with six tools.

The agent sees a ticket (who wrote, what they claim, which order). It fetches the customer's
records (orders, charges, refund history, chargebacks, security events), reads the sections of a
policy book whose numbers change per seed, then acts: refund an amount, escalate to a queue, reply
to the customer, and close the ticket with a resolution code (the terminal decision). The grade
checks the money (right amount on the right order, or none), the queue, a reply that states the
case's facts (order id, amount, tracking number or next step), the closing code, and the order of
work: money moved before the policy was read, or account actions before the records were fetched,
cost process credit. Tasks: easy (refund, duplicate, shipping claims), medium (+ takeovers and
tier-2 refunds), hard (+ refund abuse, more orders). Clean cases: denied refunds, single charges,
delayed (not lost) parcels.
"""

from __future__ import annotations

import random
from typing import Any

from env.base import Grade, ToolEnvironment
from env.support.config import SupportConfig
from env.support.grading import Activity, evidence_coverage, grade
from env.support.tools import SupportTools
from env.support.world import (
    QUEUES,
    RESOLUTIONS,
    TOPICS,
    SupportWorld,
    build_world,
)

CLEAN_OUTCOMES = ("refund_denied", "no_duplicate", "delayed")
"""Claims the records contradict: nothing is owed and nothing needs escalating."""


class SupportEnvironment(SupportTools, ToolEnvironment):
    """Customer-support ticket resolution with a seeded policy book and customer records."""

    name = "support"
    decision_kinds = ("action",)  # these calls commit the outcome (steps mode's decision cut)
    tasks = ("easy", "medium", "hard")
    config_class = SupportConfig
    instructions = (
        "You are a customer-support agent. Read the ticket, fetch the customer's records, read "
        "the policy sections that apply, then refund, escalate and reply as the policy says, and "
        "close the ticket. Check before you act: money moved before reading the policy counts "
        "against you. The reply must state the concrete facts (order id, amount, next step)."
    )

    def _build(self, task: str, rng: random.Random) -> None:
        self.world: SupportWorld = build_world(task, rng, self.config)
        self.activity = Activity()

    def _opening(self) -> tuple[Any, str]:
        ticket = self.world.ticket
        result = {
            "ticket": dict(ticket),
            "policy_topics": list(TOPICS),
            "queues": list(QUEUES),
            "resolutions": list(RESOLUTIONS),
        }
        return result, f"Ticket {ticket['ticket_id']} from customer {ticket['customer_id']}."

    # ----- grading ------------------------------------------------------------------------------

    def _grade(self) -> Grade:
        return grade(self.world, self.activity, self.decision, self.config)

    def _metrics(self) -> dict[str, float]:
        return {"evidence_coverage": evidence_coverage(self.world, self.activity)}

    def reveal(self) -> dict[str, Any]:
        truth = self.world.truth
        return {
            "outcome": f"outcome {truth.outcome}",
            "clean": truth.outcome in CLEAN_OUTCOMES,
            "refund": (
                f"refund {truth.refund_amount:.2f} on {truth.refund_order}"
                if truth.refund_order
                else "no refund"
            ),
            "queue": f"escalate to {truth.queue}" if truth.queue else "no escalation",
            "resolution": f"close as {truth.resolution}",
            "policy_section": f"read section {truth.topic}",
        }
