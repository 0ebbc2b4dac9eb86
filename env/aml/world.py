"""The hidden world of one AML case, generated from a seeded ``random.Random``.

A case is one alert on one subject customer. Behind it lies a small bank: the subject, decoy
customers, transactions, devices, companies with ownership chains, a watchlist, trade invoices
with customs declarations, wire routes and source-of-funds files. One of five typologies
(structuring, layering, trade-based laundering, mule ring, sanctions evasion) or its clean
look-alike (seasonal cash business, payroll fan-out, legitimate exporter, shared household device,
complex but lawful ownership) is laid over ordinary activity; the pattern builders live in
``env.aml.typologies``. The truth (verdict, typology, entities, key evidence ids) stays here and
leaves only through ``AMLEnvironment.reveal``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal, get_args

from env.aml.config import AMLConfig

Typology = Literal["structuring", "layering", "trade_based", "mule_ring", "sanctions_evasion"]
FAMILIES: tuple[str, ...] = get_args(Typology)
CLEAN_OF = {
    "structuring": "seasonal_cash_business",
    "layering": "payroll_fan_out",
    "trade_based": "legitimate_exporter",
    "mule_ring": "shared_household_device",
    "sanctions_evasion": "complex_lawful_ownership",
}
ALERT_RULES = {
    "structuring": ("CASH-07", "cash_activity_review"),
    "layering": ("VEL-12", "rapid_funds_movement"),
    "trade_based": ("TBX-03", "cross_border_trade_review"),
    "mule_ring": ("LNK-21", "linked_accounts_review"),
    "sanctions_evasion": ("SCR-09", "counterparty_screening_review"),
}
ALERT_TEXT = {
    "cash_activity_review": "Cash activity on the account exceeded the monitoring rule's "
    "expected range for its segment.",
    "rapid_funds_movement": "Funds moved through the account faster than its profile predicts.",
    "cross_border_trade_review": "Cross-border payments on the account met the trade-monitoring "
    "rule's review criteria.",
    "linked_accounts_review": "The account shares attributes with other customers' accounts.",
    "counterparty_screening_review": "A party connected to the account produced a screening "
    "result that needs analyst review.",
}


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


FIRST = _words(
    "Ana Ben Carla Dmitri Elena Farid Grace Hugo Ines Jonas Kira Luca Maya Nils Omar Priya "
    "Quinn Rosa Sami Tomas Uma Viktor Wen Yara Zane Aiko Bruno Chloe Diego Esra Felix Gita "
    "Hana Ivan"
)
LAST = _words(
    "Silva Novak Brandt Okafor Moreau Rossi Haddad Lindqvist Tanaka Kowalski Petrov Alvarez "
    "Dubois Keller Mensah Ortiz Quist Ramos Sato Varga Weber Yilmaz Zhou Costa Nakamura "
    "Fischer"
)
COMPANY_A = _words("Apex Blue Cedar Delta Ember Falcon Granite Harbor Iris Juniper Kestrel Lumen")
COMPANY_B = _words("Trading Holdings Logistics Partners Ventures Commodities Systems Group")
HIGH_RISK = ("Secrecy Isle", "Offshore Haven", "Free Port Zone")
ORDINARY = ("Germany", "France", "Netherlands", "Spain", "Canada", "Japan", "Poland", "Italy")
GOODS = {
    "copper wire": (6.0, 9.0),
    "LED panels": (40.0, 65.0),
    "cotton fabric": (2.5, 4.0),
    "used cars": (7000.0, 11000.0),
    "mobile phones": (120.0, 180.0),
    "olive oil": (3.0, 5.5),
}
DATES = [f"2026-{1 + d // 30:02d}-{1 + d % 30:02d}" for d in range(120)]


@dataclass(slots=True)
class Party:
    """A customer, counterparty, company account or merchant."""

    id: str
    name: str
    kind: str  # individual | business | merchant
    country: str = "Domestic"
    occupation: str = ""
    income: int = 0
    opened_days: int = 900
    address: str = ""
    company: str | None = None
    risk_rating: str = "medium"


@dataclass(slots=True)
class Txn:
    """One transaction; ``src``/``dst`` are party ids (``CASH`` for cash over the counter)."""

    id: str
    day: int
    src: str
    dst: str
    amount: float
    channel: str  # cash | wire | ach | card | trade
    memo: str = ""
    invoice: str | None = None
    ctr: str | None = None


@dataclass(slots=True)
class Company:
    id: str
    name: str
    jurisdiction: str
    owners: list[tuple[str, float]]  # (company id or person id, percent)
    listed: bool = False


@dataclass(slots=True)
class Person:
    id: str
    name: str
    dob: str
    nationality: str


@dataclass(slots=True)
class Invoice:
    id: str
    goods: str
    quantity: int
    unit_price: float
    counterparty: str
    declaration: str
    customs_matched: bool
    manifest_ok: bool


@dataclass
class World:
    """Everything about one case; tools read it, ``reveal`` exports its truth."""

    task: str
    family: str
    verdict: str  # suspicious | clean
    category: str  # the typology, or the clean look-alike's name
    variant: str = ""  # trade-based: over_invoicing | phantom_shipment
    subject: str = ""
    alert: dict = field(default_factory=dict)
    triggered: list[str] = field(default_factory=list)
    parties: dict[str, Party] = field(default_factory=dict)
    txns: dict[str, Txn] = field(default_factory=dict)
    by_party: dict[str, list[Txn]] = field(default_factory=dict)
    sof: dict[str, dict] = field(default_factory=dict)
    devices: dict[str, list[str]] = field(default_factory=dict)
    companies: dict[str, Company] = field(default_factory=dict)
    persons: dict[str, Person] = field(default_factory=dict)
    watchlist: dict[str, dict] = field(default_factory=dict)
    screening: dict[str, str] = field(default_factory=dict)  # screened id -> screening ref
    invoices: dict[str, Invoice] = field(default_factory=dict)
    market_refs: dict[str, str] = field(default_factory=dict)  # goods -> reference id
    traces: dict[str, dict] = field(default_factory=dict)  # wire txn id -> route
    entities: set[str] = field(default_factory=set)
    facts: dict[str, set[str]] = field(default_factory=dict)  # fact -> ids that evidence it
    ids: set[str] = field(default_factory=set)

    @property
    def typology(self) -> str | None:
        return self.family if self.verdict == "suspicious" else None


class Builder:
    """Helpers that grow a ``World`` from one rng: unique ids, names, parties, transactions."""

    def __init__(self, world: World, rng: random.Random, config: AMLConfig):
        self.w = world
        self.rng = rng
        self.rand = rng.random  # one float per draw: several times faster than randrange
        self.cfg = config
        self.task = world.task

    def pick(self, seq):
        return seq[int(self.rand() * len(seq))]

    def rr(self, lo: int, hi: int) -> int:
        """Integer in [lo, hi)."""
        return lo + int(self.rand() * (hi - lo))

    def ri(self, lo: int, hi: int) -> int:
        """Integer in [lo, hi]."""
        return lo + int(self.rand() * (hi - lo + 1))

    def uni(self, lo: float, hi: float) -> float:
        return lo + (hi - lo) * self.rand()

    def new_id(self, prefix: str, digits: int = 5) -> str:
        lo = 10 ** (digits - 1)
        ids = self.w.ids
        while True:
            ident = f"{prefix}-{lo + int(self.rand() * 9 * lo)}"
            if ident not in ids:
                ids.add(ident)
                return ident

    def person_name(self) -> str:
        h = int(self.rand() * 1_000_003)
        return f"{FIRST[h % len(FIRST)]} {LAST[(h // 64) % len(LAST)]}"

    def company_name(self) -> str:
        h = int(self.rand() * 1_000_003)
        return f"{COMPANY_A[h % len(COMPANY_A)]} {COMPANY_B[(h // 64) % len(COMPANY_B)]}"

    def address(self) -> str:
        h = int(self.rand() * 1_000_003)
        return f"{1 + h % 199} {LAST[(h // 256) % len(LAST)]} Street"

    def party(self, kind: str, name: str | None = None, **fields) -> Party:
        if name is None:
            name = self.company_name() if kind != "individual" else self.person_name()
        p = Party(self.new_id("M" if kind == "merchant" else "C"), name, kind, **fields)
        if not p.address:
            p.address = self.address()
        self.w.parties[p.id] = p
        return p

    def txn(self, day: int, src: str, dst: str, amount: float, channel: str, memo: str = "") -> Txn:
        t = Txn(self.new_id("T", 6), day, src, dst, round(amount, 2), channel, memo)
        if channel == "cash" and amount >= self.cfg.cash_threshold:
            t.ctr = self.new_id("CTR")
        w = self.w
        w.txns[t.id] = t
        by = w.by_party
        if src in by:
            by[src].append(t)
        else:
            by[src] = [t]
        if dst in by:
            by[dst].append(t)
        else:
            by[dst] = [t]
        return t

    def person(self, name: str | None = None, nationality: str = "Domestic") -> Person:
        dob = f"{self.rr(1950, 2000)}-{self.rr(1, 13):02d}-{self.rr(1, 29):02d}"
        p = Person(self.new_id("P"), name or self.person_name(), dob, nationality)
        self.w.persons[p.id] = p
        return p

    def company(self, name: str, jurisdiction: str, owners: list[tuple[str, float]]) -> Company:
        c = Company(self.new_id("CO", 4), name, jurisdiction, owners)
        self.w.companies[c.id] = c
        return c

    def sof(self, customer: str, status: str, text: str, detail: str) -> str:
        ref = self.new_id("SOF")
        self.w.sof[customer] = {
            "reference": ref,
            "status": status,
            "summary": text,
            "detail": detail,
        }
        return ref

    def device(self, users: list[str]) -> str:
        dev = self.new_id("D")
        self.w.devices[dev] = users
        return dev

    def chance(self, table: dict[str, float]) -> bool:
        return self.rand() < table.get(self.task, 0.0)


def build_world(task: str, rng: random.Random, config: AMLConfig) -> World:
    """Build one case for ``task`` from ``rng`` alone."""
    from env.aml import typologies

    family = rng.choice(FAMILIES)
    clean = rng.random() < config.clean_share.get(task, 0.33)
    world = World(
        task, family, "clean" if clean else "suspicious", CLEAN_OF[family] if clean else family
    )
    b = Builder(world, rng, config)
    typologies.build(b)
    home = rng.random() < config.home_alert_share
    rule_family = family if home else rng.choice([f for f in FAMILIES if f != family])
    code, rule = ALERT_RULES[rule_family]
    world.alert = {
        "alert_id": b.new_id("AL", 6),
        "rule": rule,
        "rule_code": code,
        "description": ALERT_TEXT[rule],
        "subject_id": world.subject,
        "alert_date": DATES[90],
        "priority": rng.choice(("low", "medium", "high")),
        "model_score": rng.randrange(55, 96),
    }
    world.ids.add("CASH")
    return world
