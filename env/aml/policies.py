"""Reference policies for the AML environment: an honest investigator, an oracle, and the
degenerate strategies that the grade must rank below honest work.

``heuristic`` reads observations only: it routes the case by what the subject's profile and
transactions show (trade invoices, many cash deposits, wires passed straight through, an
individual, a company) and then checks the evidence that separates the typology from its clean
look-alike. ``oracle`` reads ``env.reveal()`` at reset, runs the heuristic's checks (plus the true
family's if the heuristic would skip them) and decides with the truth: an upper bound per
episode. ``random`` samples tools and arguments; the others are the shortcuts the reference system
rewarded by mistake.
"""

from __future__ import annotations

import json
import random
from typing import Any

from env.aml.config import AMLConfig
from env.aml.memory import ID_PATTERN, RULE_MODES
from env.aml.world import GOODS, HIGH_RISK
from env.base import ToolCallAction, ToolEnvironment, ToolObservation
from env.common.policies import RandomPolicy as BaseRandomPolicy
from env.common.policies import Script, ScriptedPolicy, call

THRESHOLD = AMLConfig().cash_threshold


class AMLScript(ScriptedPolicy):
    """A scripted AML policy: it keeps the environment (the oracle reads its truth) and the active
    rule mode, and closes the alert if its script ends without a decision."""

    def prepare(self, env: ToolEnvironment) -> None:
        self.env = env
        self._mode = "standard"

    def fallback(self, observation: ToolObservation) -> ToolCallAction:
        return call("close_alert", reason="no further steps")


class Investigator(AMLScript):
    """The honest heuristic: route by observed activity, check the separating evidence, decide."""

    stop_at_first = True
    """Stop checking families at the first one whose evidence is suspicious."""
    write_notes = True
    """Pin the case's entities and evidence to the case file before deciding."""

    def families(self, env: ToolEnvironment, profile: dict, txns: list[dict]) -> list[str]:
        """Every family whose surface shows, most specific first; companies end with ownership."""
        found = []
        if any("invoice" in r for r in txns):
            found.append("trade_based")
        if len(_cash_in(txns)) >= 5:
            found.append("structuring")
        if _pass_through(txns)[0] is not None:
            found.append("layering")
        if profile.get("type") == "individual":
            found.append("mule_ring")
        elif profile.get("company_id"):
            found.append("sanctions_evasion")
        return found or ["sanctions_evasion"]

    def script(self, opening: ToolObservation) -> Script:
        env = self.env
        alert = opening.result
        subj = alert["subject_id"]
        yield call("review_alert", alert_id=alert["alert_id"])
        profile = (yield call("get_customer_profile", customer_id=subj)).result or {}
        txns = ((yield call("query_transactions", customer_id=subj)).result or {}).get(
            "transactions", []
        )
        families = self.families(env, profile, txns)
        keep = [profile.get("company_id", "")]
        keep += list(dict.fromkeys(r["invoice"] for r in txns if "invoice" in r))[:2]
        wire = _pass_through(txns)[0]
        keep += [wire["id"], wire["counterparty"]] if wire else []
        if any(k for k in keep):  # ids needed after they scroll out of working memory
            yield call("write_to_case_file", note="Keep: " + " ".join(k for k in keep if k))
        case, family, clean_evidence = Case(subj), "", []
        for candidate in families:
            trial = Case(subj)
            yield from self._run(ROUTINES[candidate](trial, profile, txns))
            clean_evidence += trial.clean_evidence
            if trial.suspicious and not family:
                family, case = candidate, trial
                if self.stop_at_first:
                    break
            elif not family:
                case = trial
        case.clean_evidence = list(dict.fromkeys(e for e in clean_evidence if e))
        suspicious, case = self.verdict(env, case)
        family = self._typology(family)
        if self.write_notes:
            note = "Case notes: " + " ".join(sorted(case.entities | set(case.evidence)))
            yield call("write_to_case_file", note=note)
        if suspicious:
            findings = f"{family.replace('_', ' ')} indicators; evidence: " + ", ".join(
                case.evidence
            )
            yield call(
                "file_sar",
                findings=findings,
                typology=family,
                entities_involved=sorted(case.entities),
            )
        else:
            reason = "Activity explained by the evidence: " + ", ".join(case.clean_evidence)
            yield call("close_alert", reason=reason)

    def _typology(self, found: str) -> str:
        return found or "structuring"

    def _run(self, routine: Script) -> Script:
        """Drive a routine, dropping switches to the rule mode already active."""
        mode = self._mode
        try:
            action = next(routine)
            while True:
                if action.tool == "update_system_prompt":
                    if action.arguments["rule_mode"] == mode:
                        action = routine.send(None)  # routines ignore a switch's result
                        continue
                    mode = self._mode = action.arguments["rule_mode"]
                action = routine.send((yield action))
        except StopIteration:
            return

    def verdict(self, env: ToolEnvironment, case: Case) -> tuple[bool, Case]:
        return case.suspicious, case


class Case:
    """What an investigation has established so far."""

    def __init__(self, subject: str):
        self.subject = subject
        self.suspicious = False
        self.entities: set[str] = {subject}
        self.evidence: list[str] = []
        self.clean_evidence: list[str] = []


def _cash_in(txns: list[dict]) -> list[dict]:
    return [r for r in txns if r["channel"] == "cash" and r["direction"] == "in"]


def _day(row: dict) -> int:
    month, day = row["date"].split("-")[1:]
    return 30 * (int(month) - 1) + int(day) - 1


def _pass_through(txns: list[dict]) -> tuple[dict | None, list[dict]]:
    """The incoming wire most quickly passed on (>= 3 outgoing wires within 3 days)."""
    best, best_outs = None, []
    for w in txns:
        if w["channel"] != "wire" or w["direction"] != "in" or w["amount"] < 10_000:
            continue
        outs = [
            r
            for r in txns
            if r["channel"] == "wire" and r["direction"] == "out" and 0 <= _day(r) - _day(w) <= 3
        ]
        enough = len(outs) >= 3 and sum(r["amount"] for r in outs) >= 0.5 * w["amount"]
        if enough and len(outs) > len(best_outs):
            best, best_outs = w, outs
    return best, best_outs


def _cash_routine(case: Case, profile: dict, txns: list[dict]) -> Script:
    yield call("update_system_prompt", rule_mode="enhanced_due_diligence")
    sof = (yield call("check_source_of_funds", customer_id=case.subject)).result or {}
    cash = _cash_in(txns)
    near = [r for r in cash if 0.8 * THRESHOLD <= r["amount"] < THRESHOLD]
    over = [r for r in cash if r["amount"] >= THRESHOLD]
    status = sof.get("status")
    case.suspicious = (len(near) >= 4 and len(near) > len(over)) or (
        len(near) >= 3 and status == "unverified"
    )
    case.entities |= {r["counterparty"] for r in near if r["counterparty"] != "CASH"}
    case.evidence = [r["id"] for r in near[:4]] + [sof.get("reference", "")]
    case.clean_evidence = [r["ctr"] for r in over if "ctr" in r]
    if status == "verified":
        case.clean_evidence.append(sof["reference"])


def _wire_routine(case: Case, profile: dict, txns: list[dict]) -> Script:
    wire, outs = _pass_through(txns)
    if wire is None:
        return
    job = (yield call("request_wire_trace", transaction_id=wire["id"])).result or {}
    yield call("update_system_prompt", rule_mode="network_expansion")
    yield call("trace_network", customer_id=case.subject)
    sof = (yield call("check_source_of_funds", customer_id=case.subject)).result or {}
    elapsed = 4  # the retrieval below is the 4th step after the request
    for _ in range(max(0, job.get("eta_steps", 0) - elapsed)):
        yield call("search_compliance_manual", query="layering payroll wire trace")
    trace = (yield call("retrieve_async_result", job_id=job.get("job_id", ""))).result or {}
    origin_risky = trace.get("originator_country") in HIGH_RISK
    young = trace.get("originator_incorporated_days_ago", 9999) < 180
    salaries = sum(1 for r in outs if r["memo"] == "salary")
    case.suspicious = (origin_risky or young) and salaries < len(outs) / 2
    case.entities |= {r["counterparty"] for r in outs} | {wire["counterparty"]}
    if trace.get("originator_id"):
        case.entities.add(trace["originator_id"])
    case.evidence = [r["id"] for r in outs] + [trace.get("reference", "")]
    case.clean_evidence = [sof.get("reference", ""), trace.get("reference", "")]


def _trade_routine(case: Case, profile: dict, txns: list[dict]) -> Script:
    invoices = list(dict.fromkeys(r["invoice"] for r in txns if "invoice" in r))[:2]
    yield call("update_system_prompt", rule_mode="trade_scrutiny")
    checked = []
    for inv in invoices:
        checked.append((yield call("verify_customs_invoice", invoice_id=inv)).result or {})
    goods = next((c["goods"] for c in checked if c.get("goods") in GOODS), "copper wire")
    market = (yield call("check_market_price", goods=goods)).result or {}
    high = market.get("unit_price_high", float("inf"))
    case.suspicious = any(
        c.get("unit_price", 0) > 1.4 * high
        or c.get("customs") == "no declaration found"
        or c.get("manifest", "consistent") != "consistent"
        for c in checked
    )
    case.entities |= {c["counterparty"] for c in checked if "counterparty" in c}
    decls = [c["declaration_id"] for c in checked if "declaration_id" in c]
    payments = [r["id"] for r in txns if r.get("invoice") in invoices]
    case.evidence = invoices + decls + payments + [market.get("reference", "")]
    case.clean_evidence = decls + [market.get("reference", "")]


def _device_routine(case: Case, profile: dict, txns: list[dict]) -> Script:
    overlap = (yield call("check_device_overlap", customer_id=case.subject)).result or {}
    devices = overlap.get("devices", [])
    shared = [s for d in devices for s in d["shared_with"]]
    mules = {
        s["customer_id"]
        for s in shared
        if s["distinct_senders_90d"] >= 3 or s["account_age_days"] < 100
    }
    case.suspicious = len(mules) >= 2
    case.entities |= mules
    funnel = [r["id"] for r in txns if r["direction"] == "in" and r["counterparty"] in mules]
    dev_ids = [d["device_id"] for d in devices if d["shared_with"]]
    case.evidence = dev_ids + funnel[:4]
    case.clean_evidence = dev_ids + [s["customer_id"] for s in shared]


def _ownership_routine(case: Case, profile: dict, txns: list[dict]) -> Script:
    company = profile.get("company_id", case.subject)
    yield call("update_system_prompt", rule_mode="enhanced_due_diligence")
    bo = (yield call("query_beneficial_ownership", company_id=company)).result or {}
    layers = bo.get("layers", [])
    persons = [x["owner_id"] for x in layers if x["owner_type"] == "person"][:2]
    hits, refs = [], []
    for pid in persons:
        screen = (yield call("check_watchlist", entity_id=pid)).result or {}
        refs.append(screen.get("screening_ref", ""))
        if screen.get("match") == "confirmed":
            hits.append(screen["entry_id"])
    case.suspicious = bool(hits)
    case.entities |= {x["owner_id"] for x in layers}
    case.evidence = hits + [bo.get("reference", "")]
    case.clean_evidence = refs + [bo.get("reference", "")]


ROUTINES = {
    "structuring": _cash_routine,
    "layering": _wire_routine,
    "trade_based": _trade_routine,
    "mule_ring": _device_routine,
    "sanctions_evasion": _ownership_routine,
}


class Exhaustive(Investigator):
    """The steps-mode reference: the heuristic's checks of every family the surface shows, run to
    the end whatever they find, and no closing note. Its calls depend on the surface (which opens
    clean and suspicious cases alike), not on the verdict, so a prompt cut along it shows the
    evidence without its choice of calls giving the answer away (``tests/test_steps_leak.py``)."""

    stop_at_first = False
    write_notes = False


class BlindDecision(Exhaustive):
    """The exhaustive reference with its decision drawn by a seeded coin, independent of the
    evidence; the terminal call is filled as the reference fills it for that decision. A warm start
    on it teaches what a decision looks like, not which one to make."""

    def __init__(self, seed: int, flip: bool = False):
        self.coin = random.Random(f"blind-decision/{seed}")
        self.flip = flip

    def verdict(self, env: ToolEnvironment, case: Case) -> tuple[bool, Case]:
        return (self.coin.random() < 0.5) != self.flip, case


class Oracle(Investigator):
    """Reads the hidden truth at reset: the heuristic's checks (and the true family's), then the
    true answer, so it bounds the heuristic from above episode by episode."""

    def prepare(self, env: ToolEnvironment) -> None:
        super().prepare(env)
        self._truth = env.reveal()
        self._family = env.world.family

    def families(self, env: ToolEnvironment, profile: dict, txns: list[dict]) -> list[str]:
        """The heuristic's checks (so it never does less) plus the true family's if missing."""
        found = super().families(env, profile, txns)
        return found if self._family in found else [*found, self._family]

    def _typology(self, found: str) -> str:
        return self._family

    def verdict(self, env: ToolEnvironment, case: Case) -> tuple[bool, Case]:
        truth = self._truth
        ids = [i for fact_ids in truth["key_evidence"].values() for i in fact_ids]
        case.entities = set(truth["entities"])
        case.evidence = case.clean_evidence = ids
        return truth["verdict"] == "suspicious", case


def plan(policy: str, task: str, seed: int) -> list[dict[str, Any]]:
    """The calls a policy makes on (task, seed), as plain dicts ready to replay or render."""
    from env.aml.environment import AMLEnvironment
    from env.rollout import play

    return play(AMLEnvironment(), POLICIES[policy](seed), task, seed).plan


class RandomPolicy(BaseRandomPolicy):
    """Uniform over tools; arguments drawn from ids seen so far (in the order seen), enum values,
    or junk."""

    def _absorb(self, observation: ToolObservation) -> None:
        text = json.dumps(observation.result, default=str)
        self.tokens.extend(i for i in ID_PATTERN.findall(text) if i not in self.tokens)

    def _value(self, schema: dict[str, Any]) -> Any:
        rng = self.rng
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind = schema.get("type")
        if kind == "array":
            return [self._value({"type": "string"}) for _ in range(rng.randint(0, 3))]
        if kind in ("number", "integer"):
            return rng.randint(0, 50_000)
        if self.tokens and rng.random() < 0.8:
            return rng.choice(self.tokens)
        return rng.choice(("", "unknown", "JOB-1", "X-00000"))


class Fixed(AMLScript):
    """A fixed list of calls built from the opening alert (degenerate strategies)."""

    def __init__(self, plan):
        self.plan = plan

    def script(self, opening: ToolObservation) -> Script:
        alert = opening.result
        for action in self.plan(alert["subject_id"], alert["alert_id"]):  # noqa: UP028 (send)
            yield action


def _file(subject: str) -> ToolCallAction:
    return call(
        "file_sar",
        findings="Suspicious activity.",
        typology="structuring",
        entities_involved=[subject],
    )


def _every_tool(subject: str, alert_id: str) -> list[ToolCallAction]:
    plan = [call("review_alert", alert_id=alert_id)]
    for tool in (
        "get_customer_profile",
        "query_transactions",
        "check_watchlist",
        "trace_network",
        "check_source_of_funds",
        "assess_risk",
        "check_device_overlap",
        "query_beneficial_ownership",
    ):
        key = "entity_id" if tool == "check_watchlist" else "customer_id"
        key = "company_id" if tool == "query_beneficial_ownership" else key
        plan.append(call(tool, **{key: subject}))
    plan += [call("check_market_price", goods="copper wire"), _file(subject)]
    return plan


def _os_spam(subject: str, alert_id: str) -> list[ToolCallAction]:
    plan = [call("write_to_case_file", note=f"{subject} {alert_id} note {i}") for i in range(3)]
    plan += [call("update_system_prompt", rule_mode=m) for m in RULE_MODES if m != "standard"]
    plan += [call("search_compliance_manual", query="structuring layering sanctions")]
    return [*plan, _file(subject)]


def _repeat(subject: str, alert_id: str) -> list[ToolCallAction]:
    return [call("get_customer_profile", customer_id=subject)] * 200


REFERENCES = {
    "reference": lambda seed: Exhaustive(),
    "blind_decision": BlindDecision,
    "blind_decision_flipped": lambda seed: BlindDecision(seed, flip=True),
}
"""Steps-mode reference policies (``pipeline.data.steps``); not ranked with ``POLICIES``.
``blind_decision_flipped`` takes the other side of the same coin: the warm start teaches every case
both sides, so that no case-dependent decision is learnable (``pipeline.training.warmup``)."""

POLICIES = {
    "heuristic": lambda seed: Investigator(),
    "oracle": lambda seed: Oracle(),
    "random": RandomPolicy,
    "always_file": lambda seed: Fixed(lambda s, a: [_file(s)]),
    "always_close": lambda seed: Fixed(
        lambda s, a: [call("close_alert", reason="Activity consistent with the profile.")]
    ),
    "tool_spam": lambda seed: Fixed(_every_tool),
    "os_spam_then_file": lambda seed: Fixed(_os_spam),
    "repeat_call": lambda seed: Fixed(_repeat),
}
DEGENERATE = ("always_file", "always_close", "tool_spam", "os_spam_then_file", "repeat_call")
