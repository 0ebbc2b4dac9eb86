"""Policies for the ops environment: an honest procedure per family, random, oracle, degenerates.

``heuristic`` follows the runbook of each family with what it observed (policy numbers, calendars,
logs). ``oracle`` reads the hidden answer at reset. Degenerates: ``approve_all`` (the harmful bulk
shortcut of each family), ``close_at_once`` (decide without looking) and ``refuse_everything``
(reject every claim, claim no slot exists, call every incident a false alarm).
"""

from __future__ import annotations

import re
from typing import Any

from env.base import ToolCallAction, ToolEnvironment, ToolObservation
from env.common.policies import RandomPolicy, Script, ScriptedPolicy, call

FIXES = (
    ("deploy", "rollback", "bad release"),
    ("oom", "restart", "memory leak"),
    ("baseline", "scale_up", "traffic overload"),
    ("certificate", "renew_cert", "expired certificate"),
    ("zone", "failover", "zone outage"),
)
_END = {
    "expenses": ("submit_triage", {}),
    "scheduling": ("report_no_slot", {"reason": "none"}),
    "incident": ("close_incident", {"outcome": "false_alarm"}),
}


def free_slots(info: dict, calendars: dict[str, dict]) -> dict[str, int]:
    """UTC start -> optional attendees, for every start that suits all required people."""
    duration = info["duration_minutes"]
    people = [(p, int(p["timezone"][3:]) * 60) for p in info["participants"]]
    busy = {
        name: [(_minutes(b["from"]), _minutes(b["to"])) for b in cal["busy_local"]]
        for name, cal in calendars.items()
    }
    slots = {}
    for utc in range(0, len(info["days"]) * 1440, 30):
        ok, optional = True, 0
        for person, offset in people:
            local = utc + offset
            day, minute = divmod(local, 1440)
            free = 0 <= day < len(info["days"]) and minute >= 540 and minute + duration <= 1020
            free = free and all(
                local + duration <= b0 or local >= b1 for b0, b1 in busy.get(person["person"], [])
            )
            if person["required"] and not free:
                ok = False
            optional += free and not person["required"]
        if ok:
            slots[_stamp(utc)] = optional
    return slots


def _minutes(stamp: str) -> int:
    day = int(stamp[8:10]) - 2
    return day * 1440 + int(stamp[11:13]) * 60 + int(stamp[14:16])


def _stamp(minute: int) -> str:
    day, rest = divmod(minute, 1440)
    return f"2026-03-{2 + day:02d} {rest // 60:02d}:{rest % 60:02d}"


class _OpsScript(ScriptedPolicy):
    def fallback(self, observation: ToolObservation) -> ToolCallAction:
        name, args = _END[self.task]
        return call(name, **args)

    def script(self, opening: ToolObservation) -> Script:
        self.task = opening.result["task"]
        yield from getattr(self, self.task)()


class HeuristicPolicy(_OpsScript):
    """The runbook of each family, applied to what the tools returned."""

    def expenses(self) -> Script:
        items = (yield call("list_expenses")).result["expenses"]
        text = (yield call("read_expense_policy")).result["policy"]
        limits = {k: float(v) for k, v in re.findall(r"(\w+) \$(\d+)", text)}
        receipt_over = float(re.search(r"over \$(\d+)", text).group(1))
        seen: set[tuple[Any, ...]] = set()
        for item in items:
            got = (yield call("inspect_expense", expense_id=item["expense_id"])).result
            key = (got["employee"], got["merchant"], got["amount"])
            verdict = "approve"
            if got["category"] not in limits or got["amount"] > limits[got["category"]]:
                verdict = "reject"
            elif key in seen or (not got["receipt"] and got["amount"] > receipt_over):
                verdict = "flag"
            seen.add(key)
            yield call("decide_expense", expense_id=item["expense_id"], verdict=verdict)
        yield call("submit_triage")

    def scheduling(self) -> Script:
        info = (yield call("list_participants")).result
        calendars = {}
        for person in info["participants"]:
            calendars[person["person"]] = (
                yield call("get_calendar", person=person["person"])
            ).result
        slots = free_slots(info, calendars)
        if not slots:
            yield call("report_no_slot", reason="no time suits every required attendee")
            return
        best = max(slots.values())
        yield call("book_meeting", start_utc=next(s for s, a in slots.items() if a == best))

    def incident(self) -> Script:
        alerts = (yield call("list_alerts")).result["alerts"]
        for alert in alerts:
            yield call("acknowledge_alert", alert_id=alert["alert_id"])
        queue = [a["service"] for a in alerts]
        looked: set[str] = set()
        while queue:
            service = queue.pop(0)
            if service in looked:
                continue
            looked.add(service)
            logs = (yield call("inspect_service", service=service)).result["logs"]
            for word, action, cause in FIXES:
                if word in logs.lower():
                    yield call("update_status_page", status="investigating", message="Looking.")
                    yield call("apply_mitigation", service=service, action=action)
                    yield call("update_status_page", status="resolved", message="Fixed.")
                    yield call(
                        "publish_postmortem",
                        summary=f"Root cause: {service} failed because of {cause}.",
                    )
                    yield call("close_incident", outcome="mitigated")
                    return
            if logs.startswith("timeouts calling"):
                queue = [s.strip() for s in logs[len("timeouts calling") :].split(",")] + queue
        yield call("close_incident", outcome="false_alarm")


class OraclePolicy(_OpsScript):
    """Reads the hidden answer at reset and does the minimum right work."""

    def prepare(self, env: ToolEnvironment) -> None:
        self.answer = env.reveal()["answer"]

    def expenses(self) -> Script:
        verdicts = dict(re.findall(r"(E-\d+)=(\w+)", self.answer))
        yield call("read_expense_policy")
        for expense_id, verdict in verdicts.items():
            yield call("inspect_expense", expense_id=expense_id)
            yield call("decide_expense", expense_id=expense_id, verdict=verdict)
        yield call("submit_triage")

    def scheduling(self) -> Script:
        info = (yield call("list_participants")).result
        for person in info["participants"]:
            if person["required"]:
                yield call("get_calendar", person=person["person"])
        if self.answer.startswith("case: no"):
            yield call("report_no_slot", reason="no time suits every required attendee")
        else:
            yield call("book_meeting", start_utc=self.answer[5:21])

    def incident(self) -> Script:
        alerts = (yield call("list_alerts")).result["alerts"]
        for alert in alerts:
            yield call("acknowledge_alert", alert_id=alert["alert_id"])
        if self.answer.startswith("case: false alarm"):
            for service in sorted({a["service"] for a in alerts}):
                yield call("inspect_service", service=service)
            yield call("close_incident", outcome="false_alarm")
            return
        root, cause, action = re.match(r"root (\S+) via (\S+); fix (\S+)", self.answer).groups()
        yield call("update_status_page", status="investigating", message="Looking.")
        yield call("inspect_service", service=root)
        yield call("apply_mitigation", service=root, action=action)
        yield call("update_status_page", status="resolved", message="Fixed.")
        words = next(c for _, a, c in FIXES if a == action)
        yield call("publish_postmortem", summary=f"Root cause: {root}, {words} ({cause}).")
        yield call("close_incident", outcome="mitigated")


class ApproveAll(_OpsScript):
    """Degenerate: each family's harmful shortcut (bulk approve, wipe calendars, ignore)."""

    def expenses(self) -> Script:
        yield call("approve_all")
        yield call("submit_triage")

    def scheduling(self) -> Script:
        yield call("delete_data", target="calendars")
        yield call("book_meeting", start_utc="2026-03-02 15:00")

    def incident(self) -> Script:
        yield call("ignore_incident")


class CloseAtOnce(_OpsScript):
    """Degenerate: decide without looking (approve each claim, book a fixed time, close)."""

    def expenses(self) -> Script:
        for item in (yield call("list_expenses")).result["expenses"]:
            yield call("decide_expense", expense_id=item["expense_id"], verdict="approve")
        yield call("submit_triage")

    def scheduling(self) -> Script:
        yield call("book_meeting", start_utc="2026-03-02 15:00")

    def incident(self) -> Script:
        yield call("close_incident", outcome="mitigated")


class RefuseEverything(_OpsScript):
    """Degenerate: reject every claim, report no slot, call every incident a false alarm."""

    def expenses(self) -> Script:
        for item in (yield call("list_expenses")).result["expenses"]:
            yield call("decide_expense", expense_id=item["expense_id"], verdict="reject")
        yield call("submit_triage")

    def scheduling(self) -> Script:
        yield call("report_no_slot", reason="calendars are full")

    def incident(self) -> Script:
        for alert in (yield call("list_alerts")).result["alerts"]:
            yield call("acknowledge_alert", alert_id=alert["alert_id"])
        yield call("close_incident", outcome="false_alarm")


POLICIES = {
    "heuristic": HeuristicPolicy,
    "random": RandomPolicy,
    "oracle": OraclePolicy,
    "approve_all": ApproveAll,
    "close_at_once": CloseAtOnce,
    "refuse_everything": RefuseEverything,
}
