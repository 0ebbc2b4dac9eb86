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
from typing import Any, Literal

from env.base import Grade, ToolEnvironment, ToolError, tool
from env.support.config import SupportConfig
from env.support.grading import Activity, evidence_coverage, grade
from env.support.world import QUEUES, RESOLUTIONS, TOPICS, SupportWorld, build_world

Topic = Literal["refunds", "duplicate_charges", "shipping", "account_security", "abuse"]
Queue = Literal["billing_tier2", "security", "fraud", "shipping"]
CLEAN_OUTCOMES = ("refund_denied", "no_duplicate", "delayed")
"""Claims the records contradict: nothing is owed and nothing needs escalating."""
Resolution = Literal["refunded", "denied", "escalated", "resolved"]


class SupportEnvironment(ToolEnvironment):
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

    # ----- tools --------------------------------------------------------------------------------

    @tool(kind="investigation")
    def fetch_user_data(self, customer_id: str) -> tuple[dict, str]:
        """Fetch the customer's profile, orders, charges, refund history and security events.

        Args:
            customer_id: The customer id on the ticket (e.g. "C-12345").
        """
        if customer_id != self.world.customer["customer_id"]:
            raise ToolError(f"no customer {customer_id!r} on this ticket")
        self.activity.fetched = True
        result = {
            "customer": dict(self.world.customer),
            "orders": [order.public() for order in self.world.orders],
            "charges": [dict(charge) for charge in self.world.charges],
            "security_events": list(self.world.security_events),
        }
        return result, f"{len(self.world.orders)} orders, {len(self.world.charges)} charges."

    @tool(kind="investigation")
    def check_policy(self, topic: Topic) -> tuple[dict, str]:
        """Read one section of the policy book (its numbers differ from ticket to ticket).

        Args:
            topic: The section: refunds, duplicate_charges, shipping, account_security or abuse.
        """
        if topic not in self.activity.topics:
            self.activity.topics.append(topic)
        return {"topic": topic, "policy": self.world.policy.text(topic)}, f"Policy: {topic}."

    @tool(kind="action")
    def issue_refund(self, order_id: str, amount: float) -> tuple[dict, str]:
        """Refund money to the customer's card for one order. Money moves at once.

        Args:
            order_id: The order to refund.
            amount: Amount in dollars, at most what is left of the order's charges.
        """
        order = self.world.order(order_id)
        if order is None:
            raise ToolError(f"no order {order_id!r} for this customer")
        charged = sum(c["amount"] for c in self.world.charges if c["order_id"] == order_id)
        already = sum(a for o, a in self.activity.refunds if o == order_id)
        if not 0 < amount <= round(charged - already, 2) + 1e-9:
            raise ToolError(
                "amount must be above 0 and at most what is left of the order's charges"
            )
        self.activity.require(self.activity.fetched, self.world.truth.topic)
        self.activity.refunds.append((order_id, round(amount, 2)))
        return {"order_id": order_id, "refunded": round(amount, 2)}, "Refund issued."

    @tool(kind="action")
    def reply_to_customer(self, message: str) -> tuple[dict, str]:
        """Send a reply to the customer; the last reply is the one that counts.

        Args:
            message: The reply text: state the order id, any amount and the next step.
        """
        if not message.strip():
            raise ToolError("the reply is empty")
        self.activity.replies.append(message)
        return {"sent": True, "chars": len(message)}, "Reply sent."

    @tool(kind="action")
    def escalate(self, queue: Queue, reason: str) -> tuple[dict, str]:
        """Hand the ticket to a specialist queue.

        Args:
            queue: billing_tier2, security, fraud or shipping.
            reason: One line for the specialist.
        """
        self.activity.require(self.activity.fetched, self.world.truth.topic)
        if queue not in self.activity.escalations:
            self.activity.escalations.append(queue)
        return {"queue": queue, "queued": True}, f"Escalated to {queue}."

    @tool(kind="terminal", terminal=True)
    def close_ticket(self, resolution: Resolution) -> tuple[dict, str]:
        """Close the ticket with a resolution code; this ends the episode.

        Args:
            resolution: refunded, denied, escalated or resolved.
        """
        self.activity.require(self.activity.fetched, None)
        self._finish(resolution)
        return {"closed": True, "resolution": resolution}, "Ticket closed."

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
