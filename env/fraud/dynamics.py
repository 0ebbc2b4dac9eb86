"""How the payments world moves: both roles' actions, settlement, legit traffic and the detector.

One tick = the defender's move, then settlement of last tick's pending transactions, then the
ring's move, then legitimate traffic and the (noisy) alert engine. Either move may come from the
agent or from a scripted opponent; both go through the same methods here, so the game is the same
whichever side the model plays. Bad input raises ``ToolError`` before anything changes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from env.base import ToolError
from env.fraud.config import FraudConfig
from env.fraud.txns import TxnBook, txn_id
from env.fraud.world import Account, Txn, World

ALERT_REASONS = ("amount_spike", "velocity", "new_device", "night_activity", "cash_withdrawal")


@dataclass
class Ledger:
    """What the defender did, for grading (hidden labels are looked up only at grade time)."""

    restricted: list[tuple[str, int]] = field(default_factory=list)  # (entity, tick)
    holds: list[tuple[str, bool]] = field(default_factory=list)  # (txn id, was ring)
    challenges: list[tuple[str, bool]] = field(default_factory=list)  # (account, failed)
    looked: set[str] = field(default_factory=set)
    close_tick: int | None = None


class Engine(TxnBook):
    """The mutable episode: world, hidden suspicion, alerts, and the ledger."""

    def __init__(self, world: World, config: FraudConfig, rng: random.Random):
        self.w = world
        self.cfg = config
        self.rng = rng
        self.susp: dict[str, float] = dict.fromkeys(world.accounts, 0.0)
        self.susp.update(dict.fromkeys(world.merchants, 0.0))
        self.ledger = Ledger()
        self.alerts: list[dict] = []
        self.alert_txns: list[Txn] = []  # the transaction behind each alert, in the same order
        self.ring_events: list[str] = []
        self._n = 0
        self._settled = 0  # pending() looks only past this index (see env.fraud.txns)
        self._merchant_ids = sorted(world.merchants)  # the set of merchants never changes
        total = world.total  # fixed at build: the ring view's rounded total and caps, once
        self.view_caps = (
            round(total, 2),
            round(config.transfer_cap * total, 2),
            round(config.cashout_cap * total, 2),
        )

    # ----- helpers ------------------------------------------------------------------------------

    def _acc(self, account_id: str) -> Account:
        acc = self.w.accounts.get(account_id)
        if acc is None:
            raise ToolError(f"unknown account {account_id!r}; ids look like U01")
        return acc

    def _decline(self, txn: Txn, status: str) -> None:
        """Stop a pending transaction and its partner; ring money stopped is seized."""
        if txn.status != "pending":
            return
        txn.status = status
        if txn.route is None:
            return
        if txn.kind in ("payment", "refund", "cashout"):
            self.w.seized += txn.amount
        for other in self.pending():
            if other.counterparty == txn.id or (
                txn.kind == "payout" and other.id == txn.counterparty
            ):
                self._decline(other, status)

    # ----- defender moves -----------------------------------------------------------------------

    def monitor(self, account_id: str) -> dict:
        acc = self._acc(account_id)
        self.ledger.looked.add(acc.id)
        recent = [t for t in self._since(self.w.tick - 3) if t.account == acc.id]
        return {
            "account": acc.id,
            "frozen": acc.frozen,
            "transactions": [self.public_txn(t) for t in recent[-12:]],
        }

    def challenge(self, account_id: str) -> dict:
        acc = self._acc(account_id)
        if acc.frozen:
            raise ToolError(f"account {acc.id} is frozen already")
        self.ledger.looked.add(acc.id)
        ring = bool(acc.ring_role)
        p = self.cfg.challenge_fail_ring if ring else self.cfg.challenge_fail_legit
        if ring and self.w.family == "account_takeover" and acc.ring_role == "source":
            p = min(1.0, p + 0.15)
        failed = self.rng.random() < p
        self.ledger.challenges.append((acc.id, failed))
        if failed:
            for txn in self.pending():
                if txn.account == acc.id and txn.kind in ("payment", "cashout"):
                    self._decline(txn, "declined")
        self.ring_events.append(f"{acc.id} was challenged ({'failed' if failed else 'passed'})")
        return {"account": acc.id, "passed": not failed}

    def freeze(self, account_id: str) -> dict:
        acc = self._acc(account_id)
        if acc.frozen:
            raise ToolError(f"account {acc.id} is frozen already")
        acc.frozen = True
        self.ledger.restricted.append((acc.id, self.w.tick))
        self.w.seized += acc.pool + acc.staged
        acc.pool = acc.staged = 0.0
        for txn in self.pending():
            if txn.account == acc.id:
                self._decline(txn, "declined")
        self.ring_events.append(f"{acc.id} was frozen")
        return {"account": acc.id, "frozen": True}

    def hold(self, txn_id: str) -> dict:
        txn = self.find_txn(txn_id)
        if txn is None:
            raise ToolError(f"unknown transaction {txn_id!r}; ids look like T0001")
        if txn.status != "pending":
            raise ToolError(f"transaction {txn_id} is {txn.status}, not pending")
        self.ledger.holds.append((txn.id, txn.route is not None))
        self._decline(txn, "held")
        self.ring_events.append(f"{txn.id} was held")
        return {"transaction": txn.id, "held": True}

    def block_merchant(self, merchant_id: str) -> dict:
        merchant = self.w.merchants.get(merchant_id)
        if merchant is None:
            raise ToolError(f"unknown merchant {merchant_id!r}; ids look like M1")
        if merchant.blocked:
            raise ToolError(f"merchant {merchant_id} is blocked already")
        merchant.blocked = True
        self.ledger.restricted.append((merchant.id, self.w.tick))
        for txn in self.pending():
            if txn.merchant == merchant.id:
                self._decline(txn, "declined")
        self.ring_events.append(f"{merchant.id} was blocked")
        return {"merchant": merchant.id, "blocked": True}

    def investigate_neighborhood(self, account_id: str) -> dict:
        acc = self._acc(account_id)
        self.ledger.looked.add(acc.id)
        shared = sorted(
            a.id for a in self.w.accounts.values() if a.device == acc.device and a.id != acc.id
        )
        paid = {(t.merchant, t.tick) for t in self.w.txns if t.account == acc.id and t.merchant}
        linked: dict[str, int] = {}
        for t in self.w.txns:
            if t.kind == "payout" and t.account != acc.id and (t.merchant, t.tick) in paid:
                linked[t.account] = linked.get(t.account, 0) + 1
        return {
            "account": acc.id,
            "shared_device": shared,
            "same_tick_payouts": dict(sorted(linked.items())),
        }

    # ----- ring moves ---------------------------------------------------------------------------

    def route(self, route_id: str):
        route = self.w.routes.get(route_id)
        if route is None:
            raise ToolError(
                f"unknown route {route_id!r}; the ring's routes: {sorted(self.w.routes)}"
            )
        return route

    def _bump(self, entity: str, amount: float) -> None:
        self.susp[entity] = max(0.0, min(1.5, self.susp.get(entity, 0.0) + amount))

    def _blocked(self, route) -> str | None:
        src, mule = self.w.accounts[route.source], self.w.accounts[route.mule]
        if src.frozen:
            return f"source {src.id} is frozen"
        if mule.frozen:
            return f"mule {mule.id} is frozen"
        if self.w.merchants[route.merchant].blocked:
            return f"merchant {route.merchant} is blocked"
        return None

    def split_payment(self, route_id: str, amount: float, parts: int, refund: bool = False) -> dict:
        route = self.route(route_id)
        cap = self.cfg.transfer_cap * self.w.total * (0.5 if refund else 1.0)
        src = self.w.accounts[route.source]
        why = self._blocked(route)
        amount = round(min(amount, cap, src.pool), 2)
        if why or amount <= 0:
            return {"route": route.id, "moved": 0.0, "why": why or "no funds left at the source"}
        src.pool -= amount
        x = amount / (self.cfg.transfer_cap * self.w.total)
        if route.merchant == self.w.blind_merchant:
            x *= 0.3  # the bank's risk model barely scores this merchant's flows (hidden gap)
        if refund:
            self._bump(route.merchant, 0.3 * x)
            self._bump(route.source, 0.15 * x)
            self._bump(route.mule, 0.12 * x)
        else:
            self._bump(route.source, 0.35 * x / math.sqrt(parts) + 0.03 * parts)
            self._bump(route.mule, 0.3 * x / math.sqrt(parts) + 0.02 * parts)
            self._bump(route.merchant, 0.08 * x)
        part = amount / parts
        for _ in range(parts):
            pay = self._txn("refund" if refund else "payment", route.source, route.merchant, part)
            pay.route, pay.parts = route.id, parts
            out = self._txn("payout", route.mule, route.merchant, part * self.rng.uniform(0.9, 1))
            out.route, out.parts, out.counterparty = route.id, parts, pay.id
        return {"route": route.id, "moved": amount, "parts": parts}

    def rotate_mule(self, route_id: str) -> dict:
        route = self.route(route_id)
        if not self.w.reserves:
            raise ToolError("no reserve mules left")
        old, new = self.w.accounts[route.mule], self.w.accounts[self.w.reserves.pop(0)]
        new.ring_role = "mule"
        if not old.frozen:
            new.staged, old.staged = old.staged, 0.0
        route.mule = new.id
        self._bump(new.id, 0.1)
        return {"route": route.id, "mule": new.id, "staged": round(new.staged, 2)}

    def switch_merchant(self, route_id: str, merchant_id: str) -> dict:
        route = self.route(route_id)
        merchant = self.w.merchants.get(merchant_id)
        if merchant is None:
            raise ToolError(f"unknown merchant {merchant_id!r}; ids look like M1")
        if merchant.id == route.merchant:
            raise ToolError(f"route {route.id} already runs through {merchant.id}")
        route.merchant = merchant.id
        self._bump(route.source, 0.05)
        return {"route": route.id, "merchant": merchant.id, "blocked": merchant.blocked}

    def rotate_device(self, account_id: str) -> dict:
        acc = self._acc(account_id)
        if acc.ring_role not in ("source", "mule"):
            raise ToolError(f"{acc.id} is not one of the ring's active accounts")
        if self.w.devices_left <= 0:
            raise ToolError("no fresh devices left")
        self.w.devices_left -= 1
        acc.device = f"D{self.rng.randint(1000, 9999)}"
        self._bump(acc.id, -0.3)
        return {"account": acc.id, "fresh_devices_left": self.w.devices_left}

    def delay(self) -> dict:
        for uid in self.w.ring_accounts():
            self._bump(uid, -0.12)
        return {"waited": True}

    def cashout_attempt(self, route_id: str, amount: float) -> dict:
        route = self.route(route_id)
        mule = self.w.accounts[route.mule]
        cap = self.cfg.cashout_cap * self.w.total
        amount = round(min(amount, cap, mule.staged), 2)
        if mule.frozen or amount <= 0:
            why = f"mule {mule.id} is frozen" if mule.frozen else "nothing staged at the mule"
            return {"route": route.id, "withdrawn": 0.0, "why": why}
        mule.staged -= amount
        y = amount / cap
        self._bump(mule.id, 0.25 * y * y + 0.04)
        txn = self._txn("cashout", mule.id, None, amount)
        txn.route = route.id
        return {"route": route.id, "withdrawn": amount}

    # ----- the tick -----------------------------------------------------------------------------

    def settle(self) -> None:
        """Last tick's pending transactions settle unless held, declined or frozen."""
        w = self.w
        tick, accounts, merchants = w.tick, w.accounts, w.merchants
        due = [t for t in w.txns[self._settled :] if t.status == "pending" and t.tick < tick]
        for txn in due:
            acc = accounts[txn.account]
            if acc.frozen or (txn.merchant and merchants[txn.merchant].blocked):
                self._decline(txn, "declined")
        for txn in due:
            if txn.status != "pending":
                continue
            txn.status = "settled"
            if txn.route is None:
                continue
            acc = accounts[txn.account]
            if txn.kind == "payout":
                acc.staged += txn.amount
                w.exposed.add(acc.id)
                if merchants[txn.merchant].colluding:
                    w.exposed.add(txn.merchant)
            elif txn.kind == "cashout":
                w.laundered += txn.amount
        self._mark_settled()

    def legit_traffic(self) -> None:
        """Customers shop. The hottest loop of a tick: bound methods and an inlined ``_txn``; the
        draws are the same calls in the same order as ever."""
        rng, w = self.rng, self.w
        draw, choice, gauss, uniform = rng.random, rng.choice, rng.gauss, rng.uniform
        activity, merchants, shops = self.cfg.legit_activity, self._merchant_ids, w.merchants
        txns, tick, n = w.txns, w.tick, self._n
        for acc in w.accounts.values():
            if acc.frozen or draw() >= activity:
                continue
            merchant = choice(merchants)
            if shops[merchant].blocked:
                continue
            amount = acc.avg_amount * math.exp(gauss(0, 0.6))
            if draw() < 0.1:
                amount *= uniform(4, 15)  # a big-ticket purchase: flights, a laptop
            roll = draw()
            if acc.seller and roll < 0.35:
                kind, amount = "payout", amount * uniform(2, 10)
            elif acc.seller and roll < 0.5:
                kind, merchant, amount = "cashout", None, amount * uniform(2, 8)
            elif roll < acc.refund_rate:
                kind = "refund"
            else:
                kind = "payment"
            n += 1
            txns.append(Txn(txn_id(n), tick, kind, acc.id, merchant, None, round(amount, 2)))
        self._n = n

    def detect(self) -> None:
        """Raise noisy alerts on this tick's transactions; update the hidden suspicion."""
        self.alerts, self.alert_txns = alerts, alert_txns = [], []
        cap = self.cfg.transfer_cap * self.w.total or 1.0
        draw, choice, accounts = self.rng.random, self.rng.choice, self.w.accounts
        false_rate = self.cfg.false_alert_rate
        for txn in self._this_tick():
            kind = txn.kind
            if txn.route is not None:
                x = txn.amount * txn.parts / cap
                p = min(0.9, 0.12 + 0.5 * x / math.sqrt(txn.parts) + 0.04 * txn.parts)
                if kind == "payout":
                    p *= 0.6
            else:
                p = false_rate * (1 + 2 * accounts[txn.account].risk_score)
                if kind == "cashout":
                    p *= 1.5
            if draw() < p:
                reason = choice(ALERT_REASONS)
                if kind == "cashout":
                    reason = "cash_withdrawal"
                alert = self.public_txn(txn)
                alert["reason"] = reason
                alerts.append(alert)
                alert_txns.append(txn)
                if txn.route is None:
                    self._bump(txn.account, 0.2)
        susp, decay = self.susp, self.cfg.suspicion_decay
        for key in susp:
            susp[key] *= decay

    def progress_possible(self) -> bool:
        """Can the ring still move or withdraw anything?"""
        w = self.w
        if not w.ring:
            return True
        if any(t.route for t in self.pending()):
            return True
        open_path: bool | None = None  # worked out only if some source still holds funds
        for acc in w.accounts.values():
            if acc.frozen:
                continue
            if acc.staged > 1.0:
                return True
            if acc.pool > 1.0:
                if open_path is None:
                    mules_ok = any(not w.accounts[r.mule].frozen for r in w.routes.values())
                    mules_ok = mules_ok or any(not w.accounts[u].frozen for u in w.reserves)
                    open_path = mules_ok and any(not m.blocked for m in w.merchants.values())
                if open_path:
                    return True
        return False
