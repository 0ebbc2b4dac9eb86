"""The hidden payments world: accounts, merchants, devices, a laundering ring and its routes.

A ring (absent in clean defender episodes) holds stolen funds on one or two *source* accounts and
moves them along *routes* (source -> merchant -> mule) until the mules withdraw them as cash. The
family decides who the sources are (refund abusers, a collector, fake buyers at a colluding
merchant, taken-over long-standing customers) and how their features look. Every observed feature
is a noisy, monotone view of a latent risk whose mean is only ``feature_shift`` noise-sds higher
for ring accounts, and legitimate look-alikes (new customers, travellers, heavy refunders,
marketplace sellers who withdraw cash) share the same ranges, so no single feature names the ring.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from env.fraud.config import FAMILIES, FraudConfig


@dataclass(slots=True)
class Account:
    """A customer account; ``ring_role`` is hidden ("", "source", "mule", "reserve")."""

    id: str
    age_days: int
    devices: int
    refund_rate: float
    night_share: float
    avg_amount: float
    risk_score: float
    device: str
    seller: bool = False
    ring_role: str = ""
    frozen: bool = False
    pool: float = 0.0
    staged: float = 0.0


@dataclass(slots=True)
class Merchant:
    """A merchant; ``colluding`` is hidden."""

    id: str
    category: str
    refund_rate: float
    risk_score: float
    colluding: bool = False
    blocked: bool = False


@dataclass(slots=True)
class Route:
    """One laundering route of the ring."""

    id: str
    source: str
    merchant: str
    mule: str


@dataclass(slots=True)
class Txn:
    """A transaction; pending for one tick, then settled unless held or declined. Slotted: an
    episode makes hundreds and every tick scans them."""

    id: str
    tick: int
    kind: str
    account: str
    merchant: str | None
    counterparty: str | None
    amount: float
    route: str | None = None
    parts: int = 1
    status: str = "pending"


@dataclass
class World:
    """Everything generated at reset plus the mutable episode state."""

    family: str | None
    accounts: dict[str, Account]
    merchants: dict[str, Merchant]
    routes: dict[str, Route]
    reserves: list[str]
    total: float
    freeze_threshold: float
    bias: dict[str, float]
    txns: list[Txn] = field(default_factory=list)
    tick: int = 0
    laundered: float = 0.0
    seized: float = 0.0
    devices_left: int = 0
    hold_limit: float = 0.0
    blind_merchant: str = ""
    exposed: set[str] = field(default_factory=set)

    @property
    def ring(self) -> bool:
        return self.family is not None

    def ring_accounts(self) -> list[str]:
        return sorted(a.id for a in self.accounts.values() if a.ring_role)

    def account(self, account_id: str) -> Account | None:
        return self.accounts.get(account_id)


_CATEGORIES = ("electronics", "grocery", "travel", "gaming", "fashion", "marketplace", "fuel")


class Names:
    """The k-th name of a kind (``U01``, ``D010``, ``M1``, ``T0042``), each formatted once per
    process and kept in a table that grows on demand: every reset and tick names dozens by
    position, and a lookup costs a fraction of formatting."""

    def __init__(self, make: Callable[[int], str]) -> None:
        self.make, self.table = make, [make(0)]

    def __getitem__(self, k: int) -> str:
        table = self.table
        if k >= len(table):
            table.extend(self.make(j) for j in range(len(table), 2 * k + 64))
        return table[k]

    def first(self, n: int) -> list[str]:
        if n > 0:
            self[n - 1]  # grows the table to at least n names
        return self.table[:n]


_USER_IDS = Names(lambda k: f"U{k + 1:02d}")
_HOME_DEVICES = Names(lambda k: f"D{k + 10:03d}")
_MERCHANT_IDS = Names(lambda k: f"M{k + 1}")


def _account(rng: random.Random, uid: str, shift: float, device: str) -> Account:
    """An account whose observed features are monotone transforms of a latent risk (shift +
    noise). Every reset makes a dozen or more, so the noise draw ``shift + gauss(0, 1)`` is
    written out in place (same draws, same order: left to right) rather than a closure call."""
    gauss, exp = rng.gauss, math.exp
    age = int(max(1, round(exp(6.3 - 0.9 * (shift + gauss(0.0, 1.0))))))
    devices = max(1, min(9, round(1.6 + 0.9 * (shift + gauss(0.0, 1.0)) + rng.random())))
    refund = round(min(0.9, max(0.0, 0.08 + 0.06 * (shift + gauss(0.0, 1.0)))), 3)
    night = round(min(0.95, max(0.0, 0.22 + 0.1 * (shift + gauss(0.0, 1.0)))), 3)
    amount = round(exp(5.3 + 0.45 * (shift + gauss(0.0, 1.0))), 2)
    z = shift + gauss(0.0, 1.0)
    score = round(1 / (1 + exp(-(0.5 * z + 0.5 * gauss(0.0, 1.0) - 0.2))), 3)
    return Account(uid, min(age, 5000), devices, refund, night, amount, score, device)


def build_world(task: str, rng: random.Random, config: FraudConfig) -> World:
    """Generate a world for ``task`` (defender or fraudster). The fraudster always runs a ring; a
    defender faces a clean world (legitimate activity only, ``family`` None) with probability
    ``config.clean_share``."""
    ring = task == "fraudster" or rng.random() >= config.clean_share
    n_users = rng.randint(config.min_users, config.max_users)
    n_merchants = rng.randint(config.min_merchants, config.max_merchants)
    family = None
    if ring:
        family = config.family if config.family != "random" else rng.choice(FAMILIES)
    ids = _USER_IDS.first(n_users)
    order = ids[:]
    rng.shuffle(order)
    n_sources = 1 if family == "mule_cashout" else 2
    n_mules = 2
    roles: dict[str, str] = {}
    if ring:
        for uid in order[:n_sources]:
            roles[uid] = "source"
        for uid in order[n_sources : n_sources + n_mules]:
            roles[uid] = "mule"
        for uid in order[n_sources + n_mules : n_sources + n_mules + config.reserve_mules]:
            roles[uid] = "reserve"
    ring_device = f"D{rng.randint(100, 999)}"
    accounts: dict[str, Account] = {}
    for uid, device in zip(ids, _HOME_DEVICES.first(n_users), strict=True):
        role = roles.get(uid, "")
        shift = config.feature_shift if role else 0.0
        if role == "source" and family == "account_takeover":
            shift = config.feature_shift * 0.5  # long-standing customers, now on a new device
        if role and rng.random() < 0.5:
            device = ring_device
        elif not role and rng.random() < 0.12:
            device = ring_device if ring and rng.random() < 0.5 else f"D{rng.randint(10, 99):03d}"
        acc = _account(rng, uid, shift, device)
        acc.ring_role = role
        acc.seller = not role and rng.random() < 0.2
        if role == "source" and family == "refund_abuse":
            acc.refund_rate = round(min(0.9, acc.refund_rate + rng.uniform(0.0, 0.06)), 3)
        accounts[uid] = acc
    merchants: dict[str, Merchant] = {}
    for mid in _MERCHANT_IDS.first(n_merchants):
        merchants[mid] = Merchant(
            id=mid,
            category=rng.choice(_CATEGORIES),
            refund_rate=round(min(0.6, max(0.0, rng.gauss(0.08, 0.05))), 3),
            risk_score=round(rng.uniform(0.05, 0.7), 3),
        )
    routes: dict[str, Route] = {}
    total = 0.0
    if ring:
        sources = [u for u in order if roles.get(u) == "source"]
        mules = [u for u in order if roles.get(u) == "mule"]
        colluder = rng.choice(sorted(merchants)) if family == "merchant_collusion" else None
        if colluder:
            merchants[colluder].colluding = True
            merchants[colluder].risk_score = round(rng.uniform(0.2, 0.8), 3)
        for k, mule in enumerate(mules):
            merchant = colluder or rng.choice(sorted(merchants))
            routes[f"R{k + 1}"] = Route(f"R{k + 1}", sources[k % len(sources)], merchant, mule)
        total = round(rng.uniform(8000, 30000), 2)
        share = total / len(sources)
        for uid in sources:
            accounts[uid].pool = share
    low, high = config.freeze_threshold
    bias = {uid: round(rng.uniform(-config.alert_bias, config.alert_bias), 3) for uid in roles}
    freeze_threshold = round(rng.uniform(low, high), 3)
    blind_merchant = rng.choice(sorted(merchants))
    world = World(
        family=family,
        accounts=accounts,
        merchants=merchants,
        routes=routes,
        reserves=[u for u in order if roles.get(u) == "reserve"],
        total=total,
        freeze_threshold=freeze_threshold,
        bias=bias,
        devices_left=config.fresh_devices,
        hold_limit=round(total * rng.uniform(0.05, 0.16), 2),
        blind_merchant=blind_merchant,
    )
    world.exposed = {r.source for r in routes.values()}
    return world
