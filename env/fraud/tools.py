"""The agent's tools for both roles, as two mixins of ``FraudEnvironment``.

Each tool checks the caller's role and its arguments first (raising ``ToolError`` before anything
changes), then runs one tick of the world around the move (``FraudEnvironment._tick``). The
docstrings are the tool descriptions the agent reads.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from env.base import ToolError, tool


class DefenderTools:
    """Tools of the defender (plus ``do_nothing``, shared by both roles)."""

    @tool(kind="investigation")
    def monitor(self, account_id: str) -> tuple[Any, str]:
        """Defender: list an account's transactions of the last three ticks (pending ones included).

        Args:
            account_id: Customer account id, e.g. U03.
        """
        self._role("defender", "monitor")
        self.engine._acc(account_id)
        return self._defend("monitor", lambda: self.engine.monitor(account_id))

    @tool(kind="action")
    def challenge(self, account_id: str) -> tuple[Any, str]:
        """Defender: step-up authentication; a failed check declines the account's pending payments.

        Args:
            account_id: Customer account id, e.g. U03.
        """
        self._role("defender", "challenge")
        acc = self.engine._acc(account_id)
        if acc.frozen:
            raise ToolError(f"account {acc.id} is frozen already")
        return self._defend("challenge", lambda: self.engine.challenge(account_id))

    @tool(kind="action")
    def freeze(self, account_id: str) -> tuple[Any, str]:
        """Defender: freeze an account; its balance and pending transactions are stopped.

        Args:
            account_id: Customer account id, e.g. U03.
        """
        self._role("defender", "freeze")
        acc = self.engine._acc(account_id)
        if acc.frozen:
            raise ToolError(f"account {acc.id} is frozen already")
        return self._defend("freeze", lambda: self.engine.freeze(account_id))

    @tool(kind="action")
    def hold(self, transaction_id: str) -> tuple[Any, str]:
        """Defender: hold one pending transaction (and its paired payout) before it settles.

        Args:
            transaction_id: Pending transaction id from an alert or a monitor result, e.g. T0012.
        """
        self._role("defender", "hold")
        txn = self.engine.find_txn(transaction_id)
        if txn is None or txn.status != "pending":
            raise ToolError(f"{transaction_id!r} is not a pending transaction")
        return self._defend("hold", lambda: self.engine.hold(transaction_id))

    @tool(kind="action")
    def block_merchant(self, merchant_id: str) -> tuple[Any, str]:
        """Defender: block a merchant; every payment and payout through it is declined.

        Args:
            merchant_id: Merchant id, e.g. M2.
        """
        self._role("defender", "block_merchant")
        merchant = self.world.merchants.get(merchant_id)
        if merchant is None or merchant.blocked:
            raise ToolError(f"{merchant_id!r} is not an open merchant")
        return self._defend("block_merchant", lambda: self.engine.block_merchant(merchant_id))

    @tool(kind="investigation")
    def investigate_neighborhood(self, account_id: str) -> tuple[Any, str]:
        """Defender: accounts sharing a device, and payouts at the same merchant in the same tick.

        Args:
            account_id: Customer account id, e.g. U03.
        """
        self._role("defender", "investigate_neighborhood")
        self.engine._acc(account_id)
        return self._defend(
            "investigate_neighborhood", lambda: self.engine.investigate_neighborhood(account_id)
        )

    @tool(kind="action")
    def do_nothing(self) -> tuple[Any, str]:
        """Either role: let one tick pass without acting."""
        if self.task == "defender":
            return self._defend("do_nothing", lambda: {"waited": True})
        return self._launder("do_nothing", lambda: {"waited": True})

    @tool(kind="terminal", terminal=True)
    def close_case(self, verdict: Literal["fraud", "clean"]) -> tuple[Any, str]:
        """Defender: end your watch with a verdict; the world runs on to the end without you.

        Args:
            verdict: fraud if a laundering ring operates here, clean if none does.
        """
        self._role("defender", "close_case")
        e, w = self.engine, self.world
        e.ledger.close_tick = w.tick
        while w.ring and w.tick < self.config.max_steps and not self._ring_done():
            e.settle()
            self._ring_move()
            e.legit_traffic()
            e.detect()
            w.tick += 1
        e.settle()
        self._finish(verdict)
        return {"verdict": verdict}, f"Case closed: {verdict}."

    def _ring_done(self) -> bool:
        w = self.world
        won = w.laundered >= self.config.fraud_threshold * w.total
        return won or not self.engine.progress_possible()


class RingTools:
    """Tools of the fraudster (the ring's operator)."""

    @tool(kind="action")
    def split_payment(self, route_id: str, amount: float, parts: int = 1) -> tuple[Any, str]:
        """Fraudster: move funds from a route's source through its merchant to its mule.

        Args:
            route_id: Route id, e.g. R1.
            amount: Amount to move (capped at transfer_cap per call).
            parts: Split into this many smaller payments (1-6): smaller is quieter, more is busier.
        """
        self._role("fraudster", "split_payment")
        self.engine.route(route_id)
        if not 1 <= parts <= 6:
            raise ToolError("parts must be between 1 and 6")
        if not math.isfinite(amount) or amount <= 0:
            raise ToolError("amount must be a positive number")
        return self._launder(
            "split_payment", lambda: self.engine.split_payment(route_id, amount, parts)
        )

    @tool(kind="action")
    def rotate_mule(self, route_id: str) -> tuple[Any, str]:
        """Fraudster: replace a route's mule by a reserve mule; staged funds move along if unfrozen.

        Args:
            route_id: Route id, e.g. R1.
        """
        self._role("fraudster", "rotate_mule")
        self.engine.route(route_id)
        if not self.world.reserves:
            raise ToolError("no reserve mules left")
        return self._launder("rotate_mule", lambda: self.engine.rotate_mule(route_id))

    @tool(kind="action")
    def switch_merchant(self, route_id: str, merchant_id: str) -> tuple[Any, str]:
        """Fraudster: route a path through another merchant (e.g. after a block).

        Args:
            route_id: Route id, e.g. R1.
            merchant_id: Merchant id, e.g. M2.
        """
        self._role("fraudster", "switch_merchant")
        route = self.engine.route(route_id)
        if merchant_id not in self.world.merchants or merchant_id == route.merchant:
            raise ToolError(f"{merchant_id!r} is not another merchant")
        return self._launder(
            "switch_merchant", lambda: self.engine.switch_merchant(route_id, merchant_id)
        )

    @tool(kind="action")
    def rotate_device(self, account_id: str) -> tuple[Any, str]:
        """Fraudster: put one of your active accounts on a fresh device, cooling its alerts.

        Args:
            account_id: One of the ring's source or mule accounts, e.g. U05.
        """
        self._role("fraudster", "rotate_device")
        acc = self.engine._acc(account_id)
        if acc.ring_role not in ("source", "mule") or self.world.devices_left <= 0:
            raise ToolError(f"cannot rotate the device of {account_id!r} now")
        return self._launder("rotate_device", lambda: self.engine.rotate_device(account_id))

    @tool(kind="action")
    def delay(self) -> tuple[Any, str]:
        """Fraudster: lie low for a tick; the alerts on all your accounts cool faster."""
        return self._launder("delay", self.engine.delay)

    @tool(kind="action")
    def refund_abuse(self, route_id: str, amount: float) -> tuple[Any, str]:
        """Fraudster: move funds as refunds paid out to the mule: quieter on accounts, loud on the
        merchant, half the volume.

        Args:
            route_id: Route id, e.g. R1.
            amount: Amount to move (capped at half the transfer cap).
        """
        self._role("fraudster", "refund_abuse")
        self.engine.route(route_id)
        if not math.isfinite(amount) or amount <= 0:
            raise ToolError("amount must be a positive number")
        return self._launder(
            "refund_abuse",
            lambda: self.engine.split_payment(route_id, amount, 1, refund=True),
        )

    @tool(kind="action")
    def cashout_attempt(self, route_id: str, amount: float) -> tuple[Any, str]:
        """Fraudster: withdraw staged funds from a route's mule (capped at cashout_cap per tick).

        Args:
            route_id: Route id, e.g. R1.
            amount: Amount to withdraw; large withdrawals draw attention.
        """
        self._role("fraudster", "cashout_attempt")
        self.engine.route(route_id)
        if not math.isfinite(amount) or amount <= 0:
            raise ToolError("amount must be a positive number")
        return self._launder(
            "cashout_attempt", lambda: self.engine.cashout_attempt(route_id, amount)
        )

    @tool(kind="terminal", terminal=True)
    def exit_scheme(self) -> tuple[Any, str]:
        """Fraudster: walk away now with what has been withdrawn; anything not withdrawn is lost."""
        self._role("fraudster", "exit_scheme")
        self._finish("exit")
        return {"laundered": round(self.world.laundered, 2)}, "You walked away."
