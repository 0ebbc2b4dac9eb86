"""The audit's plan builders: the per-environment knowledge of what a decision is, how to flip
it and what a citation is, and schema-valid arguments for blind calls (``rewards.audit``)."""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

from env.base import ToolObservation, ToolSpec
from env.registry import env_class
from env.rollout import Episode

SHALLOW_CALLS = 3
FARM_ENUM_CAP = 6
_ID = re.compile(r"\b[A-Za-z]{1,6}[-_]?\d{2,}[A-Za-z0-9_-]*\b")


def ids_in(observation: ToolObservation) -> list[str]:
    text = f"{observation.message} {observation.result}"
    seen: dict[str, None] = {}
    for match in _ID.findall(text):
        seen.setdefault(match, None)
    return list(seen) or ["X-1"]


def fill_arguments(spec: ToolSpec, ids: list[str], rng: random.Random) -> dict[str, Any]:
    """Plausible schema-valid arguments for ``spec``: ids from the opening, enums at random."""
    args: dict[str, Any] = {}
    for name, schema in spec.parameters.get("properties", {}).items():
        if name not in spec.parameters.get("required", []):
            continue
        args[name] = _value(schema, ids, rng, name)
    return args


def _value(schema: dict[str, Any], ids: list[str], rng: random.Random, name: str) -> Any:
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "anyOf" in schema:
        options = [s for s in schema["anyOf"] if s.get("type") != "null"] or schema["anyOf"]
        return _value(options[0], ids, rng, name)
    kind = schema.get("type")
    if kind == "array":
        item = schema.get("items", {})
        if "enum" in item:
            return [rng.choice(item["enum"])]
        return list(ids[:5]) if item.get("type", "string") == "string" else []
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return float(schema.get("minimum", 100.0) or 100.0)
    if kind == "boolean":
        return True
    if kind == "object":
        return {}
    if any(word in name for word in ("id", "entity", "account", "customer", "target", "order")):
        return rng.choice(ids)
    return "Suspicious activity found; see " + ", ".join(ids[:3])


def decision_of(env_name: str, episode: Episode) -> str | None:
    """The episode's decision as a label the flip understands (None: undecided or no decision).

    AML ``file_sar``/``close_alert``; fraud defender ``fraud``/``clean`` (stopping every route
    counts as ``fraud``), fraudster none (its only terminal call is the getaway); gang
    ``gang``/``no_gang`` (flags or none); support the resolution; ops expenses the majority
    verdict of its ``decide_expense`` calls, scheduling ``booked``/``no_slot``, incident the
    closing outcome.
    """
    report = episode.report
    if report is None or not report.decision_reached:
        return None
    if env_name == "fraud":
        if episode.task != "defender":
            return None
        return "clean" if report.grade.decision == "clean" else "fraud"
    if env_name == "ops" and episode.task == "expenses":
        verdicts = [
            c["arguments"].get("verdict") for c in episode.plan if c["tool"] == "decide_expense"
        ]
        return Counter(verdicts).most_common(1)[0][0] if verdicts else None
    return report.grade.decision


def majority_decision(env_name: str, episodes: list[Episode]) -> str | None:
    """The most common honest decision of the task (a proxy for the majority truth)."""
    labels = [d for d in (decision_of(env_name, e) for e in episodes) if d is not None]
    return Counter(labels).most_common(1)[0][0] if labels else None


_OTHER = {
    "file_sar": "close_alert",
    "close_alert": "file_sar",
    "fraud": "clean",
    "clean": "fraud",
    "gang": "no_gang",
    "no_gang": "gang",
    "refunded": "denied",
    "denied": "refunded",
    "escalated": "resolved",
    "resolved": "escalated",
    "booked": "no_slot",
    "no_slot": "booked",
    "mitigated": "false_alarm",
    "false_alarm": "mitigated",
    "approve": "reject",
    "reject": "approve",
    "flag": "approve",
}


def _expense_verdicts(plan: list[dict[str, Any]], target: str | None) -> list[dict[str, Any]]:
    """Ops expenses: the decision is every claim's verdict, so a flip changes each of them (each
    to its opposite, or all to ``target``); the plan's majority verdict only names it, so a
    ``target`` equal to that label still changes the claims that differ."""
    out = []
    for call in plan:
        if call["tool"] == "decide_expense":
            verdict = call["arguments"].get("verdict")
            new = target or _OTHER.get(verdict, verdict)
            call = {**call, "arguments": {**call["arguments"], "verdict": new}}
        out.append(dict(call))
    return out


def flip_plan(
    env_name: str, episode: Episode, target: str | None = None
) -> list[dict[str, Any]] | None:
    """The honest plan ending in ``target`` (default: the opposite decision), arguments filled
    from the episode; None where the episode has no decision to flip."""
    current = decision_of(env_name, episode)
    if current is None:
        return None
    if env_name == "ops" and episode.task == "expenses":
        return _expense_verdicts(episode.plan, target)
    target = target or _OTHER.get(current)
    if target is None or target == current:
        return list(episode.plan)
    body, last = _split_terminal(env_name, episode)
    seen = ids_seen(episode)
    if env_name == "aml":
        text = last["arguments"].get("findings") or last["arguments"].get("reason") or ""
        if target == "close_alert":
            return body + [_call("close_alert", reason=text or "Activity explained.")]
        typology = _enum(env_name, "file_sar", "typology")[0]
        subject = episode.observations[0].result.get("subject_id", seen[0] if seen else "X-1")
        return body + [
            _call("file_sar", findings=text, typology=typology, entities_involved=[subject])
        ]
    if env_name == "fraud":
        return body + [_call("close_case", verdict=target)]
    if env_name == "gang":
        if target == "no_gang":
            return [c for c in body if c["tool"] not in ("flag", "unflag")] + [last]
        accounts = [i for i in seen if re.fullmatch(r"u\d+", i)]
        return body + [_call("flag", account_id=a) for a in accounts] + [last]
    if env_name == "support":
        return body + [_call("close_ticket", resolution=target)]
    if env_name == "ops":
        if episode.task == "scheduling":
            if target == "no_slot":
                return body + [_call("report_no_slot", reason="No slot fits the attendees.")]
            slot = _first_slot(episode)
            return body + [_call("book_meeting", start_utc=slot)]
        return body + [_call("close_incident", outcome=target)]
    return None


def cite_all_plan(
    env_name: str, episode: Episode, calls: int | None = None
) -> list[dict[str, Any]] | None:
    """The honest plan (or its first ``calls`` calls and its decision) citing every id seen.

    AML: every id appended to the SAR findings or the closing reason; support: to the last
    reply; ops incident: to the postmortem; gang: every account flagged; fraud defender: every
    account frozen. None where the environment cites nothing.
    """
    if decision_of(env_name, episode) is None and env_name != "support":
        return None
    body, last = _split_terminal(env_name, episode)
    if calls is not None:
        body = body[:calls]
        seen = ids_seen(episode, upto=calls)
    else:
        seen = ids_seen(episode)
    dump = " Evidence: " + ", ".join(seen)
    if env_name == "aml":
        key = "findings" if last["tool"] == "file_sar" else "reason"
        text = str(last["arguments"].get(key, ""))
        return body + [{**last, "arguments": {**last["arguments"], key: text + dump}}]
    if env_name == "gang":
        accounts = [i for i in seen if re.fullmatch(r"u\d+", i)]
        return body + [_call("flag", account_id=a) for a in accounts] + [last]
    if env_name == "fraud":
        accounts = [i for i in seen if re.fullmatch(r"U\d+", i)]
        return body + [_call("freeze", account_id=a) for a in accounts] + [last]
    tool, key = {
        "support": ("reply_to_customer", "message"),
        "ops": ("publish_postmortem", "summary"),
    }[env_name]
    hits = [i for i, c in enumerate(body) if c["tool"] == tool]
    if not hits:
        if calls is None:
            return None
        body = body + [_call(tool, **{key: ""})]
        hits = [len(body) - 1]
    i = hits[-1]
    text = str(body[i]["arguments"].get(key, ""))
    body[i] = {**body[i], "arguments": {**body[i]["arguments"], key: text + dump}}
    return body + [last]


def decision_plans(
    env_name: str, episode: Episode, majority: str | None
) -> dict[str, list[dict[str, Any]]]:
    """The decision and citation strategies built from one honest episode."""
    out: dict[str, list[dict[str, Any]]] = {}
    flipped = flip_plan(env_name, episode)
    if flipped is not None:
        out["flipped_decision"] = flipped
        out["investigate_then_majority"] = flip_plan(env_name, episode, majority) or flipped
    cited = cite_all_plan(env_name, episode)
    if cited is not None:
        out["cite_all_seen"] = cited
        shallow = cite_all_plan(env_name, episode, calls=SHALLOW_CALLS)
        if shallow is not None:
            out["shallow_id_dump"] = shallow
    return out


def farm_plans(
    env_name: str, observation: ToolObservation, rng: random.Random
) -> dict[str, list[dict[str, Any]]]:
    """Blind farming: every non-terminal, non-harmful tool of the task (once per enum value of
    its first enum argument, up to ``FARM_ENUM_CAP``) with ids from the opening, then each
    decision (every terminal tool of the task, once per enum value)."""
    specs = env_class(env_name).tool_specs()
    allowed = (
        (observation.result or {}).get("tools_for_this_task")
        if isinstance(observation.result, dict)
        else None
    )
    specs = [s for s in specs if not allowed or s.name in allowed]
    ids = ids_in(observation)
    farm: list[dict[str, Any]] = []
    for spec in specs:
        if spec.terminal or spec.kind == "harmful":
            continue
        for args in _enum_variants(spec, ids, rng):
            farm.append({"tool": spec.name, "arguments": args})
    out = {}
    for spec in specs:
        if not spec.terminal or spec.kind == "harmful":
            continue
        for args in _enum_variants(spec, ids, rng):
            values = [str(v) for k, v in args.items() if _is_enum(spec, k)]
            label = "farm_then_" + "_".join([spec.name, *values])
            out[label] = farm + [{"tool": spec.name, "arguments": args}]
    return out


def _is_enum(spec: ToolSpec, name: str) -> bool:
    return "enum" in spec.parameters.get("properties", {}).get(name, {})


def _enum_variants(spec: ToolSpec, ids: list[str], rng: random.Random) -> list[dict[str, Any]]:
    base = fill_arguments(spec, ids, rng)
    enums = [k for k in spec.parameters.get("properties", {}) if _is_enum(spec, k) and k in base]
    if not enums:
        return [base]
    values = spec.parameters["properties"][enums[0]]["enum"][:FARM_ENUM_CAP]
    return [{**base, enums[0]: v} for v in values]


def _enum(env_name: str, tool: str, argument: str) -> list[Any]:
    spec = env_class(env_name).tool_specs_by_name()[tool]
    return list(spec.parameters["properties"][argument].get("enum", []))


def _call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


def _split_terminal(env_name: str, episode: Episode) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The honest calls before the decision, and the decision call (a fraud defender whose freezes
    ended the episode gets the ``close_case`` it would have written)."""
    plan = [dict(c) for c in episode.plan]
    specs = env_class(env_name).tool_specs_by_name()
    if plan and specs.get(plan[-1]["tool"]) is not None and specs[plan[-1]["tool"]].terminal:
        return plan[:-1], plan[-1]
    if env_name == "fraud":
        return plan[:-1], _call("close_case", verdict="fraud")
    return plan, plan[-1] if plan else _call("noop")


def ids_seen(episode: Episode, upto: int | None = None) -> list[str]:
    """Every id in the episode's observations (the opening and the first ``upto`` results)."""
    seen: dict[str, None] = {}
    observations = episode.observations if upto is None else episode.observations[: upto + 1]
    for obs in observations:
        for match in _ID.findall(f"{obs.message} {obs.result}"):
            seen.setdefault(match, None)
    return list(seen)


def _first_slot(episode: Episode) -> str:
    for obs in episode.observations:
        found = re.search(r"20\d\d-\d\d-\d\d \d\d:\d\d", f"{obs.message} {obs.result}")
        if found:
            return found.group(0)
    return "2026-03-02 09:00"


def audit_row(env_name: str, task: str, seed: int, completion: str) -> dict[str, Any]:
    return {"env": env_name, "task": task, "seed": seed, "completion": completion}
