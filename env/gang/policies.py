"""Policies for the gang environment: an honest heuristic, random, an oracle and two degenerates.

The heuristic reads observations only. It maps each alert's mutual-follow circle, scores the
alerts with a few weak signals (young, few posts, unverified email, hosting IP, photo found on the
web, templated bio; office IPs and shared fan photos count against), checks the best alert's circle
by scoring one or two of its mutual follows, widens the circle through members' mutual follows
(capped, so it never spreads into honest friend groups), flags it and submits. When no circle looks
like a gang it submits no flags (the clean answer).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from env.base import ToolCallAction, ToolEnvironment, ToolObservation
from env.common.policies import RandomPolicy as BaseRandomPolicy
from env.common.policies import Script as Plan
from env.common.policies import ScriptedPolicy


def _call(tool: str, account_id: str | None = None) -> ToolCallAction:
    args = {"account_id": account_id} if account_id is not None else {}
    return ToolCallAction(tool=tool, arguments=args)


class _PlanPolicy(ScriptedPolicy):
    """A gang policy written as a script (``plan``); it submits when the script ends."""

    def prepare(self, env: ToolEnvironment) -> None:
        self.env = env

    def script(self, opening: ToolObservation) -> Plan:
        return self.plan(self.env, opening)

    def plan(self, env: ToolEnvironment, opening: ToolObservation) -> Plan:
        raise NotImplementedError

    def fallback(self, observation: ToolObservation) -> ToolCallAction:
        return _call("submit")


def _visible(opening: ToolObservation) -> list[str]:
    res = opening.result or {}
    return [a["account_id"] for a in res.get("alerts", [])] + list(res.get("recently_active", []))


class HeuristicPolicy(_PlanPolicy):
    """Honest investigation from the alerts outward (observations only)."""

    alert_threshold = 0.0
    circle_threshold = 0.6

    def plan(self, env: ToolEnvironment, opening: ToolObservation) -> Plan:
        alerts = [a["account_id"] for a in opening.result["alerts"]]
        self.left = opening.steps_left
        # Small budgets: three tools per account, stop scoring as soon as the sign is clear.
        self.tight = tight = self.left <= 30
        mutual: dict[str, set[str]] = {}
        for a in alerts:
            mutual[a] = yield from self._network(a)
        score: dict[str, float] = {}
        for a in sorted(alerts, key=lambda a: (-len(mutual[a]), a)):
            if self.left < 12:
                break
            score[a] = yield from self._score(a, stop_high=tight)
        ranked = sorted(score, key=lambda a: (-score[a], a))
        circle: set[str] = set()
        best_mean = self.circle_threshold
        for top in ranked[:2]:
            if score[top] < self.alert_threshold or self.left < 10:
                break
            # Check the circle, not just the alert: its best-connected mutuals must look alike.
            peers = sorted(mutual[top], key=lambda x: (-sum(x in m for m in mutual.values()), x))
            known = [score[x] for x in peers if x in score]
            scores = [score[top]] + ([max(known)] if known and not self.tight else [])
            fresh = [x for x in peers if x not in score]
            for n, peer in enumerate(fresh[:2]):
                mean = sum(scores) / len(scores)
                if n and (len(scores) > 1 and mean >= best_mean or self.left < 10 + len(peers)):
                    break  # a second peer only when the first left doubt and steps allow
                scores.append((yield from self._score(peer, stop_high=True)))
            mean = sum(scores) / len(scores)
            if len(scores) > 1 and mean >= best_mean:
                best_mean, circle = mean, {top} | mutual[top]
        if not circle:
            yield self._use(_call("submit"))
            return
        yield from self._flag_circle(circle, mutual, flagged=set())

    def _flag_circle(
        self, circle: set[str], mutual: dict[str, set[str]], flagged: set[str]
    ) -> Plan:
        """Widen the circle through members whose own mutual follows overlap it (capped: no
        cascade into honest friend groups; lists read before the gang evaded are the richest),
        flag every member not yet ``flagged`` while steps allow, and submit."""
        members = set(circle)
        for x in sorted(circle & set(mutual)):
            if len(mutual[x] & members) >= 2:
                self._join(members, mutual[x])
        for x in sorted(circle - set(mutual)):
            if self.left - len(members) - 2 < 1:
                break
            mutual[x] = yield from self._network(x)
            if len(mutual[x] & members) >= 1:
                self._join(members, mutual[x])
        for x in sorted(members - flagged):
            if self.left <= 1:
                break
            yield self._use(_call("flag", x))
        yield self._use(_call("submit"))

    @staticmethod
    def _join(members: set[str], found: set[str], cap: int = 16) -> None:
        members |= set(sorted(found - members)[: max(0, cap - len(members))])

    def _network(self, account: str) -> Generator[ToolCallAction, ToolObservation, set[str]]:
        obs = yield self._use(_call("investigate_network", account))
        r = obs.result if isinstance(obs.result, dict) and not obs.error else {}
        return set(r.get("mutual", []))

    def _use(self, action: ToolCallAction) -> ToolCallAction:
        self.left -= 1
        return action

    def _score(
        self, account: str, stop_high: bool, exhaustive: bool = False
    ) -> Generator[ToolCallAction, ToolObservation, float]:
        """Sum of weak log-likelihood-ratio signals from up to four tools; stops when clear
        (``exhaustive``: all four, whatever they show)."""
        total = 0.0
        tools = ("check_ip", "inspect", "reverse_image_search", "analyze_bio")
        for tool in tools[:3] if self.tight and not exhaustive else tools:
            obs = yield self._use(_call(tool, account))
            r = obs.result if isinstance(obs.result, dict) and not obs.error else {}
            total += _signal(tool, r)
            if not exhaustive and (total <= -2.5 or (stop_high and total >= 2.8)):
                break
        return total


def _signal(tool: str, r: dict[str, Any]) -> float:
    """Evidence one tool result gives for 'gang member' (positive) or 'honest' (negative)."""
    if not r:
        return 0.0
    if tool == "check_ip":
        kind = r.get("ip_type")
        if kind == "hosting":
            return 1.5
        if kind == "business":
            return -2.0
        return -0.8 if kind == "residential" else -0.2
    if tool == "inspect":
        s = 1.1 if r.get("age_days", 9999) < 150 else -0.6
        s += 0.8 if r.get("posts", 9999) <= 40 else -0.8
        s += 0.5 if not r.get("email_verified", True) else -0.3
        return s
    if tool == "reverse_image_search":
        s = 0.9 if r.get("web_matches", 0) >= 5 else -0.6
        return s - (0.8 if len(r.get("same_photo_accounts", [])) >= 3 else 0.0)
    if tool == "analyze_bio":
        return 0.5 if r.get("template_score", 0.0) >= 0.45 else -0.5
    return 0.0


class ReferencePolicy(HeuristicPolicy):
    """The steps-mode reference: a fixed shape of investigation, then the heuristic's decision.

    It maps every alert's mutual follows, scores every alert with the same tools (all four; three
    on a budget of 30 steps or fewer), whatever they show, then scores one fresh peer of the best
    alert, so the calls before its first flag (or submit) are the same in number and kind for a
    gang and a clean case. The heuristic stops scoring when the sign is clear and maps only the
    circles it believes, so its calls alone told the verdict (``tests/test_steps_leak.py``).
    Widening the circle comes after the first flag."""

    def plan(self, env: ToolEnvironment, opening: ToolObservation) -> Plan:
        alerts = [a["account_id"] for a in opening.result["alerts"]]
        visible = _visible(opening)
        self.left = opening.steps_left
        self.tight = self.left <= 30
        mutual: dict[str, set[str]] = {}
        for a in alerts:
            mutual[a] = yield from self._network(a)
        score: dict[str, float] = {}
        for a in alerts:
            score[a] = yield from self._score(a, stop_high=False, exhaustive=True)
        best = max(alerts, key=score.__getitem__)  # the first of equals
        by_links = sorted(mutual[best], key=lambda x: (-sum(x in m for m in mutual.values()), x))
        spare = [x for x in [*by_links, *visible] if x not in score]
        peer = spare[0] if spare else best
        if spare:
            score[peer] = yield from self._score(peer, stop_high=False, exhaustive=True)
        mean = (score[best] + score[peer]) / 2
        if score[best] < self.alert_threshold or mean < self.circle_threshold:
            yield self._use(_call("submit"))
            return
        yield self._use(_call("flag", best))  # the decision: everything after it may adapt
        yield from self._flag_circle({best} | mutual[best], mutual, flagged={best})


class RandomPolicy(BaseRandomPolicy):
    """Random tools on the accounts it has seen (the opening's, then those results list); submits
    at a random moment."""

    TOOLS = ("inspect", "investigate_network", "reverse_image_search", "analyze_bio", "check_ip")
    TOOLS += ("flag", "flag", "unflag", "get_policy")

    def reset(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        self.seen = _visible(observation)
        super().reset(env, observation)

    def _absorb(self, observation: ToolObservation) -> None:
        if isinstance(observation.result, dict):
            for key in ("mutual", "following", "followers", "accounts_on_ip"):
                found = observation.result.get(key, [])
                if isinstance(found, list):
                    self.seen.extend(x for x in found if x not in self.seen)

    def act(self, observation: ToolObservation) -> ToolCallAction:
        self._absorb(observation)
        if self.rng.random() < 0.06:
            return _call("submit")
        tool = self.rng.choice(self.TOOLS)
        return _call(tool, None if tool == "get_policy" else self.rng.choice(self.seen))


class OraclePolicy(_PlanPolicy):
    """Reads the hidden gang at reset, flags exactly it and submits: the upper bound."""

    def reset(self, env: ToolEnvironment, observation: ToolObservation) -> None:
        self._gang = list(env.reveal().get("gang", []))
        super().reset(env, observation)

    def plan(self, env: ToolEnvironment, opening: ToolObservation) -> Plan:
        for x in self._gang:
            yield _call("flag", x)
        yield _call("submit")


class SubmitAtOncePolicy(_PlanPolicy):
    """Degenerate: submits an empty set without looking."""

    def plan(self, env: ToolEnvironment, opening: ToolObservation) -> Plan:
        yield _call("submit")


class FlagEverythingPolicy(_PlanPolicy):
    """Degenerate: flags every account the opening shows, then submits."""

    def plan(self, env: ToolEnvironment, opening: ToolObservation) -> Plan:
        for x in _visible(opening)[: max(0, opening.steps_left - 1)]:
            yield _call("flag", x)
        yield _call("submit")


REFERENCES = {"reference": ReferencePolicy}
"""Steps-mode reference policies (``pipeline.data.steps``); not ranked with ``POLICIES``."""

POLICIES = {
    "heuristic": HeuristicPolicy,
    "random": RandomPolicy,
    "oracle": OraclePolicy,
    "submit_at_once": SubmitAtOncePolicy,
    "flag_everything": FlagEverythingPolicy,
}
