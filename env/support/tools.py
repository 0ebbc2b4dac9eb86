"""The six tools of the support environment, as typed, documented methods: two investigation
tools read the customer's records and the policy book; three actions move money, escalate and reply;
one terminal call closes the ticket with a resolution code."""

from __future__ import annotations

from env.base import ToolError, tool
from env.support.world import (
    Queue,
    Resolution,
    Topic,
)


class SupportTools:
    """The tools of ``SupportEnvironment`` (a mixin); episode state lives on the environment."""

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
