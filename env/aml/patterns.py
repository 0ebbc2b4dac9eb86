"""The ten pattern builders: each typology and its clean look-alike.

Each builder lays its pattern over the subject's ordinary activity, records the key facts (the
evidence ids that decide the case) and the entities a SAR should name, and picks the transactions
the alert fired on. Difficulty enters through ``Builder.chance``: noise (a misleading indicator on
a clean case) and evasion (hidden or weaker evidence on a suspicious one).
"""

from __future__ import annotations

from env.aml.world import GOODS, HIGH_RISK, ORDINARY, Builder, Invoice, Party

JOBS = ("teacher", "nurse", "student", "engineer", "retail clerk", "driver", "chef", "designer")


def structuring(b: Builder, s: Party) -> None:
    w, t = b.w, b.cfg.cash_threshold
    evade = b.chance(b.cfg.evasion)
    smurfs = [b.party("individual") for _ in range(b.ri(2, 3))] if evade else []
    low = 0.80 if evade else 0.90
    start = b.rr(40, 70)
    ids = []
    for _ in range(b.ri(6, 10)):
        src = b.pick(smurfs).id if smurfs and b.rand() < 0.7 else "CASH"
        day = start + b.rr(0, 18)
        ids.append(b.txn(day, src, s.id, b.uni(low * t, t - 60), "cash", "branch deposit").id)
    ref = b.sof(
        s.id,
        "unverified",
        "Declared income and records do not account for the cash volume.",
        "No till records, contracts or payslips support the deposits.",
    )
    w.facts = {"sub_threshold_cash": set(ids), "unverified_funds": {ref}}
    w.entities.update(p.id for p in smurfs if any(w.txns[i].src == p.id for i in ids))
    w.triggered = ids[:3]


def seasonal(b: Builder, s: Party) -> None:
    w, t = b.w, b.cfg.cash_threshold
    start = b.rr(30, 60)
    ids = []
    for i in range(b.ri(8, 13)):
        amount = b.uni(1.05 * t, 2.4 * t) if i < 3 or b.rand() < 0.3 else None
        amount = amount or b.uni(0.15 * t, 0.8 * t)
        ids.append(b.txn(start + b.rr(0, 30), "CASH", s.id, amount, "cash", "deposit").id)
    noisy = b.chance(b.cfg.noise)
    if noisy and b.rand() < 0.5:
        for _ in range(b.ri(1, 3)):
            ids.append(
                b.txn(
                    start + b.rr(0, 30),
                    "CASH",
                    s.id,
                    b.uni(0.86 * t, t - 80),
                    "cash",
                    "deposit",
                ).id
            )
    ctrs = {w.txns[i].ctr for i in ids if w.txns[i].ctr}
    w.facts = {"reported_cash": ctrs}
    if noisy and b.rand() < 0.5:
        b.sof(s.id, "pending", "Documents requested; not yet received.", "Request sent.")
    else:
        ref = b.sof(
            s.id,
            "verified",
            "Point-of-sale records reconcile with the deposits; the peak matches prior seasons.",
            "Till reports and tax filings for three years.",
        )
        w.facts["verified_funds"] = {ref}
    w.triggered = ids[:3]


def layering(b: Builder, s: Party) -> None:
    w = b.w
    evade = b.chance(b.cfg.evasion)
    shell = b.party(
        "business",
        country=b.pick(HIGH_RISK),
        opened_days=b.rr(20, 150),
        occupation="holding company",
    )
    src = shell
    if evade:
        src = b.party("business", country=b.pick(ORDINARY), occupation="payment services")
        w.entities.add(src.id)
    amount = b.uni(8e4, 4e5)
    day = b.rr(45, 80)
    wire_in = b.txn(day, src.id, s.id, amount, "wire", "consultancy fees")
    outs = []
    recipients = [
        b.party("business", country=b.pick(ORDINARY if evade else HIGH_RISK + ORDINARY))
        for _ in range(b.ri(3, 5))
    ]
    for r in recipients:
        part = amount * 0.95 / len(recipients) * b.uni(0.8, 1.2)
        outs.append(b.txn(day + b.ri(0, 2), s.id, r.id, part, "wire", "services").id)
        onward = b.party("business", country=b.pick(HIGH_RISK))
        b.txn(day + b.ri(2, 4), r.id, onward.id, part * 0.97, "wire", "transfer")
    ref = b.new_id("WT")
    w.traces[wire_in.id] = {
        "reference": ref,
        "originator_id": shell.id,
        "originator": shell.name,
        "originator_country": shell.country,
        "originator_incorporated_days_ago": shell.opened_days,
        "route": [src.name, "correspondent bank", "receiving bank"] if evade else [shell.name],
        "registered_address": "registered-agent office",
    }
    b.sof(s.id, "unverified", "Contracts supplied; counterparties could not be confirmed.", "")
    w.facts = {"pass_through": set(outs), "shell_origin": {ref}}
    w.entities.update([shell.id, *(r.id for r in recipients)])
    w.triggered = [wire_in.id, *outs[:2]]


def payroll(b: Builder, s: Party) -> None:
    w = b.w
    operating = b.party("business", name=s.name + " (operating)", occupation="own account")
    staff = [
        (b.party("individual", occupation=b.pick(JOBS)), b.uni(2e3, 6e3))
        for _ in range(b.ri(6, 10))
    ]
    refs, first = [], None
    for cycle in range(2):
        day = 55 + 30 * cycle + b.ri(0, 3)
        total = sum(pay for _, pay in staff)
        wire = b.txn(day, operating.id, s.id, total * 1.01, "wire", "payroll funding")
        first = first or wire
        ref = b.new_id("WT")
        w.traces[wire.id] = {
            "reference": ref,
            "originator_id": operating.id,
            "originator": operating.name,
            "originator_country": "Domestic",
            "originator_incorporated_days_ago": s.opened_days,
            "route": [operating.name],
            "registered_address": s.address,
        }
        refs.append(ref)
        for person, pay in staff:
            b.txn(day + 1, s.id, person.id, pay, "wire", "salary")
    if b.chance(b.cfg.noise):
        person = staff[0][0]
        b.txn(
            86,
            person.id,
            b.party("business", country=b.pick(HIGH_RISK)).id,
            staff[0][1] * 0.9,
            "wire",
            "transfer",
        )
    sof = b.sof(
        s.id,
        "verified",
        "Registered employer; payroll filings match the headcount.",
        "Payroll tax registration and employment contracts.",
    )
    w.facts = {"payroll_registration": {sof}, "benign_origin": set(refs)}
    w.triggered = [first.id]


def trade(b: Builder, s: Party, clean: bool) -> None:
    w = b.w
    evade = not clean and b.chance(b.cfg.evasion)
    variant = "clean" if clean else b.pick(("over_invoicing", "phantom_shipment"))
    partner = b.party("business", country=b.pick(ORDINARY + HIGH_RISK), occupation="trader")
    goods = b.pick(tuple(GOODS))
    low, high = GOODS[goods]
    invoices, pays, decls = [], [], []
    for i in range(b.ri(1, 2)):
        price = b.uni(low, high)
        if variant == "over_invoicing":
            price = (low + high) / 2 * (b.uni(2.0, 2.8) if evade else b.uni(3, 6))
        elif clean and i == 0 and b.chance(b.cfg.noise):
            price = high * b.uni(1.05, 1.25)
        qty = b.rr(100, 5000) if high < 1000 else b.rr(5, 40)
        inv = b.new_id("INV")
        decl = b.new_id("CD")
        w.invoices[inv] = Invoice(
            inv,
            goods,
            qty,
            round(price, 2),
            partner.id,
            decl,
            customs_matched=variant != "phantom_shipment" or evade,
            manifest_ok=variant != "phantom_shipment",
        )
        src, dst = (s.id, partner.id) if b.rand() < 0.5 else (partner.id, s.id)
        pay = b.txn(b.rr(30, 88), src, dst, qty * price, "trade", f"invoice {inv}")
        pay.invoice = inv
        invoices.append(inv)
        pays.append(pay.id)
        decls.append(decl)
    if variant == "over_invoicing":
        w.facts = {"price_anomaly": set(invoices), "market_benchmark": {w.market_refs[goods]}}
    elif variant == "phantom_shipment":
        w.facts = {"no_shipment": set(invoices + decls), "trade_payment": set(pays)}
    else:
        w.facts = {"customs_match": set(decls), "market_benchmark": {w.market_refs[goods]}}
    w.variant = variant
    w.entities.add(partner.id)
    w.triggered = pays[:2]


def mule_ring(b: Builder, s: Party) -> None:
    w = b.w
    evade = b.chance(b.cfg.evasion)
    house = b.address() if b.rand() < 0.5 else None
    mules = [  # evasion: fewer, older (reactivated) accounts with fewer senders each
        b.party(
            "individual",
            occupation="student",
            opened_days=b.rr(150, 400) if evade else b.rr(10, 90),
            address=house or "",
        )
        for _ in range(b.ri(2, 3) if evade else b.ri(3, 5))
    ]
    senders = [b.party("individual") for _ in range(4)]
    funnel = []
    for m in mules:
        day = b.rr(50, 80)
        got = 0.0
        for sender in b.rng.sample(senders, 2 if evade else 3):
            amt = b.uni(400, 2500)
            got += amt
            b.txn(day, sender.id, m.id, amt, "ach", b.pick(("rent", "deposit", "item sale")))
        funnel.append(b.txn(day + 1, m.id, s.id, got * 0.9, "ach", "transfer").id)
    for _ in range(b.ri(2, 3)):
        b.txn(b.rr(70, 90), s.id, "CASH", b.uni(800, 3000), "cash", "ATM")
    users = [s.id, *(m.id for m in mules)]
    if evade:
        devices = {b.device(users[: 1 + len(mules) // 2 + 1]), b.device([s.id, *users[2:]])}
    else:
        devices = {b.device(users)}
    w.facts = {"shared_device": devices, "funnel_transfers": set(funnel)}
    w.entities.update(m.id for m in mules)
    w.triggered = funnel[:3]


def household(b: Builder, s: Party) -> None:
    w = b.w
    surname = s.name.split()[-1]
    members = []
    for i in range(3 if b.chance(b.cfg.noise) else b.ri(1, 2)):
        young = i == 2
        m = b.party(
            "individual",
            name=f"{b.pick(('Alex', 'Sam', 'Noor', 'Jo', 'Kim'))} {surname}",
            occupation="student" if young else b.pick(("teacher", "nurse", "retired")),
            opened_days=b.rr(30, 90) if young else b.rr(500, 6000),
            address=s.address,
        )
        members.append(m)
        b.txn(
            b.rr(0, 20),
            b.party("business", occupation="employer").id,
            m.id,
            b.uni(1500, 4000),
            "ach",
            "salary",
        )
    transfers = [
        b.txn(
            b.rr(10, 90),
            m.id,
            s.id,
            b.uni(150, 900),
            "ach",
            b.pick(("rent share", "groceries", "utilities")),
        ).id
        for m in members
        for _ in range(b.ri(1, 2))
    ]
    dev = b.device([s.id, *(m.id for m in members)])
    w.facts = {"household_device": {dev}, "family_members": {m.id for m in members}}
    w.triggered = transfers[:3]


def ownership(b: Builder, s: Party, clean: bool) -> None:
    w = b.w
    deep = b.chance(b.cfg.evasion) if not clean else b.rand() < b.cfg.evasion.get(b.task, 0)
    depth = b.ri(3, 4) if deep else 2
    ubo = b.person(nationality=b.pick(HIGH_RISK + ORDINARY))
    if clean:
        first = ubo.name.split()[0]
        other = b.pick([n for n in ("Adam", "Boris", "Celia", "Dana", "Emil") if n != first])
        similar = f"{other} {ubo.name.split()[-1]}"
        dob = f"{int(ubo.dob[:4]) + b.ri(3, 12)}{ubo.dob[4:]}"
    else:
        similar, dob = ubo.name, ubo.dob
    wl = b.new_id("WL")
    w.watchlist[wl] = {"name": similar, "dob": dob, "program": "SANCTIONS-LIST"}
    owner_id, chain = ubo.id, []
    for level in range(depth - 1, 0, -1):
        juris = b.pick(HIGH_RISK + ORDINARY) if level > 1 else b.pick(ORDINARY)
        c = b.company(b.company_name() + " Ltd", juris, [(owner_id, b.pick((60.0, 75.0, 100.0)))])
        chain.append(c.id)
        owner_id = c.id
    top = b.company(s.name, "Domestic", [(owner_id, 100.0)])
    s.company = top.id
    partner = b.party("business", country=b.pick(ORDINARY), occupation="trader")
    for _ in range(b.ri(2, 3)):
        b.txn(b.rr(20, 88), partner.id, s.id, b.uni(2e4, 2e5), "wire", "contract")
    bo_ref = "BO-" + top.id.split("-")[1]
    w.ids.add(bo_ref)
    if clean:
        scr = "SCR-" + ubo.id.split("-")[1]
        w.facts = {"no_confirmed_match": {scr}, "ownership_chain": {bo_ref}}
    else:
        w.facts = {"sanctioned_owner": {wl}, "ownership_chain": {bo_ref}}
        w.entities.update([*chain, ubo.id])
    w.triggered = [t.id for t in w.by_party[partner.id][:2]]
