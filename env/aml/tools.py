"""The AML investigation's tools, as typed, documented methods (mixins of ``AMLEnvironment``).

Eleven investigation tools read the hidden world (``AMLTools``); two terminal tools file a SAR or
close the alert (``AMLDecisions``). The five OS tools that manage the investigator's limited
context live in ``env.aml.os_tools``. Results name ids, which enter working memory
(see ``env.aml.memory``).
"""

from __future__ import annotations

from typing import Any, Literal

from env.aml.world import DATES, GOODS, HIGH_RISK, Typology
from env.base import ToolError, tool

Goods = Literal[tuple(GOODS)]  # the world's price table names the goods once
Channel = Literal["all", "cash", "wire", "ach", "card", "trade"]


class AMLTools:
    """Investigation tools of ``AMLEnvironment``; state lives on the environment instance."""

    # ----- helpers --------------------------------------------------------------------------------

    def _party(self, customer_id: str):
        party = self.world.parties.get(customer_id)
        if party is None:
            raise ToolError(f"unknown customer id {customer_id!r}")
        return party

    def _show(self, *ids: str) -> None:
        self._shown.update(ids)

    def _evidence(self, *ids: str) -> None:
        for fact, fact_ids in self.world.facts.items():
            if fact not in self._revealed and not fact_ids.isdisjoint(ids):
                self._revealed.add(fact)

    def _rule_effect(self) -> None:
        os = self.os
        if not os.mode_paid:
            os.mode_paid = True
            os.rule_effects += 1
            if os.rule_pays < self.config.rule_reward_max:
                os.rule_pays += 1
                self.add_reward(self.config.rule_reward)

    def _txn_row(self, t, me: str) -> dict[str, Any]:
        incoming = t.dst == me
        row = {
            "id": t.id,
            "date": DATES[t.day],
            "direction": "in" if incoming else "out",
            "counterparty": t.src if incoming else t.dst,
            "amount": t.amount,
            "channel": t.channel,
            "memo": t.memo,
        }
        if t.invoice:
            row["invoice"] = t.invoice
        if t.ctr:
            row["ctr"] = t.ctr
        return row

    # ----- investigation ----------------------------------------------------------------------------

    @tool(kind="investigation")
    def review_alert(self, alert_id: str) -> tuple[dict, str]:
        """Read the alert: its rule, subject and the transactions that triggered it.

        Args:
            alert_id: The alert id from the case opening (AL-...).
        """
        w = self.world
        if alert_id != w.alert["alert_id"]:
            raise ToolError(f"unknown alert id {alert_id!r}")
        rows = [self._txn_row(w.txns[i], w.subject) for i in w.triggered]
        self._show(w.subject, *w.triggered)
        result = {"alert_id": alert_id, "rule": w.alert["rule"], "subject_id": w.subject}
        result["triggered_transactions"] = rows
        return result, f"Alert {alert_id}: {len(rows)} triggering transactions."

    @tool(kind="investigation")
    def get_customer_profile(self, customer_id: str) -> tuple[dict, str]:
        """Customer due-diligence profile: type, occupation, income, address, company.

        Args:
            customer_id: A customer or counterparty id (C-, M-) or a person id (P-).
        """
        person = self.world.persons.get(customer_id)
        if person is not None:
            self._show(customer_id)
            return {
                "person_id": person.id,
                "name": person.name,
                "date_of_birth": person.dob,
                "nationality": person.nationality,
            }, f"Person {person.name}."
        p = self._party(customer_id)
        out = {
            "customer_id": p.id,
            "name": p.name,
            "type": p.kind,
            "occupation": p.occupation,
            "country": p.country,
            "account_age_days": p.opened_days,
            "declared_income": p.income,
            "address": p.address,
            "risk_rating": p.risk_rating,
        }
        self._show(p.id)
        if p.company:
            out["company_id"] = p.company
            self._show(p.company)
        return out, f"Profile of {p.name}."

    @tool(kind="investigation")
    def query_transactions(
        self, customer_id: str, channel: Channel = "all", min_amount: float = 0.0
    ) -> tuple[dict, str]:
        """The customer's transactions over the last 90 days, newest first (at most 40).

        Args:
            customer_id: The customer whose account to query.
            channel: Only this channel (cash, wire, ach, card, trade) or all.
            min_amount: Only transactions of at least this amount.
        """
        self._party(customer_id)
        txns = self.world.by_party.get(customer_id, [])
        txns = [
            t for t in txns if (channel == "all" or t.channel == channel) and t.amount >= min_amount
        ]
        txns.sort(key=lambda t: (-t.day, t.id))
        rows = [self._txn_row(t, customer_id) for t in txns[:40]]
        out: dict[str, Any] = {"customer_id": customer_id, "transactions": rows}
        if self.os.mode == "structuring_watch":
            limit = self.config.cash_threshold
            daily: dict[str, float] = {}
            for row in rows:
                if row["channel"] == "cash" and row["direction"] == "in":
                    daily[row["date"]] = daily.get(row["date"], 0.0) + row["amount"]
                    if 0.8 * limit <= row["amount"] < limit:
                        row["flag"] = "near_threshold"
            out["daily_cash_over_threshold"] = {
                d: round(v, 2) for d, v in daily.items() if v >= limit
            }
            if any("flag" in r for r in rows) or out["daily_cash_over_threshold"]:
                self._rule_effect()
        ids = [r["id"] for r in rows]
        self._show(customer_id, *ids, *(r["counterparty"] for r in rows))
        self._show(*(r["invoice"] for r in rows if "invoice" in r))
        if customer_id == self.world.subject:
            self._evidence(*ids, *(r.get("ctr", "") for r in rows))
        return out, f"{len(rows)} transactions."

    @tool(kind="investigation")
    def check_watchlist(self, entity_id: str) -> tuple[dict, str]:
        """Screen a person, customer or company against the sanctions watchlist.

        Args:
            entity_id: The id to screen (P-, C- or CO-).
        """
        w = self.world
        holder = w.persons.get(entity_id) or w.parties.get(entity_id) or w.companies.get(entity_id)
        if holder is None:
            raise ToolError(f"unknown entity id {entity_id!r}")
        dob = getattr(holder, "dob", None)
        ref = "SCR-" + entity_id.split("-")[1]
        out = {"entity_id": entity_id, "name": holder.name, "screening_ref": ref, "match": "none"}
        for wl, entry in w.watchlist.items():
            if entry["name"] == holder.name and dob is not None and entry["dob"] == dob:
                out.update(match="confirmed", entry_id=wl, program=entry["program"])
                out["listed_date_of_birth"] = entry["dob"]
                self._evidence(wl)
                break
            if entry["name"].split()[-1] == holder.name.split()[-1]:
                out.update(match="partial", listed_name=entry["name"])
                out["listed_date_of_birth"] = entry["dob"]
                out["note"] = "name similarity only; not a confirmed match"
        self._evidence(ref)
        self._show(entity_id)
        return out, f"Screening {out['match']}."

    @tool(kind="investigation")
    def trace_network(self, customer_id: str) -> tuple[dict, str]:
        """Counterparties of the customer with money in and out (network_expansion: 2nd hop).

        Args:
            customer_id: The customer at the centre of the network.
        """
        self._party(customer_id)
        w = self.world
        agg: dict[str, dict[str, Any]] = {}
        for t in w.by_party.get(customer_id, []):
            other = t.src if t.dst == customer_id else t.dst
            if other == "CASH":
                continue
            row = agg.setdefault(other, {"id": other, "in": 0.0, "out": 0.0, "count": 0})
            row["in" if t.dst == customer_id else "out"] += t.amount
            row["count"] += 1
        rows = sorted(agg.values(), key=lambda r: (-(r["in"] + r["out"]), r["id"]))[:15]
        for row in rows:
            p = w.parties[row["id"]]
            row.update(name=p.name, type=p.kind, country=p.country)
            row["in"], row["out"] = round(row["in"], 2), round(row["out"], 2)
            self._show(row["id"])
        if self.os.mode == "network_expansion":
            effect = False
            for row in rows:
                onward = [
                    {"id": t.id, "to": t.dst, "amount": t.amount, "date": DATES[t.day]}
                    for t in w.by_party.get(row["id"], [])
                    if t.src == row["id"] and t.dst != customer_id
                ][:3]
                if onward:
                    row["onward"] = onward
                    effect = True
                    self._show(*(o["id"] for o in onward))
            if effect:
                self._rule_effect()
        return {"customer_id": customer_id, "counterparties": rows}, f"{len(rows)} counterparties."

    @tool(kind="investigation")
    def check_source_of_funds(self, customer_id: str) -> tuple[dict, str]:
        """The customer's source-of-funds file (enhanced due diligence adds document detail).

        Args:
            customer_id: The customer whose source-of-funds file to read.
        """
        self._party(customer_id)
        record = self.world.sof.get(customer_id)
        if record is None:
            return {"customer_id": customer_id, "status": "no file"}, "No source-of-funds file."
        out = {"customer_id": customer_id, **record}
        detail = out.pop("detail")
        if self.os.mode == "enhanced_due_diligence" and detail:
            out["document_detail"] = detail
            self._rule_effect()
        self._evidence(record["reference"])
        return out, f"Source of funds: {record['status']}."

    @tool(kind="investigation")
    def check_market_price(self, goods: Goods) -> tuple[dict, str]:
        """The market unit-price range of traded goods, to compare with invoices.

        Args:
            goods: The goods named on an invoice.
        """
        low, high = GOODS[goods]
        ref = self.world.market_refs[goods]
        self._evidence(ref)
        out = {"reference": ref, "goods": goods, "unit_price_low": low, "unit_price_high": high}
        return out, f"Market price of {goods}: {low}-{high}."

    @tool(kind="investigation")
    def assess_risk(self, customer_id: str) -> tuple[dict, str]:
        """Inherent customer risk factors from the profile (not a verdict).

        Args:
            customer_id: The customer to rate.
        """
        p = self._party(customer_id)
        factors = {
            "country_risk": "high" if p.country in HIGH_RISK else "standard",
            "new_account": p.opened_days < 180,
            "cash_intensive": p.occupation in ("convenience store", "car wash", "market stall"),
        }
        self._show(p.id)
        return {"customer_id": p.id, "risk_rating": p.risk_rating, **factors}, "Risk factors."

    @tool(kind="investigation")
    def check_device_overlap(self, customer_id: str) -> tuple[dict, str]:
        """Devices the customer logs in from and the other customers who use them.

        Args:
            customer_id: The customer whose devices to check.
        """
        me = self._party(customer_id)
        w = self.world
        devices = []
        for dev, users in w.devices.items():
            if customer_id not in users:
                continue
            shared = []
            for uid in users:
                if uid == customer_id:
                    continue
                u = w.parties[uid]
                senders = {t.src for t in w.by_party.get(uid, []) if t.dst == uid}
                senders.discard("CASH")
                shared.append(
                    {
                        "customer_id": uid,
                        "name": u.name,
                        "account_age_days": u.opened_days,
                        "same_address": u.address == me.address,
                        "distinct_senders_90d": len(senders),
                    }
                )
                self._show(uid)
            devices.append({"device_id": dev, "shared_with": shared})
            self._show(dev)
            if shared:
                self._evidence(dev, *(s["customer_id"] for s in shared))
        n = sum(len(d["shared_with"]) for d in devices)
        return {"customer_id": customer_id, "devices": devices}, f"{n} other users on its devices."

    @tool(kind="investigation")
    def verify_customs_invoice(self, invoice_id: str) -> tuple[dict, str]:
        """Match an invoice with its customs declaration (trade_scrutiny adds the manifest check).

        Args:
            invoice_id: The invoice id from a trade payment (INV-...).
        """
        inv = self.world.invoices.get(invoice_id)
        if inv is None:
            raise ToolError(f"unknown invoice id {invoice_id!r}")
        out = {
            "invoice_id": inv.id,
            "goods": inv.goods,
            "quantity": inv.quantity,
            "unit_price": inv.unit_price,
            "total": round(inv.quantity * inv.unit_price, 2),
            "counterparty": inv.counterparty,
            "declaration_id": inv.declaration,
            "customs": "declaration matched" if inv.customs_matched else "no declaration found",
        }
        scrutiny = self.os.mode == "trade_scrutiny"
        if scrutiny:
            out["manifest"] = "consistent" if inv.manifest_ok else "no vessel or container record"
            self._rule_effect()
        if scrutiny or inv.manifest_ok or not inv.customs_matched:
            self._evidence(inv.id, inv.declaration)
        self._show(inv.id, inv.counterparty, inv.declaration)
        return out, f"Invoice {inv.id}: customs {out['customs']}."

    @tool(kind="investigation")
    def query_beneficial_ownership(self, company_id: str) -> tuple[dict, str]:
        """Ownership layers above a company up to natural persons (standard shows two layers).

        Args:
            company_id: A company id (CO-...) or a business customer id that has one.
        """
        w = self.world
        party = w.parties.get(company_id)
        if party is not None and party.company:
            company_id = party.company
        company = w.companies.get(company_id)
        if company is None:
            raise ToolError(f"unknown company id {company_id!r}")
        limit = 99 if self.os.mode == "enhanced_due_diligence" else 2
        layers, frontier, level, withheld = [], [company], 1, False
        while frontier:
            nxt = []
            for c in frontier:
                for owner, pct in c.owners:
                    if level > limit:
                        withheld = True
                        continue
                    sub = w.companies.get(owner)
                    holder = sub or w.persons[owner]
                    where = sub.jurisdiction if sub else holder.nationality
                    layers.append(
                        {
                            "level": level,
                            "owner_id": owner,
                            "owner_name": holder.name,
                            "owner_type": "company" if sub else "person",
                            "jurisdiction": where,
                            "percent": pct,
                        }
                    )
                    self._show(owner)
                    if sub:
                        nxt.append(sub)
            frontier, level = nxt, level + 1
        ref = "BO-" + company.id.split("-")[1]
        out = {"reference": ref, "company_id": company.id, "name": company.name, "layers": layers}
        out["complete"] = not withheld
        if withheld:
            out["note"] = "further layers withheld under standard due diligence"
        elif limit > 2 and level > 3:
            self._rule_effect()
        if not withheld:
            self._evidence(ref)
        self._show(company.id)
        return out, f"{len(layers)} ownership entries."


class AMLDecisions:
    """The two terminal tools of ``AMLEnvironment``, listed last (the MRO sets the schema order)."""

    @tool(kind="terminal", terminal=True)
    def file_sar(self, findings: str, typology: Typology, entities_involved: list[str]) -> tuple:
        """File a suspicious activity report and end the case.

        Args:
            findings: What you found, citing the evidence ids (transactions, invoices, devices,
                watchlist entries, trace and document references).
            typology: The laundering typology.
            entities_involved: Ids of every customer, company or person involved.
        """
        self._sar = {"findings": findings, "typology": typology, "entities": entities_involved}
        self._finish("file_sar")
        return {"status": "filed"}, "SAR filed."

    @tool(kind="terminal", terminal=True)
    def close_alert(self, reason: str) -> tuple:
        """Close the alert as not suspicious and end the case.

        Args:
            reason: Why the activity is legitimate, citing the evidence ids that show it.
        """
        self._close_reason = reason
        self._finish("close_alert")
        return {"status": "closed"}, "Alert closed."
