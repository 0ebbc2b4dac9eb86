"""Incident response: alerts over a service dependency graph, one root cause, side effects.

A fault in one service makes every service that calls it (directly or not) alert too. Inspecting
a service shows its logs: the root shows the cause (a bad deploy, a memory leak, a traffic spike,
an expired certificate, a zone outage), its callers only time out on their dependencies. One
mitigation on the root fixes the impact; any other mitigation has a side effect. The status page
should say "investigating" before the fix and "resolved" after it; a postmortem naming the root
and the cause belongs after the fix. A share of incidents are false alarms (a flapping synthetic
probe): the right move is to acknowledge, look, and close as a false alarm without touching prod.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from env.base import ToolError
from env.common.text import fact_coverage
from env.ops.config import OpsConfig

SERVICES = (
    "gateway",
    "web",
    "auth",
    "search",
    "checkout",
    "cart",
    "payments",
    "inventory",
    "ledger",
    "notifications",
    "db-primary",
    "cache",
)
MITIGATIONS = ("rollback", "restart", "scale_up", "renew_cert", "failover")
STATUSES = ("investigating", "identified", "monitoring", "resolved")
CAUSES = {  # cause -> (log line, fix, postmortem words)
    "bad_deploy": (
        "deploy v{v} went out 12 min ago; NullPointerException rate up since then",
        "rollback",
        ("deploy", "release"),
    ),
    "memory_leak": (
        "heap at 97%, 4 OOM kills in 10 min, no deploy today",
        "restart",
        ("memory", "oom"),
    ),
    "traffic_spike": (
        "requests/s 4x baseline, CPU 96% on all pods, queue growing",
        "scale_up",
        ("traffic", "load"),
    ),
    "cert_expired": (
        "TLS handshake failed: certificate expired at 03:00 UTC",
        "renew_cert",
        ("certificate", "cert"),
    ),
    "zone_outage": ("zone b unreachable; replicas in zone b not responding", "failover", ("zone",)),
}


@dataclass
class IncidentCase:
    services: list[str]
    depends_on: dict[str, list[str]]
    alerts: list[dict]
    root: str | None  # None: false alarm
    cause: str | None
    version: str
    listed: bool = False
    acked: set[str] = field(default_factory=set)
    inspected: list[str] = field(default_factory=list)
    graph_seen: bool = False
    resolved: bool = False
    root_inspected_first: bool = False
    wrong_mitigations: int = 0
    mitigations: int = 0
    statuses: list[tuple[str, bool]] = field(default_factory=list)  # (status, after the fix)
    postmortems: list[tuple[str, bool]] = field(default_factory=list)

    def check(self, service: str) -> None:
        if service not in self.services:
            raise ToolError(f"no service {service!r}; services: {', '.join(self.services)}")

    def logs(self, service: str) -> dict:
        self.check(service)
        if service not in self.inspected:
            self.inspected.append(service)
        if self.resolved or self.root is None:
            note = "healthy; real traffic normal"
            if self.root is None and any(a["service"] == service for a in self.alerts):
                note = "healthy; synthetic probe-3 check flapping, real traffic normal"
            return {"service": service, "logs": note}
        if service == self.root:
            return {"service": service, "logs": CAUSES[self.cause][0].format(v=self.version)}
        bad = [d for d in self.depends_on[service] if self._affected(d)]
        if bad:
            return {"service": service, "logs": f"timeouts calling {', '.join(bad)}"}
        return {"service": service, "logs": "healthy"}

    def _affected(self, service: str) -> bool:
        if self.root is None or self.resolved:
            return False
        return service == self.root or any(self._affected(d) for d in self.depends_on[service])

    def mitigate(self, service: str, action: str) -> dict:
        self.check(service)
        self.mitigations += 1
        if self.mitigations == 1:
            self.root_inspected_first = self.root in self.inspected
        if not self.resolved and service == self.root and action == CAUSES[self.cause][1]:
            self.resolved = True
            return {"service": service, "action": action, "effect": "error rates back to normal"}
        self.wrong_mitigations += 1
        return {
            "service": service,
            "action": action,
            "effect": "side effect: brief capacity loss and dropped sessions",
        }

    @property
    def clean(self) -> bool:
        """A false alarm: nothing to mitigate."""
        return self.root is None

    def truth(self) -> str:
        if self.root is None:
            return "case: false alarm, no root cause"
        return f"root {self.root} via {self.cause}; fix {CAUSES[self.cause][1]} on {self.root}"


def build(rng: random.Random, cfg: OpsConfig) -> IncidentCase:
    """Draw a layered dependency graph, a root cause (or a false alarm) and the alerts."""
    services = rng.sample(SERVICES, rng.randint(*cfg.services))
    depends_on = {
        s: sorted(rng.sample(services[i + 1 :], min(len(services) - i - 1, rng.randint(1, 2))))
        for i, s in enumerate(services)
    }
    false_alarm = rng.random() < cfg.clean_share
    version = f"2.{rng.randint(1, 9)}.{rng.randint(0, 20)}"
    if false_alarm:
        root, cause = None, None
        alerting = rng.sample(services, rng.randint(1, 2))
    else:
        root, cause = rng.choice(services[1:]), rng.choice(sorted(CAUSES))
        case = IncidentCase(services, depends_on, [], root, cause, version)
        alerting = [s for s in services if case._affected(s)]
    alerts = [
        {
            "alert_id": f"A-{rng.randrange(100, 999)}{i}",
            "service": s,
            "signal": rng.choice(
                ["5xx rate above 5%", "p99 latency above 2s", "health check failing"]
            ),
        }
        for i, s in enumerate(sorted(alerting))
    ]
    return IncidentCase(services, depends_on, alerts, root, cause, version)


def grade(case: IncidentCase, outcome: str | None, max_chars: int) -> dict[str, float]:
    """Components in [0, 1]; which ones count depends on real incident vs false alarm."""
    acked = len(case.acked) / len(case.alerts) if case.alerts else 1.0
    side = max(0.0, 1.0 - 0.5 * case.wrong_mitigations)
    if case.root is None:
        looked = sum(a["service"] in case.inspected for a in case.alerts) / len(case.alerts)
        return {
            "outcome": float(outcome == "false_alarm" and case.mitigations == 0),
            "side_effects": side,
            "acknowledged": acked,
            "communication": 1.0,
            "postmortem": 1.0,
            "process": looked,
        }
    before = any(s != "resolved" and not after for s, after in case.statuses)
    final = bool(case.statuses) and case.statuses[-1] == ("resolved", True)
    premature = any(not after for _, after in case.postmortems)
    facts = [case.root, CAUSES[case.cause][2]]
    last = [text for text, after in case.postmortems if after]
    return {
        "outcome": float(case.resolved and outcome == "mitigated"),
        "side_effects": side,
        "acknowledged": acked,
        "communication": 0.5 * before + 0.5 * final,
        "postmortem": 0.0 if premature or not last else fact_coverage(last[-1], facts, max_chars),
        "process": float(case.root_inspected_first),
    }


def weights(case: IncidentCase) -> dict[str, float]:
    """A false alarm has nothing to communicate or write up: those parts weigh nothing."""
    if case.root is None:
        return {
            "outcome": 0.5,
            "side_effects": 0.1,
            "acknowledged": 0.1,
            "communication": 0.0,
            "postmortem": 0.0,
            "process": 0.3,
        }
    return {
        "outcome": 0.35,
        "side_effects": 0.1,
        "acknowledged": 0.1,
        "communication": 0.15,
        "postmortem": 0.15,
        "process": 0.15,
    }


def coverage(case: IncidentCase) -> float:
    """Share of the relevant facts seen: the alerts, the graph, the root's (or alerting) logs."""
    if case.root is None:
        targets = {a["service"] for a in case.alerts}
        return (case.listed + len(targets & set(case.inspected))) / (1 + len(targets))
    return (case.listed + case.graph_seen + (case.root in case.inspected)) / 3
