"""Policies for the support environment: an honest procedure, random play, an oracle, degenerates.

``heuristic`` reads the ticket, fetches the records, reads the policy sections the claim needs and
applies them with the numbers it read. ``oracle`` reads the hidden truth at reset. The degenerates
are the shortcuts the reference systems rewarded: refund whatever is asked, close at once, or
escalate everything.
"""

from __future__ import annotations

import re
from typing import Any

from env.base import ToolCallAction, ToolEnvironment, ToolObservation
from env.common.policies import RandomPolicy, Script, ScriptedPolicy, call

_CLAIM_WORDS = (
    ("takeover", ("into my account", "hacked", "strange logins")),
    ("duplicate", ("twice", "two payments", "double", "two charges")),
    ("shipping", ("never arrived", "not been delivered", "still waiting")),
)
_ORDER = re.compile(r"O-\d+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def claim_of(message: str) -> str:
    """The kind of claim a ticket makes, from its wording."""
    text = message.lower()
    for claim, words in _CLAIM_WORDS:
        if any(word in text for word in words):
            return claim
    return "refund"


def compose_reply(outcome: str, order_id: str, amount: float, tracking: str) -> str:
    """A reply stating the facts a customer needs for each kind of outcome."""
    return {
        "refund_ok": f"We refunded ${amount:.2f} for order {order_id}.",
        "refund_denied": (
            f"Order {order_id} cannot be refunded: it is a final sale item or outside the "
            "refund window (days since purchase)."
        ),
        "tier2": f"Your refund for order {order_id} goes to our billing tier 2 team.",
        "abuse": f"Your request for order {order_id} is under review.",
        "duplicate": f"We refunded the duplicate charge of ${amount:.2f} for order {order_id}.",
        "no_duplicate": f"Order {order_id} was charged only once, so there is nothing to refund.",
        "takeover": (
            "Our security team has your case; please reset your password now. "
            f"Order {order_id} is on hold."
        ),
        "lost": f"Your parcel is lost: we refunded ${amount:.2f} for order {order_id}.",
        "delayed": f"Order {order_id} is on its way; tracking number {tracking}.",
    }[outcome]


_ACTIONS = {  # outcome -> (queue, resolution)
    "refund_ok": (None, "refunded"),
    "refund_denied": (None, "denied"),
    "tier2": ("billing_tier2", "escalated"),
    "abuse": ("fraud", "escalated"),
    "duplicate": (None, "refunded"),
    "no_duplicate": (None, "resolved"),
    "takeover": ("security", "escalated"),
    "lost": (None, "refunded"),
    "delayed": (None, "resolved"),
}
_TOPIC = {
    "refund": "refunds",
    "duplicate": "duplicate_charges",
    "shipping": "shipping",
    "takeover": "account_security",
}


def _numbers(text: str) -> list[float]:
    return [float(n) for n in _NUMBER.findall(text)]


class _SupportScript(ScriptedPolicy):
    def fallback(self, observation: ToolObservation) -> ToolCallAction:
        return call("close_ticket", resolution="resolved")

    def finish(self, outcome: str, order: dict[str, Any], amount: float | None = None) -> Script:
        """Act on a decided outcome: refund (``amount``, default the order's), escalate, reply."""
        queue, resolution = _ACTIONS[outcome]
        amount = order["amount"] if amount is None else amount
        if resolution == "refunded":
            yield call("issue_refund", order_id=order["order_id"], amount=amount)
        if queue:
            yield call("escalate", queue=queue, reason=f"{outcome} on {order['order_id']}")
        tracking = order.get("shipping", {}).get("tracking", "")
        yield call(
            "reply_to_customer",
            message=compose_reply(outcome, order["order_id"], amount, tracking),
        )
        yield call("close_ticket", resolution=resolution)


class HeuristicPolicy(_SupportScript):
    """Fetch, read the sections the claim needs, apply the numbers read."""

    always_check_abuse = False
    """Read the abuse section on every ticket, not only before a refund."""

    def script(self, opening: ToolObservation) -> Script:
        ticket = opening.result["ticket"]
        claim = claim_of(ticket["message"])
        found = _ORDER.findall(ticket["message"])
        data = (yield call("fetch_user_data", customer_id=ticket["customer_id"])).result
        orders = {o["order_id"]: o for o in data["orders"]}
        order = orders.get(found[0] if found else "", data["orders"][0])
        text = (yield call("check_policy", topic=_TOPIC[claim])).result["policy"]
        numbers = _numbers(text)
        amount = order["amount"]
        if claim == "takeover":
            yield from self.finish("takeover", order)
            return
        if claim == "duplicate":
            times = sum(c["order_id"] == order["order_id"] for c in data["charges"])
            outcome = "duplicate" if times > 1 else "no_duplicate"
        elif claim == "shipping":
            ship = order["shipping"]
            lost_after = numbers[0] if numbers else 14
            lost = ship["status"] == "lost" or (
                ship["status"] == "in_transit" and ship["days_in_transit"] > lost_after
            )
            outcome = "lost" if lost else "delayed"
        else:
            window, limit = (numbers + [30, 250])[:2]
            fee = float((re.findall(r"(\d+)%", text) or ["0"])[0])
            if order["opened"]:
                amount = round(order["amount"] * (100 - fee) / 100, 2)
            if order["final_sale"] or order["ordered_days_ago"] > window:
                outcome = "refund_denied"
            elif amount > limit:
                outcome = "tier2"
            else:
                outcome = "refund_ok"
        refunding = outcome in ("refund_ok", "duplicate", "lost")
        if refunding or self.always_check_abuse:
            abuse = _numbers((yield call("check_policy", topic="abuse")).result["policy"])
            customer = data["customer"]
            threshold = abuse[0] if abuse else 3
            repeat = customer["refunds_last_90_days"] >= threshold or customer["open_chargebacks"]
            if refunding and repeat:
                outcome = "abuse"
        yield from self.finish(outcome, order, amount)


class ReferencePolicy(HeuristicPolicy):
    """The steps-mode reference: the heuristic, reading the abuse section on every ticket, so its
    reads before the first action depend on the ticket's claim (in the opening), not on the
    outcome it found (``tests/test_steps_leak.py``)."""

    always_check_abuse = True


class OraclePolicy(_SupportScript):
    """Reads the hidden truth at reset; checks in the right order and acts on the truth."""

    def prepare(self, env: ToolEnvironment) -> None:
        self.truth = env.reveal()

    def script(self, opening: ToolObservation) -> Script:
        ticket = opening.result["ticket"]
        data = (yield call("fetch_user_data", customer_id=ticket["customer_id"])).result
        found = _ORDER.findall(ticket["message"])
        order = next(o for o in data["orders"] if o["order_id"] == found[0])
        yield call("check_policy", topic=self.truth["policy_section"].split()[-1])
        refund = _numbers(self.truth["refund"])
        yield from self.finish(self.truth["outcome"].split()[-1], order, (refund or [None])[0])


class RefundEverything(_SupportScript):
    """Degenerate: refund the order named on the ticket in full and close, no checks."""

    def script(self, opening: ToolObservation) -> Script:
        ticket = opening.result["ticket"]
        order_id = (_ORDER.findall(ticket["message"]) or ["O-0"])[0]
        data = (yield call("fetch_user_data", customer_id=ticket["customer_id"])).result
        amount = next((o["amount"] for o in data["orders"] if o["order_id"] == order_id), 1.0)
        yield call("issue_refund", order_id=order_id, amount=amount)
        yield call("reply_to_customer", message=f"We refunded order {order_id}.")
        yield call("close_ticket", resolution="refunded")


class CloseAtOnce(_SupportScript):
    """Degenerate: close the ticket as resolved without looking."""

    def script(self, opening: ToolObservation) -> Script:
        yield call("close_ticket", resolution="resolved")


class EscalateEverything(_SupportScript):
    """Degenerate: send every ticket to billing tier 2 with a stock reply."""

    def script(self, opening: ToolObservation) -> Script:
        yield call("escalate", queue="billing_tier2", reason="needs review")
        yield call("reply_to_customer", message="Your ticket was escalated to our billing team.")
        yield call("close_ticket", resolution="escalated")


REFERENCES = {"reference": ReferencePolicy}
"""Steps-mode reference policies (``pipeline.data.steps``); not ranked with ``POLICIES``."""

POLICIES = {
    "heuristic": HeuristicPolicy,
    "random": RandomPolicy,
    "oracle": OraclePolicy,
    "refund_everything": RefundEverything,
    "close_at_once": CloseAtOnce,
    "escalate_everything": EscalateEverything,
}
