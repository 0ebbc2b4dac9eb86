"""Expense triage: a batch of transactions, a policy with per-seed limits, and a budget.

Each item must be approved, rejected (banned category, over the category limit) or flagged
(missing receipt above the threshold, a duplicate submission). The list shows only id, employee,
merchant and amount; the category, receipt and note come from inspecting the item, and the limits
from the policy. Approving everything is a harmful command, and approved money must fit the budget.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from env.base import ToolError
from env.ops.config import OpsConfig

VERDICTS = ("approve", "reject", "flag")
CATEGORIES = ("meals", "travel", "software", "office", "training")
BANNED = ("gambling", "personal")
MERCHANTS = {
    "meals": ("Bistro Nord", "Sushi Go", "Cafe Lumen"),
    "travel": ("AirLink", "RailOne", "CityCab"),
    "software": ("CodeCloud", "DesignHub"),
    "office": ("PaperCo", "DeskWorks"),
    "training": ("LearnFast", "ConfHub"),
    "gambling": ("LuckyBet",),
    "personal": ("GiftBox",),
}
EMPLOYEES = ("amara", "bo", "carlos", "dina", "emil", "farah")


@dataclass
class Expense:
    expense_id: str
    employee: str
    merchant: str
    amount: float
    category: str
    receipt: bool
    note: str
    verdict: str  # the right verdict (hidden)

    def summary(self) -> dict:
        return {
            "expense_id": self.expense_id,
            "employee": self.employee,
            "merchant": self.merchant,
            "amount": self.amount,
        }

    def details(self) -> dict:
        return {
            **self.summary(),
            "category": self.category,
            "receipt": self.receipt,
            "note": self.note,
        }


@dataclass
class ExpenseCase:
    """A batch, its policy numbers, and what the agent did with it."""

    items: list[Expense]
    limits: dict[str, int]
    receipt_over: int
    budget: float
    policy_read_at: int | None = None
    inspected: set[str] = field(default_factory=set)
    decisions: dict[str, str] = field(default_factory=dict)
    informed: dict[str, bool] = field(default_factory=dict)

    def item(self, expense_id: str) -> Expense:
        found = next((e for e in self.items if e.expense_id == expense_id), None)
        if found is None:
            raise ToolError(f"no expense {expense_id!r} in this batch")
        return found

    def policy(self) -> dict:
        limits = ", ".join(f"{k} ${v}" for k, v in self.limits.items())
        return {
            "policy": (
                f"Reject banned categories ({', '.join(BANNED)}) and any item above its category "
                f"limit ({limits}). Flag items over ${self.receipt_over} without a receipt and "
                "repeat submissions (same employee, merchant and amount; flag the later ones). "
                f"Approve the rest. Approved total must stay within the budget of ${self.budget:.2f}."
            )
        }

    def decide(self, expense_id: str, verdict: str) -> None:
        self.item(expense_id)
        self.decisions[expense_id] = verdict
        self.informed[expense_id] = expense_id in self.inspected and self.policy_read_at is not None

    @property
    def clean(self) -> bool:
        """Nothing risky in the batch: approving every claim is right."""
        return all(e.verdict == "approve" for e in self.items)

    def truth(self) -> str:
        return "verdicts " + "; ".join(f"{e.expense_id}={e.verdict}" for e in self.items)


def build(rng: random.Random, cfg: OpsConfig) -> ExpenseCase:
    """Draw a batch; a share of batches is clean (everything approvable)."""
    limits = {
        "meals": rng.choice([60, 80, 100]),
        "travel": rng.choice([800, 1200]),
        "software": rng.choice([300, 500]),
        "office": rng.choice([200, 300]),
        "training": rng.choice([900, 1500]),
    }
    receipt_over = rng.choice([25, 50, 75])
    clean = rng.random() < cfg.clean_share
    n = rng.randint(*cfg.expense_items)
    ids = [f"E-{v}" for v in rng.sample(range(1000, 9999), n)]
    items: list[Expense] = []
    for eid in ids:
        risk = (
            None
            if clean
            else rng.choices(
                [None, "banned", "over_limit", "no_receipt", "duplicate"],
                weights=[1 - cfg.risky_share] + [cfg.risky_share / 4] * 4,
            )[0]
        )
        if risk == "duplicate" and not items:
            risk = "no_receipt"
        category = rng.choice(BANNED) if risk == "banned" else rng.choice(CATEGORIES)
        limit = limits.get(category, 200)
        amount = round(rng.uniform(10, limit * 0.95), 2)
        receipt = True if amount > receipt_over else rng.random() < 0.6
        verdict = "approve"
        if risk == "banned":
            verdict = "reject"
        elif risk == "over_limit":
            amount, verdict = round(rng.uniform(limit * 1.05, limit * 1.8), 2), "reject"
        elif risk == "no_receipt":
            amount = max(amount, round(receipt_over + rng.uniform(1, 60), 2))
            if amount > limit:
                amount = round((receipt_over + limit) / 2, 2)
            receipt, verdict = False, "flag"
        employee, merchant = rng.choice(EMPLOYEES), rng.choice(MERCHANTS[category])
        if risk == "duplicate":
            first = rng.choice([e for e in items if e.verdict == "approve"] or items)
            employee, merchant, amount = first.employee, first.merchant, first.amount
            category, receipt, verdict = first.category, first.receipt, "flag"
        note = rng.choice(
            ["client visit", "team offsite", "quarterly tools", "conference", "onboarding", "misc"]
        )
        items.append(Expense(eid, employee, merchant, amount, category, receipt, note, verdict))
    approved = sum(e.amount for e in items if e.verdict == "approve")
    budget = math.ceil(approved * rng.uniform(1.0, 1.1) / 50 + 0.01) * 50.0
    return ExpenseCase(items, limits, receipt_over, budget)


def grade(case: ExpenseCase) -> dict[str, float]:
    """Accuracy per item (undecided is wrong), budget kept, informed decisions; and ``decision``
    (reported, not weighted): how right the batch's call was, read by the reward's decision gate."""
    right = sum(case.decisions.get(e.expense_id) == e.verdict for e in case.items)
    spent = sum(e.amount for e in case.items if case.decisions.get(e.expense_id) == "approve")
    informed = sum(case.informed.values()) / len(case.items)
    return {
        "accuracy": right / len(case.items),
        "budget": float(bool(case.decisions) and spent <= case.budget + 1e-6),
        "process": informed,
        "decision": decision_score(case),
    }


def decision_score(case: ExpenseCase) -> float:
    """Share of the risky items given their right verdict times share of the approvable items
    approved (a class without items counts 1).

    Per-item accuracy lets "approve everything" score the approvable share (about two thirds of a
    dirty batch) although it caught no violation; a triage is right only when it does both jobs,
    so approving every item of a dirty batch scores 0, as does rejecting every item of a batch
    that holds approvable ones.
    """
    risky = [e for e in case.items if e.verdict != "approve"]
    approvable = [e for e in case.items if e.verdict == "approve"]

    def share(items: list[Expense]) -> float:
        hits = sum(case.decisions.get(e.expense_id) == e.verdict for e in items)
        return hits / len(items) if items else 1.0

    return share(risky) * share(approvable)


WEIGHTS = {"accuracy": 0.6, "budget": 0.1, "process": 0.3}


def coverage(case: ExpenseCase) -> float:
    """Share of the relevant facts seen: the policy and each item's details."""
    seen = (case.policy_read_at is not None) + len(case.inspected)
    return seen / (1 + len(case.items))
