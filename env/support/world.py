"""The hidden world of one support ticket, drawn from a seeded ``random.Random``.

A customer writes in with a claim (a refund request, a duplicate charge, a takeover, a parcel that
never came). The records (orders, charges, refund history, security events) and a policy book whose
numbers change per seed decide what the right handling is; about a third of the claims are
contradicted by the records, so the agent must look before it acts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal, get_args

from env.common.text import Fact
from env.support.config import SupportConfig

Topic = Literal["refunds", "duplicate_charges", "shipping", "account_security", "abuse"]
Queue = Literal["billing_tier2", "security", "fraud", "shipping"]
Resolution = Literal["refunded", "denied", "escalated", "resolved"]
TOPICS: tuple[str, ...] = get_args(Topic)
QUEUES: tuple[str, ...] = get_args(Queue)
RESOLUTIONS: tuple[str, ...] = get_args(Resolution)

# claim -> (task weights); outcomes of each claim are drawn below.
CLAIMS: dict[str, dict[str, float]] = {
    "easy": {"refund": 0.4, "duplicate": 0.3, "shipping": 0.3},
    "medium": {"refund": 0.4, "duplicate": 0.2, "shipping": 0.2, "takeover": 0.2},
    "hard": {"refund": 0.5, "duplicate": 0.15, "shipping": 0.15, "takeover": 0.2},
}
REFUND_OUTCOMES: dict[str, dict[str, float]] = {
    "easy": {"refund_ok": 0.65, "refund_denied": 0.35},
    "medium": {"refund_ok": 0.4, "refund_denied": 0.3, "tier2": 0.3},
    "hard": {"refund_ok": 0.25, "refund_denied": 0.25, "tier2": 0.25, "abuse": 0.25},
}
MESSAGES: dict[str, tuple[str, ...]] = {
    "refund": (
        "Hi, I'd like a refund for my {item} (order {oid}). It isn't what I expected.",
        "Please refund order {oid}; the {item} does not work for me.",
        "Can I get my money back for the {item}? Order {oid}.",
    ),
    "duplicate": (
        "I was charged twice for order {oid} ({item}). Please fix this!",
        "My card shows two payments for order {oid}.",
        "Order {oid} was billed double, I see two charges for the {item}.",
    ),
    "shipping": (
        "My order {oid} ({item}) never arrived. Where is it?",
        "Still waiting for my {item}, order {oid}. Has it been lost?",
        "Order {oid} has not been delivered yet.",
    ),
    "takeover": (
        "Someone got into my account and changed my email. I did not place order {oid}. "
        "Please refund it and lock my account.",
        "I think my account was hacked: my password was reset and order {oid} is not mine. "
        "Refund it please.",
        "Strange logins on my account and an order {oid} I never made. Please help and refund it.",
    ),
}
ITEMS = (
    "headphones",
    "desk lamp",
    "rain jacket",
    "coffee grinder",
    "backpack",
    "monitor arm",
    "running shoes",
    "blender",
    "keyboard",
    "phone case",
    "wool blanket",
    "smart plug",
)
NAMES = (
    "Ana Ruiz",
    "Ben Okafor",
    "Chen Wei",
    "Dana Levi",
    "Eli Novak",
    "Fatima Zahra",
    "Greta Holm",
    "Hiro Sato",
    "Ines Costa",
    "Jonas Berg",
    "Kemi Ade",
    "Lena Fischer",
)


@dataclass
class Order:
    """One order in the customer's history."""

    order_id: str
    item: str
    amount: float
    ordered_days_ago: int
    final_sale: bool
    status: str
    tracking: str
    days_in_transit: int
    opened: bool = False

    def public(self) -> dict:
        return {
            "order_id": self.order_id,
            "item": self.item,
            "amount": self.amount,
            "ordered_days_ago": self.ordered_days_ago,
            "final_sale": self.final_sale,
            "opened": self.opened,
            "shipping": {
                "status": self.status,
                "tracking": self.tracking,
                "days_in_transit": self.days_in_transit,
            },
        }


@dataclass
class PolicyBook:
    """The numbers of this seed's policy book."""

    refund_window: int
    agent_limit: int
    abuse_threshold: int
    lost_after: int
    restocking_fee: int

    def refund_for(self, order: Order) -> float:
        """What an eligible refund of ``order`` pays: opened items lose the restocking fee."""
        if not order.opened:
            return order.amount
        return round(order.amount * (100 - self.restocking_fee) / 100, 2)

    def text(self, topic: str) -> str:
        """The policy section the agent reads with ``check_policy(topic)``."""
        return {
            "refunds": (
                f"Refunds: an order may be refunded within {self.refund_window} days of "
                f"purchase; final-sale items are never refunded. Agents may issue refunds up to "
                f"${self.agent_limit}; larger refunds are escalated to billing_tier2 without "
                f"refunding. Opened items are refunded minus a {self.restocking_fee}% restocking "
                "fee. Deny ineligible requests and tell the customer why."
            ),
            "duplicate_charges": (
                "Duplicate charges: if the charges list shows the same order charged twice, refund "
                "the extra charge. If it was charged once, refund nothing and tell the customer "
                "the order was charged only once."
            ),
            "shipping": (
                f"Shipping: a parcel marked lost, or in transit for more than {self.lost_after} "
                "days, is refunded in full. Otherwise refund nothing and reply with the tracking "
                "number."
            ),
            "account_security": (
                "Account security: if security events show a takeover, do not move money; "
                "escalate to the security queue and tell the customer to reset the password."
            ),
            "abuse": (
                f"Abuse: before any refund, a customer with {self.abuse_threshold} or more refunds "
                "in the last 90 days, or any open chargeback, is refunded nothing and escalated to "
                "the fraud queue; tell the customer the request is under review."
            ),
        }[topic]


@dataclass
class Truth:
    """What the right handling is (hidden)."""

    outcome: str
    refund_order: str | None
    refund_amount: float
    queue: str | None
    resolution: str
    topic: str
    topics: tuple[str, ...]
    reply_facts: list[Fact] = field(default_factory=list)

    @property
    def reply_avoid(self) -> list[Fact]:
        """Claims a reply must not make: a refund that did not happen, or a denial of one that did."""
        if self.refund_order is None:
            return [("we refunded", "have refunded", "refund issued", "refund is on its way")]
        return [("cannot be refunded", "not refundable", "under review", "denied")]


@dataclass
class SupportWorld:
    """Everything hidden behind the tools of one episode."""

    ticket: dict
    customer: dict
    orders: list[Order]
    charges: list[dict]
    security_events: list[str]
    policy: PolicyBook
    truth: Truth

    def order(self, order_id: str) -> Order | None:
        return next((o for o in self.orders if o.order_id == order_id), None)


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _ids(rng: random.Random, prefix: str, n: int) -> list[str]:
    return [f"{prefix}-{v}" for v in rng.sample(range(10000, 99999), n)]


def build_world(task: str, rng: random.Random, config: SupportConfig) -> SupportWorld:
    """Draw a ticket, its customer records and the policy book for ``task``."""
    policy = PolicyBook(
        rng.choice(config.refund_windows),
        rng.choice(config.agent_limits),
        rng.choice(config.abuse_thresholds),
        rng.choice(config.lost_after_days),
        rng.choice(config.restocking_fees),
    )
    claim = _pick(rng, CLAIMS[task])
    n_orders = rng.randint(2, 4) if task != "hard" else rng.randint(4, 6)
    order_ids = _ids(rng, "O", n_orders)
    orders = []
    for oid in order_ids:
        days = rng.randint(1, policy.refund_window + 30)
        in_transit = rng.random() < 0.2
        orders.append(
            Order(
                oid,
                rng.choice(ITEMS),
                round(rng.uniform(12, policy.agent_limit * 0.9), 2),
                days,
                rng.random() < 0.15,
                "in_transit" if in_transit else "delivered",
                "1Z" + "".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789", k=8)),
                min(days, rng.randint(1, 6)) if in_transit else 0,
                rng.random() < 0.4,
            )
        )
    target = rng.choice(orders)
    target.status, target.days_in_transit, target.final_sale = "delivered", 0, False
    target.ordered_days_ago = rng.randint(1, policy.refund_window)
    refunds_90d = rng.randint(0, policy.abuse_threshold - 1)
    chargebacks = 0
    security: list[str] = ["login from usual device"]
    oid = target.order_id
    if claim == "refund":
        outcome = _pick(rng, REFUND_OUTCOMES[task])
        topics: tuple[str, ...] = ("refunds", "abuse")
        if outcome == "refund_ok":
            truth = Truth(
                outcome,
                oid,
                policy.refund_for(target),
                None,
                "refunded",
                "refunds",
                topics,
                [oid, policy.refund_for(target)],
            )
        elif outcome == "refund_denied":
            if rng.random() < 0.5:
                target.ordered_days_ago = policy.refund_window + rng.randint(1, 40)
                why: Fact = ("window", "days")
            else:
                target.final_sale = True
                why = ("final sale", "non refundable", "not refundable")
            truth = Truth(outcome, None, 0.0, None, "denied", "refunds", ("refunds",), [oid, why])
        elif outcome == "tier2":
            target.amount = round(rng.uniform(policy.agent_limit * 1.3, policy.agent_limit * 3), 2)
            truth = Truth(
                outcome,
                None,
                0.0,
                "billing_tier2",
                "escalated",
                "refunds",
                ("refunds",),
                [oid, ("billing", "tier 2")],
            )
        else:
            if rng.random() < 0.6:
                refunds_90d = policy.abuse_threshold + rng.randint(0, 3)
            else:
                chargebacks = rng.randint(1, 2)
            truth = Truth(
                outcome, None, 0.0, "fraud", "escalated", "abuse", topics, [oid, ("review",)]
            )
    elif claim == "duplicate":
        real = rng.random() >= config.misleading_share
        topics = ("duplicate_charges", "abuse") if real else ("duplicate_charges",)
        if real:
            truth = Truth(
                "duplicate",
                oid,
                target.amount,
                None,
                "refunded",
                "duplicate_charges",
                topics,
                [oid, target.amount],
            )
        else:
            truth = Truth(
                "no_duplicate",
                None,
                0.0,
                None,
                "resolved",
                "duplicate_charges",
                topics,
                [oid, ("once", "one charge", "single charge")],
            )
    elif claim == "shipping":
        lost = rng.random() >= config.misleading_share
        target.ordered_days_ago = max(target.ordered_days_ago, policy.lost_after + 2)
        if lost:
            target.status = "lost" if rng.random() < 0.5 else "in_transit"
            target.days_in_transit = (
                policy.lost_after + rng.randint(1, 8)
                if target.status == "in_transit"
                else rng.randint(3, policy.lost_after)
            )
            target.ordered_days_ago = max(target.ordered_days_ago, target.days_in_transit)
            truth = Truth(
                "lost",
                oid,
                target.amount,
                None,
                "refunded",
                "shipping",
                ("shipping", "abuse"),
                [oid, target.amount],
            )
        else:
            target.status, target.days_in_transit = (
                "in_transit",
                rng.randint(2, policy.lost_after - 2),
            )
            target.ordered_days_ago = target.days_in_transit + rng.randint(0, 2)
            truth = Truth(
                "delayed",
                None,
                0.0,
                None,
                "resolved",
                "shipping",
                ("shipping",),
                [oid, target.tracking],
            )
    else:
        security = [
            "password reset from new device",
            f"login from {rng.choice(['RO', 'VN', 'BR', 'NG'])}",
            "email address changed",
        ]
        truth = Truth(
            "takeover",
            None,
            0.0,
            "security",
            "escalated",
            "account_security",
            ("account_security",),
            [("password",), ("security",)],
        )
    message = rng.choice(MESSAGES[claim]).format(oid=oid, item=target.item)
    charges = []
    for order in orders:
        times = 2 if (truth.outcome == "duplicate" and order is target) else 1
        for _ in range(times):
            charges.append(
                {
                    "order_id": order.order_id,
                    "amount": order.amount,
                    "charged_days_ago": order.ordered_days_ago,
                }
            )
    rng.shuffle(charges)
    for i, charge in enumerate(charges):
        charge["charge_id"] = f"ch_{rng.randrange(16**6):06x}{i}"
    customer_id = _ids(rng, "C", 1)[0]
    customer = {
        "customer_id": customer_id,
        "name": rng.choice(NAMES),
        "tier": rng.choice(["standard", "plus"]),
        "member_since_days": rng.randint(30, 2000),
        "refunds_last_90_days": refunds_90d,
        "open_chargebacks": chargebacks,
    }
    ticket = {"ticket_id": _ids(rng, "T", 1)[0], "customer_id": customer_id, "message": message}
    return SupportWorld(ticket, customer, orders, charges, security, policy, truth)
