"""What each side sees, and the adaptive scripted opponents that play the side the agent does not.

An opponent is any object with ``act(view: dict) -> ToolCallAction`` (the ``Opponent`` protocol):
the environment hands it its side's view each tick and applies the call through the same world
methods the agent's tools use. The scripted ones below adapt to what they see (a ring rotates
mules, devices and merchants when the defender closes in; the bank's defender freezes what its risk
engine scores over a hidden bar); a second model served elsewhere can be plugged in the same way.
"""

from __future__ import annotations

import random
from typing import Any, Protocol

from env.base import ToolCallAction
from env.fraud.dynamics import Engine


class Opponent(Protocol):
    """The side the agent does not play."""

    def act(self, view: dict[str, Any]) -> ToolCallAction: ...


def _alert(susp: dict[str, float], bias: dict[str, float], entity: str) -> float:
    """The alert level the ring sees: hidden suspicion plus a hidden per-entity bias, clipped to
    [0, 1] (the clipped ends need no ``round``, the slowest part of a ring view)."""
    raw = susp.get(entity, 0.0) + bias.get(entity, 0.0)
    if not raw > 0.0:  # what max(0.0, raw) gives for -0.0 and nan too
        return 0.0
    return 1.0 if raw >= 1.0 else round(raw, 2)


def defender_view(engine: Engine, opening: bool = False) -> dict[str, Any]:
    """The defender's partial view: alerts, restrictions, and at the start the customer table."""
    w = engine.w
    view: dict[str, Any] = {
        "tick": w.tick,
        "alerts": engine.alerts,
        "frozen": sorted(a.id for a in w.accounts.values() if a.frozen),
        "blocked": sorted(m.id for m in w.merchants.values() if m.blocked),
    }
    if opening:
        view["accounts"] = [
            {
                "id": a.id,
                "age_days": a.age_days,
                "devices": a.devices,
                "refund_rate": a.refund_rate,
                "night_share": a.night_share,
                "avg_amount": a.avg_amount,
                "risk_score": a.risk_score,
            }
            for a in w.accounts.values()
        ]
        view["merchants"] = [
            {"id": m.id, "category": m.category, "refund_rate": m.refund_rate}
            | {"risk_score": m.risk_score}
            for m in w.merchants.values()
        ]
    return view


def ring_view(engine: Engine) -> dict[str, Any]:
    """The ring's view: its routes, balances, mule status and the alert level on each entity."""
    w = engine.w
    accounts, merchants, susp, bias = w.accounts, w.merchants, engine.susp, w.bias
    routes = []  # built every tick (the scripted ring reads it too): plain lookups, no helpers
    for r in w.routes.values():
        src, mule = accounts[r.source], accounts[r.mule]
        routes.append(
            {
                "route": r.id,
                "source": src.id,
                "merchant": r.merchant,
                "mule": mule.id,
                "source_funds": round(src.pool, 2),
                "mule_staged": round(mule.staged, 2),
                "source_alert": _alert(susp, bias, src.id),
                "mule_alert": _alert(susp, bias, mule.id),
                "merchant_alert": _alert(susp, bias, r.merchant),
                "source_frozen": src.frozen,
                "mule_frozen": mule.frozen,
                "merchant_blocked": merchants[r.merchant].blocked,
            }
        )
    events, engine.ring_events = engine.ring_events, []
    in_flight = sum(t.amount for t in engine.pending() if t.route and t.kind != "payout")
    total, transfer_cap, cashout_cap = engine.view_caps
    return {
        "tick": w.tick,
        "total": total,
        "laundered": round(w.laundered, 2),
        "lost": round(w.seized, 2),
        "in_flight": round(in_flight, 2),
        "transfer_cap": transfer_cap,
        "cashout_cap": cashout_cap,
        "routes": routes,
        "reserve_mules": len(w.reserves),
        "fresh_devices": w.devices_left,
        "merchants": {m.id: ("blocked" if m.blocked else "open") for m in merchants.values()},
        "events": events,
    }


# (id key, alert key, frozen key) of a route's two accounts in a ring view
_SIDES = (("source", "source_alert", "source_frozen"), ("mule", "mule_alert", "mule_frozen"))


def _call(tool: str, **arguments: Any) -> ToolCallAction:
    return ToolCallAction(tool=tool, arguments=arguments)


class ScriptedRing:
    """An adaptive ring: repairs broken routes, cools hot accounts, then moves and withdraws."""

    def __init__(self, rng: random.Random, bar: float = 0.5, parts: tuple[int, int] = (1, 3)):
        self.rng = rng
        self.bar = bar
        self.parts = parts
        self.refunds = False

    def act(self, view: dict[str, Any]) -> ToolCallAction:
        routes = view["routes"]
        open_merchants = [m for m, s in view["merchants"].items() if s == "open"]
        for r in routes:
            dead_mule = r["mule_frozen"] and view["reserve_mules"] and r["source_funds"] > 0
            if dead_mule and not r["source_frozen"]:
                return _call("rotate_mule", route_id=r["route"])
            if r["merchant_blocked"] and not r["source_frozen"] and open_merchants:
                return _call(
                    "switch_merchant",
                    route_id=r["route"],
                    merchant_id=self.rng.choice(open_merchants),
                )
        hot = [
            (r[alert], r[side])
            for r in routes
            for side, alert, frozen in _SIDES
            if not r[frozen] and r[alert] >= self.bar
        ]
        if hot:
            if view["fresh_devices"] > 0:
                return _call("rotate_device", account_id=max(hot)[1])
            return _call("delay")
        cash = [r for r in routes if r["mule_staged"] > 1 and not r["mule_frozen"]]
        if cash:
            r = max(cash, key=lambda r: r["mule_staged"])
            return _call("cashout_attempt", route_id=r["route"], amount=view["cashout_cap"])
        move = [
            r
            for r in routes
            if r["source_funds"] > 1 and not (r["source_frozen"] or r["mule_frozen"])
        ]
        if move:
            r = self.rng.choice(move)
            if self.refunds:
                return _call("refund_abuse", route_id=r["route"], amount=view["transfer_cap"])
            parts = self.rng.randint(*self.parts)
            return _call(
                "split_payment", route_id=r["route"], amount=view["transfer_cap"], parts=parts
            )
        return _call("delay")


class ScriptedDefender:
    """The bank's rule engine: freezes over a hidden bar, blocks hot merchants, holds big alerts."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def act(self, view: dict[str, Any]) -> ToolCallAction:
        susp, bar = view["suspicion"], view["threshold"]
        frozen, blocked = set(view["frozen"]), set(view["blocked"])
        accounts: list[tuple[float, str]] = []  # (suspicion, id) of open accounts, in susp order
        merchants: list[tuple[float, str]] = []
        for k, s in susp.items():  # one pass: this runs on every tick the agent is the ring
            head = k[:1]
            if head == "U":
                if k not in frozen:
                    accounts.append((s, k))
            elif head == "M" and k not in blocked:
                merchants.append((s, k))
        top = max(accounts) if accounts else None
        if top is not None and top[0] >= bar:
            return _call("freeze", account_id=top[1])
        hot = max(merchants) if merchants else None
        if hot is not None and hot[0] >= bar + 0.1:
            return _call("block_merchant", merchant_id=hot[1])
        large = [a for a in view["alerts"] if a["amount"] >= view["hold_limit"]]
        large = [a for a in large if a["status"] == "pending"]
        if large and self.rng.random() < 0.7:
            return _call("hold", transaction_id=max(large, key=lambda a: a["amount"])["id"])
        warm = [(s, k) for s, k in accounts if s >= bar - 0.15]
        if warm and self.rng.random() < 0.5:
            return _call("challenge", account_id=max(warm)[1])
        return _call("do_nothing")
