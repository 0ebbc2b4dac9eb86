"""Assemble a case: the subject, ordinary activity, decoys, the family pattern, camouflage.

Every family has a suspicious pattern and a clean look-alike that trips the same alert rules and
shares the same surface (cash deposits, fast wires, trade invoices, shared devices, foreign
ownership). Only investigation tells them apart: the source-of-funds file, where a wire really came
from, the market price of the goods, who shares a device, who owns the company at the top of the
chain. Difficulty adds decoys, a misleading indicator on clean cases (noise) and hidden evidence on
suspicious ones (evasion: wider structuring band, relay accounts, forged customs papers, deeper
ownership chains, reactivated mule accounts) and, on medium and hard, a benign surface of another
family (camouflage). The ten pattern builders live in ``env.aml.patterns``.
"""

from __future__ import annotations

from env.aml import patterns
from env.aml.patterns import JOBS
from env.aml.world import GOODS, ORDINARY, Builder, Invoice, Party

CASH_BUSINESSES = (
    "convenience store",
    "car wash",
    "restaurant",
    "ice cream parlour",
    "market stall",
)
WIRE_BUSINESSES = ("consulting firm", "staffing agency", "construction contractor", "IT services")
TRADE_BUSINESSES = ("electronics wholesaler", "textile trader", "food importer", "auto exporter")
HOLDINGS = ("shipping agent", "commodity broker", "real estate manager", "trading house")


def build(b: Builder) -> None:
    """Fill ``b.w`` with one case: subject, ordinary activity, decoys and the family pattern."""
    w = b.w
    clean = w.verdict == "clean"
    if w.family == "mule_ring":
        kind, pool = "individual", JOBS
    elif w.family == "structuring":
        kind, pool = b.pick(("individual", "business")), CASH_BUSINESSES
    else:
        kind = "business"
        pool = {"layering": WIRE_BUSINESSES, "trade_based": TRADE_BUSINESSES}.get(
            w.family, HOLDINGS
        )
    subject = b.party(
        kind,
        occupation=b.pick(JOBS if kind == "individual" else pool),
        income=b.rr(28, 95) * 1000 if kind == "individual" else b.rr(3, 40) * 10**5,
        opened_days=b.rr(200, 4000),
        risk_rating=b.pick(("low", "medium", "high")),
    )
    w.subject = subject.id
    w.entities.add(subject.id)
    base = b.rr(1000, 9000)
    for i, goods in enumerate(GOODS):
        w.market_refs[goods] = f"MP-{1000 + (base + 1231 * i) % 9000}"
    _ordinary(b, subject)
    _decoys(b, subject)
    PATTERNS[(w.family, clean)](b, subject)
    if b.chance(b.cfg.camouflage):
        _camouflage(b, subject)
    if clean:
        w.entities = set()
    if subject.kind == "business" and subject.company is None:
        owner = b.person()
        subject.company = b.company(subject.name, "Domestic", [(owner.id, 100.0)]).id
    if subject.id not in w.sof:
        detail = "Audited accounts." if subject.kind == "business" else "Payslips."
        b.sof(subject.id, "verified", "Documents on file match the declared income.", detail)
    if not any(subject.id in users for users in w.devices.values()):
        b.device([subject.id])


def _ordinary(b: Builder, s: Party) -> None:
    merchants = [b.party("merchant", occupation="retail") for _ in range(2)]
    if s.kind == "individual":
        employer = b.party("business", occupation="employer")
        for month in range(3):
            b.txn(5 + 30 * month, employer.id, s.id, s.income / 12, "ach", "salary")
    else:
        client = b.party("business", occupation="customer")
        for month in range(3):
            b.txn(8 + 30 * month, client.id, s.id, b.uni(8e3, 4e4), "ach", "invoice payment")
    for _ in range(b.ri(2, 4)):
        b.txn(b.rr(0, 90), s.id, b.pick(merchants).id, b.uni(20, 900), "card")
    for _ in range(b.ri(0, 2)):
        b.txn(b.rr(0, 90), "CASH", s.id, b.uni(100, 3000), "cash", "branch deposit")


def _decoys(b: Builder, s: Party) -> None:
    task = b.task
    decoys = [
        b.party(b.pick(("individual", "business")), opened_days=b.rr(100, 5000))
        for _ in range(b.cfg.decoy_customers.get(task, 2))
    ]
    for _ in range(b.cfg.decoy_transactions.get(task, 4)):
        d = b.pick(decoys)
        src, dst = (d.id, s.id) if b.rand() < 0.5 else (s.id, d.id)
        b.txn(b.rr(0, 90), src, dst, b.uni(50, 6000), b.pick(("ach", "wire")))


def _camouflage(b: Builder, s: Party) -> None:
    """A benign surface of another family: it trips routing, never the verdict."""
    w, t = b.w, b.cfg.cash_threshold
    options = [f for f in ("trade_based", "structuring") if f != w.family]
    if s.kind == "individual" and w.family != "mule_ring":
        options.append("mule_ring")
    surface = b.pick(options)
    if surface == "trade_based":
        partner = b.party("business", country=b.pick(ORDINARY), occupation="trader")
        goods = b.pick(tuple(GOODS))
        low, high = GOODS[goods]
        qty = b.rr(100, 5000) if high < 1000 else b.rr(5, 40)
        inv = b.new_id("INV")
        w.invoices[inv] = Invoice(
            inv,
            goods,
            qty,
            round(b.uni(low, high), 2),
            partner.id,
            b.new_id("CD"),
            customs_matched=True,
            manifest_ok=True,
        )
        pay = b.txn(
            b.rr(20, 88),
            partner.id,
            s.id,
            qty * w.invoices[inv].unit_price,
            "trade",
            f"invoice {inv}",
        )
        pay.invoice = inv
    elif surface == "structuring":
        for i in range(b.ri(5, 7)):
            amount = b.uni(1.05 * t, 2.0 * t) if i < 2 else b.uni(0.1 * t, 0.7 * t)
            b.txn(b.rr(10, 88), "CASH", s.id, amount, "cash", "deposit")
    else:
        member = b.party(
            "individual",
            name=f"Robin {s.name.split()[-1]}",
            occupation="retired",
            opened_days=b.rr(900, 6000),
            address=s.address,
        )
        b.device([s.id, member.id])
        b.txn(b.rr(10, 88), member.id, s.id, b.uni(150, 600), "ach", "groceries")


PATTERNS = {
    ("structuring", False): patterns.structuring,
    ("structuring", True): patterns.seasonal,
    ("layering", False): patterns.layering,
    ("layering", True): patterns.payroll,
    ("trade_based", False): lambda b, s: patterns.trade(b, s, clean=False),
    ("trade_based", True): lambda b, s: patterns.trade(b, s, clean=True),
    ("mule_ring", False): patterns.mule_ring,
    ("mule_ring", True): patterns.household,
    ("sanctions_evasion", False): lambda b, s: patterns.ownership(b, s, clean=False),
    ("sanctions_evasion", True): lambda b, s: patterns.ownership(b, s, clean=True),
}
