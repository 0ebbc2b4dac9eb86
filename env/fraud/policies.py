"""Baseline policies for both roles; each reads its role from the opening observation.

``heuristic`` is honest (observations only): as defender it scores accounts from alerts and
monitoring, confirms with step-up challenges, freezes confirmed accounts, follows their same-tick
payouts to the mules and closes with a verdict; as fraudster it keeps every alert level low by
splitting, rotating and lying low, withdraws in moderate amounts and exits in time. ``oracle``
reads ``env.reveal()`` at reset (an upper bound). ``random`` calls the role's tools with ids seen
so far. Degenerate: ``do_nothing``, ``freeze_everything`` (fraudster side: quits at once) and
``cashout_at_once`` (defender side: accuses at once).
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from env.base import ToolCallAction, ToolEnvironment, ToolObservation
from env.common.policies import RandomPolicy as BaseRandomPolicy
from env.common.policies import call
from env.fraud.opponents import ScriptedRing


class _RolePolicy:
    """Remembers the role from the opening observation and dispatches to the role's method."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)
        self.role = "defender"

    def reset(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        self.role = (observation.result or {}).get("role", "defender")
        self.start(env, observation)

    def start(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        """Per-episode setup."""

    def act(self, observation: ToolObservation) -> ToolCallAction:
        if self.role == "fraudster":
            return self.launder(observation)
        return self.defend(observation)

    def defend(self, observation: ToolObservation) -> ToolCallAction:
        return call("do_nothing")

    def launder(self, observation: ToolObservation) -> ToolCallAction:
        return call("do_nothing")


class DoNothing(_RolePolicy):
    """Never acts (both roles)."""


class HeuristicPolicy(_RolePolicy):
    """Honest play from observations only (see the module docstring)."""

    def start(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        view = observation.result or {}
        self.avg = {a["id"]: a["avg_amount"] for a in view.get("accounts", [])}
        self.score: dict[str, float] = defaultdict(float)
        for a in view.get("accounts", []):
            self.score[a["id"]] = 0.3 * a["risk_score"]
        self.challenged: dict[str, int] = defaultdict(int)
        self.failed: set[str] = set()
        self.frozen: set[str] = set()
        self.monitored: set[str] = set()
        self.traced: set[str] = set()
        self.ring = ScriptedRing(self.rng, bar=0.3, parts=(3, 3))

    # ----- defender -----------------------------------------------------------------------------

    def _learn(self, view: dict[str, Any]) -> None:
        for alert in view.get("alerts", []):
            acc = alert["account"]
            big = alert["amount"] > 6 * self.avg.get(acc, 1e9)
            self.score[acc] += 1.0 + (0.8 if big else 0.0)
        result = view.get("result") or {}
        if "passed" in result:
            acc = result["account"]
            if result["passed"]:
                self.score[acc] -= 2.0
            else:
                self.failed.add(acc)
                self.score[acc] += 3.0
        for txn in result.get("transactions", []):
            if txn["amount"] > 6 * self.avg.get(txn["account"], 1e9):
                self.score[txn["account"]] += 0.6
        for acc, n in result.get("same_tick_payouts", {}).items():
            self.score[acc] += 1.2 * n
        for acc in result.get("shared_device", []):
            self.score[acc] += 0.4
        self.frozen = set(view.get("frozen", []))

    def defend(self, observation: ToolObservation) -> ToolCallAction:
        view = observation.result or {}
        self._learn(view)
        open_accounts = [a for a in self.avg if a not in self.frozen]
        ranked = sorted(open_accounts, key=lambda a: (-self.score[a], a))
        if observation.steps_left <= 1:
            return call("close_case", verdict="fraud" if self.failed else "clean")
        confirmed = [a for a in ranked if a in self.failed]
        if confirmed:
            return call("freeze", account_id=confirmed[0])
        for acc in sorted(self.failed & self.frozen - self.traced):
            self.traced.add(acc)
            return call("investigate_neighborhood", account_id=acc)
        for acc in ranked[:3]:
            # a ring account passes a challenge now and then: ask again if evidence keeps coming
            bar = 1.5 if self.challenged[acc] == 0 else 3.0
            if self.score[acc] >= bar and self.challenged[acc] < 2:
                self.challenged[acc] += 1
                return call("challenge", account_id=acc)
        top = self.score[ranked[0]] if ranked else 0.0
        if observation.step >= 8 and not self.failed and top < 2.0:
            return call("close_case", verdict="clean")
        if self.failed and observation.step >= 12:
            return call("close_case", verdict="fraud")
        for acc in ranked[:5]:
            if acc not in self.monitored:
                self.monitored.add(acc)
                return call("monitor", account_id=acc)
        return call("do_nothing")

    # ----- fraudster ----------------------------------------------------------------------------

    def launder(self, observation: ToolObservation) -> ToolCallAction:
        view = observation.result or {}
        routes = view.get("routes", [])
        left = sum(r["source_funds"] for r in routes if not r["source_frozen"])
        left += sum(r["mule_staged"] for r in routes if not r["mule_frozen"])
        if observation.steps_left <= 1 or (left < 1 and view.get("in_flight", 0) < 1):
            return call("exit_scheme")
        view = {**view, "cashout_cap": view["cashout_cap"] * 0.6}
        return self.ring.act(view)


class OraclePolicy(_RolePolicy):
    """Reads the hidden truth at reset: the ring's accounts, or the bank's hidden bars."""

    def start(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        self.truth = env.reveal()
        self.order = list(self.truth["ring_accounts"])
        routes = self.truth.get("routes", {})
        sources = sorted({r[0] for r in routes.values()})
        self.order = sources + [a for a in self.order if a not in sources]

    def defend(self, observation: ToolObservation) -> ToolCallAction:
        view = observation.result or {}
        if self.truth["verdict"] == "no_ring":
            return call("close_case", verdict="clean")
        frozen = set(view.get("frozen", []))
        merchant = self.truth.get("colluding_merchant")
        if merchant and merchant not in view.get("blocked", []) and len(frozen) >= 1:
            return call("block_merchant", merchant_id=merchant)
        for acc in self.order:
            if acc not in frozen:
                return call("freeze", account_id=acc)
        return call("close_case", verdict="fraud")

    def launder(self, observation: ToolObservation) -> ToolCallAction:
        view = observation.result or {}
        # the bank challenges above its bar - 0.15, after a 0.9 decay; stay just under that
        bar = (self.truth["freeze_threshold"] - 0.15) / 0.9 - 0.03
        bias = self.truth["alert_bias"]
        hold = self.truth["hold_limit"] * 0.97
        routes = view["routes"]

        def susp(acc: str, level: float) -> float:
            return max(0.0, level - bias.get(acc, 0.0))

        left = sum(r["source_funds"] + r["mule_staged"] for r in routes)
        if observation.steps_left <= 1 or (left < 1 and view.get("in_flight", 0) < 1):
            return call("exit_scheme")
        for r in routes:
            if r["mule_frozen"] and view["reserve_mules"] and r["source_funds"] > 0:
                return call("rotate_mule", route_id=r["route"])
        blind = self.truth["blind_merchant"]
        for r in routes:
            if r["merchant"] != blind and r["source_funds"] > 1 and not r["source_frozen"]:
                return call("switch_merchant", route_id=r["route"], merchant_id=blind)
        cap, tcap = view["cashout_cap"], view["transfer_cap"]
        withdraw, move = [], []
        for r in routes:
            if r["mule_staged"] < 1 or r["mule_frozen"]:
                continue
            room = bar - susp(r["mule"], r["mule_alert"]) - 0.04
            y = (max(0.0, room) / 0.25) ** 0.5
            amount = min(r["mule_staged"], cap * min(1.0, y), hold)
            full = min(r["mule_staged"], cap, hold)
            withdraw.append((amount / full, amount, r["route"]))
        for r in sorted(routes, key=lambda r: r["mule_alert"] + r["mule_staged"] / view["total"]):
            if r["source_funds"] < 1 or r["source_frozen"] or r["mule_frozen"]:
                continue
            best = (0.0, -1)
            for parts in range(1, 7):
                room = bar - max(
                    susp(r["source"], r["source_alert"]) + 0.03 * parts,
                    susp(r["mule"], r["mule_alert"]) + 0.02 * parts,
                )
                x = max(0.0, room) * parts**0.5 / 0.35 / (0.3 if r["merchant"] == blind else 1.0)
                amount = min(tcap * min(1.0, x), r["source_funds"], hold * parts)
                best = max(best, (round(amount, 2), -parts))
            full = min(tcap, r["source_funds"])
            move.append((best[0] / full, best[0], -best[1], r["route"]))
        withdraw.sort(reverse=True)
        move.sort(key=lambda m: -m[0])
        for ratio_floor in (0.6, 0.25):
            if withdraw and withdraw[0][0] >= ratio_floor and withdraw[0][1] >= 1:
                _, amount, route = withdraw[0]
                return call("cashout_attempt", route_id=route, amount=round(amount, 2))
            if move and move[0][0] >= ratio_floor and move[0][1] >= 1:
                _, amount, parts, route = move[0]
                return call("split_payment", route_id=route, amount=amount, parts=parts)
        hot_mules = [r for r in routes if not r["mule_frozen"] and r["mule_alert"] > bar / 2]
        if hot_mules and view["reserve_mules"]:
            return call(
                "rotate_mule", route_id=max(hot_mules, key=lambda r: r["mule_alert"])["route"]
            )
        warm = [
            (susp(r[side], r[f"{side}_alert"]), r[side])
            for r in routes
            for side in ("source", "mule")
            if not r[f"{side}_frozen"]
        ]
        if warm and max(warm)[0] > 0.15 and view["fresh_devices"] > 0:
            return call("rotate_device", account_id=max(warm)[1])
        return call("delay")


class RandomPolicy(BaseRandomPolicy):
    """Random calls of the role's tools (the observation lists them) with ids and amounts seen in
    the observations."""

    def reset(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        self.ids: dict[str, set[str]] = defaultdict(set)
        super().reset(env, observation)

    def _absorb(self, observation: ToolObservation) -> None:
        self._harvest(observation.result)

    def _harvest(self, value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                self._harvest(v)
        elif isinstance(value, list):
            for v in value:
                self._harvest(v)
        elif isinstance(value, str) and value[:1] in "UMTR" and value[1:].isdigit():
            self.ids[value[0]].add(value)

    def _pick(self, prefix: str) -> str:
        pool = sorted(self.ids[prefix]) or [f"{prefix}1"]
        return self.rng.choice(pool)

    def _arguments(self, name: str) -> dict[str, Any]:
        amount = round(self.rng.uniform(10, 8000), 2)
        return {
            "monitor": {"account_id": self._pick("U")},
            "challenge": {"account_id": self._pick("U")},
            "freeze": {"account_id": self._pick("U")},
            "hold": {"transaction_id": self._pick("T")},
            "block_merchant": {"merchant_id": self._pick("M")},
            "investigate_neighborhood": {"account_id": self._pick("U")},
            "close_case": {"verdict": self.rng.choice(["fraud", "clean"])},
            "split_payment": {
                "route_id": self._pick("R"),
                "amount": amount,
                "parts": self.rng.randint(1, 6),
            },
            "rotate_mule": {"route_id": self._pick("R")},
            "switch_merchant": {"route_id": self._pick("R"), "merchant_id": self._pick("M")},
            "rotate_device": {"account_id": self._pick("U")},
            "refund_abuse": {"route_id": self._pick("R"), "amount": amount},
            "cashout_attempt": {"route_id": self._pick("R"), "amount": amount},
        }.get(name, {})


class FreezeEverything(_RolePolicy):
    """Defender: freeze every account in table order, then accuse. Fraudster: quit at once."""

    def start(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        self.queue = [a["id"] for a in (observation.result or {}).get("accounts", [])]

    def defend(self, observation: ToolObservation) -> ToolCallAction:
        frozen = set((observation.result or {}).get("frozen", []))
        todo = [a for a in self.queue if a not in frozen]
        if todo:
            return call("freeze", account_id=todo[0])
        return call("close_case", verdict="fraud")

    def launder(self, observation: ToolObservation) -> ToolCallAction:
        return call("exit_scheme")


class CashoutAtOnce(_RolePolicy):
    """Fraudster: full-size unsplit transfers and withdrawals every tick, never hiding.
    Defender: accuse at once."""

    def defend(self, observation: ToolObservation) -> ToolCallAction:
        return call("close_case", verdict="fraud")

    def launder(self, observation: ToolObservation) -> ToolCallAction:
        view = observation.result or {}
        if observation.steps_left <= 1:
            return call("exit_scheme")
        for r in view["routes"]:
            if r["mule_staged"] > 1:
                return call("cashout_attempt", route_id=r["route"], amount=view["cashout_cap"])
        for r in view["routes"]:
            if r["source_funds"] > 1:
                return call(
                    "split_payment", route_id=r["route"], amount=view["transfer_cap"], parts=1
                )
        return call("do_nothing")


class ReferencePolicy(HeuristicPolicy):
    """The steps-mode reference. As the defender it runs a fixed schedule, whatever the accounts
    show: monitor the four riskiest accounts, challenge the three riskiest, look at the riskiest
    one's neighbourhood; then it closes the case, "fraud" if a challenge failed. The heuristic
    investigates for as long as the ring shows and freezes what it confirms, so its calls alone
    told the verdict (``tests/test_steps_leak.py``). As the fraudster it plays the heuristic."""

    SCHEDULE = ("monitor",) * 4 + ("challenge",) * 3 + ("investigate_neighborhood",)

    def start(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        super().start(env, observation)
        self.turn = 0
        self.used: set[tuple[str, str]] = set()

    def defend(self, observation: ToolObservation) -> ToolCallAction:
        self._learn(observation.result or {})
        ranked = sorted(self.avg, key=lambda a: (-self.score[a], a))
        if self.turn < len(self.SCHEDULE) and observation.steps_left > 1 and ranked:
            tool = self.SCHEDULE[self.turn]
            self.turn += 1
            target = next((a for a in ranked if (tool, a) not in self.used), ranked[0])
            self.used.add((tool, target))
            return call(tool, account_id=target)
        return call("close_case", verdict="fraud" if self.failed else "clean")


REFERENCES = {"reference": ReferencePolicy}
"""Steps-mode reference policies (``pipeline.data.steps``); not ranked with ``POLICIES``."""

POLICIES = {
    "heuristic": HeuristicPolicy,
    "random": RandomPolicy,
    "oracle": OraclePolicy,
    "do_nothing": DoNothing,
    "freeze_everything": FreezeEverything,
    "cashout_at_once": CashoutAtOnce,
}
