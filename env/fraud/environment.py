"""FraudEnvironment: a defender and a laundering ring share a partially observable payments world.

The task picks the agent's role: ``defender`` or ``fraudster``; the other side is an adaptive
scripted opponent (``set_opponent`` plugs in any ``Opponent``). Each call, even a failed one, is
one tick: the defender may hold or freeze before last tick's money settles, the ring then moves
money along its routes (source -> merchant -> mule) or withdraws it, customers keep shopping, and a
noisy alert engine flags some transactions (ring and legit alike). Withdrawals are capped per tick,
so a ring needs many ticks. The episode ends when the ring has laundered the fraud threshold, when
no route can move money any more, by a terminal call (``close_case`` / ``exit_scheme``) or at 20
steps. Both roles' tools are defined on this one class (the specs are static), but the
observation's ``tools`` lists only the role's own, and calling the other side's tool is an error.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from env.base import Grade, ToolEnvironment, ToolError
from env.fraud.config import FraudConfig
from env.fraud.dynamics import Engine
from env.fraud.grading import defender_grade, evidence_coverage, fraudster_grade
from env.fraud.opponents import (
    Opponent,
    ScriptedDefender,
    ScriptedRing,
    defender_view,
    ring_view,
)
from env.fraud.tools import DefenderTools, RingTools
from env.fraud.world import build_world

DEFENDER_TOOLS = (
    "monitor",
    "challenge",
    "freeze",
    "hold",
    "block_merchant",
    "investigate_neighborhood",
    "do_nothing",
    "close_case",
)
FRAUDSTER_TOOLS = (
    "split_payment",
    "rotate_mule",
    "switch_merchant",
    "rotate_device",
    "delay",
    "refund_abuse",
    "cashout_attempt",
    "do_nothing",
    "exit_scheme",
)
ROLE_TOOLS = {"defender": DEFENDER_TOOLS, "fraudster": FRAUDSTER_TOOLS}
# (class, role) -> the role's tools in spec order, built on first use
_ROLE_LISTS: dict[tuple[type, str], tuple[str, ...]] = {}


class FraudEnvironment(DefenderTools, RingTools, ToolEnvironment):
    """Defender vs laundering ring; the task names the role the agent plays."""

    name = "fraud"
    tasks = ("defender", "fraudster")
    config_class = FraudConfig
    instructions = (
        "A payments world with customers (U..), merchants (M..) and pending transactions (T..). "
        "As the defender, find the laundering ring (if there is one) from noisy alerts and "
        "investigations, stop its money with freezes, holds and merchant blocks without hurting "
        "honest customers, and close the case with a verdict. As the fraudster, move the stolen "
        "funds along your routes and withdraw them through mules without getting caught, then "
        "exit. Every call is one tick of world time; the other side moves after you."
    )

    def _build(self, task: str, rng: random.Random) -> None:
        cfg: FraudConfig = self.config
        self.world = build_world(task, rng, cfg)
        ring = self.world.family is not None
        self.engine = Engine(self.world, cfg, random.Random(rng.getrandbits(64)))
        opponent_rng = random.Random(rng.getrandbits(64))
        self.opponent: Opponent
        factory = getattr(self, "_opponent_factory", None)
        if factory is not None:
            self.opponent = factory(task, opponent_rng)
        elif task == "defender":
            ring_bot = ScriptedRing(opponent_rng)
            ring_bot.refunds = self.world.family == "refund_abuse"
            self.opponent = ring_bot
        else:
            self.opponent = ScriptedDefender(opponent_rng)
        if task == "defender":  # the ring moves first, so the defender opens on real alerts
            if ring:
                self._ring_move()
            self.engine.legit_traffic()
            self.engine.detect()
            self.world.tick += 1

    def set_opponent(self, factory: Callable[[str, random.Random], Opponent] | None) -> None:
        """Play the other side with ``factory(agent_role, rng)`` from the next reset on.

        The opponent receives its side's view (a dict) each tick and answers a ``ToolCallAction``
        of its side's tools, e.g. a second model behind the server; ``None`` restores the
        scripted opponents. Its invalid calls are idle ticks.
        """
        self._opponent_factory = factory

    @property
    def family(self) -> str | None:
        """The scheme family (None in a clean world); hidden from a defender's observations."""
        return self.world.family

    def _opening(self) -> tuple[Any, str]:
        if self.task == "defender":
            view = {"role": "defender", **defender_view(self.engine, opening=True)}
            msg = f"You are the defender. {len(view['alerts'])} alert(s) this tick."
        else:
            view = {"role": "fraudster", **ring_view(self.engine)}
            msg = f"You run the ring: {len(view['routes'])} route(s), total {view['total']}."
        return view, msg

    # ----- one tick -----------------------------------------------------------------------------

    def _coerce(self, action: Any) -> tuple[str, dict[str, Any], str | None]:
        name, arguments, error = super()._coerce(action)
        if error is not None:
            self._idle_tick()
        return name, arguments, error

    def _dispatch(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str]:
        try:
            return super()._dispatch(name, arguments)
        except ToolError:
            self._idle_tick()
            raise

    def _idle_tick(self) -> None:
        """A failed call still costs world time: the other side moves while the agent fumbles."""
        if self._started and not self.done:
            self._tick(lambda: None)

    def _role(self, role: str, name: str) -> None:
        if self.task != role:
            raise ToolError(f"{name} is a {role} tool; you play the {self.task}")

    def _apply(self, side: str, call) -> Any:
        """Apply an opponent's call through the same world methods; its mistakes are idle ticks."""
        allowed = ROLE_TOOLS[side]
        if call.tool not in allowed or call.tool in ("close_case", "exit_scheme"):
            return None
        if call.tool in ("do_nothing",):
            return None
        method = "split_payment" if call.tool == "refund_abuse" else call.tool
        args = dict(call.arguments)
        if call.tool == "refund_abuse":
            args.update(parts=1, refund=True)
        try:
            return getattr(self.engine, method)(**args)
        except (ToolError, TypeError):
            return None

    def _ring_move(self) -> None:
        self._apply("fraudster", self.opponent.act(ring_view(self.engine)))

    def _defender_move(self) -> None:
        w = self.world
        internal = {  # the bank's own view: the public one plus its risk engine's internals
            **defender_view(self.engine),
            "suspicion": dict(self.engine.susp),
            "threshold": w.freeze_threshold,
            "hold_limit": w.hold_limit,
            "alerts": [  # each alert's transaction as it stands now (held, declined, ...)
                {**a, "status": t.status}
                for a, t in zip(self.engine.alerts, self.engine.alert_txns, strict=True)
            ],
        }
        self._apply("defender", self.opponent.act(internal))

    def _tick(self, agent_call) -> Any:
        """Run one tick around the agent's move and end the episode if the game is over."""
        e, w = self.engine, self.world
        if self.task == "defender":
            result = agent_call()
            e.settle()
            if w.ring:
                self._ring_move()
            e.legit_traffic()
            e.detect()
            w.tick += 1
        else:
            result = agent_call()
            e.legit_traffic()
            e.detect()
            w.tick += 1
            self._defender_move()
            e.settle()
        self._check_end()
        return result

    def _check_end(self) -> None:
        w = self.world
        if self.done or not w.ring:
            return
        if w.laundered >= self.config.fraud_threshold * w.total:
            self._finish(None if self.task == "defender" else "threshold_reached")
        elif not self.engine.progress_possible():
            self._finish("routes_blocked" if self.task == "defender" else None)

    def _view(self, result: Any) -> tuple[Any, str]:
        if self.task == "defender":
            view = defender_view(self.engine)
            return {
                "result": result,
                **view,
            }, f"tick {view['tick']}: {len(view['alerts'])} alert(s)"
        view = ring_view(self.engine)
        return {"result": result, **view}, f"tick {view['tick']}: laundered {view['laundered']}"

    def _defend(self, name: str, fn) -> tuple[Any, str]:
        self._role("defender", name)
        return self._view(self._tick(fn))

    def _launder(self, name: str, fn) -> tuple[Any, str]:
        self._role("fraudster", name)
        return self._view(self._tick(fn))

    def _tools_now(self) -> list[str]:
        """Only the role's own tools, in spec order (the list is worked out once per role)."""
        key = (type(self), self.task)
        names = _ROLE_LISTS.get(key)
        if names is None:
            role = ROLE_TOOLS.get(self.task, ())
            names = _ROLE_LISTS[key] = tuple(t for t in self._specs if t in role)
        return list(names)

    # ----- grading and truth --------------------------------------------------------------------

    def _grade(self) -> Grade:
        if self.task == "defender":
            return defender_grade(self.engine, self.decision, self.config.max_steps)
        return fraudster_grade(self.engine, self.decision)

    def _metrics(self) -> dict[str, float]:
        w = self.world
        laundered = w.laundered / w.total if w.total else 0.0
        return {
            "evidence_coverage": round(evidence_coverage(self.engine, self.task), 4),
            "laundered_share": round(min(1.0, laundered), 4),
        }

    def reveal(self) -> dict[str, Any]:
        w = self.world
        truth: dict[str, Any] = {
            "ring_accounts": w.ring_accounts(),
            "freeze_threshold": w.freeze_threshold,
            "hold_limit": w.hold_limit,
            "alert_bias": dict(w.bias),
            "blind_merchant": w.blind_merchant,
        }
        truth["clean"] = not w.ring
        truth["verdict"] = "ring_present" if w.ring else "no_ring"
        truth["family"] = w.family
        if self.task == "defender":
            colluders = [m.id for m in w.merchants.values() if m.colluding]
            truth["colluding_merchant"] = colluders[0] if colluders else None
            truth["routes"] = {r.id: [r.source, r.merchant, r.mule] for r in w.routes.values()}
        return truth
