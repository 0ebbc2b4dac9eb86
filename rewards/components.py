"""The six reward components, one plain TRL reward function each.

Every function has TRL's signature ``f(prompts, completions, **kwargs) -> list[float | None]`` and
reads the dataset columns ``env``, ``task`` and ``seed`` (and, in steps mode, ``prefix``) from
``kwargs``. They share one replay
per completion (``rewards.replay.CACHE``) and each reads a different part of the same episode
report, so no signal is counted twice:

- ``format_reward``: how well the calls are written (graded: a call-like JSON object that is not
  a call 0.05 < unknown tool < bad arguments < valid), plus whether the plan ends with exactly one
  terminal call. Prose or nothing -> 0.
- ``investigation_reward``: the environment's ``evidence_coverage`` -- hidden, case-relevant
  evidence actually revealed before the decision -- times the decision gate. Dummy calls reveal
  nothing, so earn nothing.
- ``execution_reward``: the sum of the per-step rewards of the replay, its positive part times the
  decision gate (costs and penalties always count).
- ``grade_reward``: the terminal grade with the right decision; a wrong decision, and calls that
  never reach one, score ``-WRONG_DECISION_PENALTY`` (``gate * grade - (1 - gate) * penalty``).
- ``os_mechanics_reward``: the environment's ``os_mechanics`` effect metric (AML) times the decision
  gate, or ``None`` for environments that do not measure one (TRL then ignores it for that row).
- ``decision_reward``: the decision alone, 1 right and -1 wrong or undecided; weight 0 by default
  (logged), for runs that train the decision itself (its docstring says why).

The decision first (``decision_gate``): every part that does not depend on the decision (evidence
revealed, OS mechanics, positive step shaping) pays only as far as the decision was right. The
gate is the grade's decision component (``decision``, ``resolution``, ``outcome`` or
``accuracy``, the first the environment reports) and 0 without a decision, so farming cannot lift
a wrong decision above a right one, and the grade of a wrong decision is a penalty, not a small
positive. rewards/README.md gives the numbers.

In steps mode the format, investigation and execution rewards judge the reply's own calls only
(the prefix's steps and the evidence it already revealed are not the reply's); the grade and the
OS-mechanics metric score the whole episode, prefix included.

They never raise: a row that cannot be scored gets 0 and the reason is logged; parse errors go to
TRL's ``log_metric`` / ``log_extra`` when the trainer passes them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from rewards.replay import CACHE, Outcome, outcome_from_env

logger = logging.getLogger(__name__)

FORMAT_PROTOCOL_SHARE = 0.3  # share of the format reward for ending with one terminal call
FORMAT_ATTEMPT = 0.05  # no call read, but a JSON object or <tool_call> tag was attempted
INVESTIGATION_CAP = 1.0  # coverage above this earns nothing more
WRONG_DECISION_PENALTY = 1.5  # grade_reward of a wrong decision is minus this (weighted: -3.0)
# The grade component that says whether the decision was right, first found wins.
DECISION_COMPONENTS = ("decision", "resolution", "outcome", "accuracy")


def decision_gate(item: Outcome) -> float:
    """How right the episode's decision was, in [0, 1]; 0 without a decision.

    Read from the grade's decision component (the first of ``DECISION_COMPONENTS`` the
    environment reports: 1 or 0 for a single decision, between for a partly right one such as an
    ops expense triage); an environment reporting none of them gates on the decision alone.
    """
    report = item.report
    if report is None or not report.decision_reached:
        return 0.0
    parts = report.grade.components
    for name in DECISION_COMPONENTS:
        if name in parts:
            return min(1.0, max(0.0, float(parts[name])))
    return 1.0


def decision_wrong(item: Outcome) -> bool:
    """A decision was reached and it was wholly wrong (its gate is 0)."""
    return bool(item.report is not None and item.report.decision_reached) and not decision_gate(
        item
    )


def outcomes(completions: Sequence[Any], **kwargs: Any) -> list[Outcome]:
    """One outcome per completion: from the interactive environments if given, else a replay."""
    environments = kwargs.get("environments")
    n = len(completions)
    if environments:
        result = []
        for i in range(n):
            adapter = environments[i] if i < len(environments) else None
            env = getattr(adapter, "env", None)
            if env is None:
                result.append(_replayed(kwargs, i, completions[i]))
            else:
                result.append(outcome_from_env(env, completions[i]))
        return result
    return [_replayed(kwargs, i, completions[i]) for i in range(n)]


def _replayed(kwargs: dict[str, Any], i: int, completion: Any) -> Outcome:
    """Row ``i``'s outcome from the shared replay cache (its prefix first, in steps mode)."""

    def column(name: str) -> Any:
        values = kwargs.get(name)
        if isinstance(values, (list, tuple)) and i < len(values):
            return values[i]
        return None

    return CACHE.outcome(
        column("env"), column("task"), column("seed"), completion, column("prefix")
    )


def _safe(name: str, fn: Callable[[Outcome], float | None], items: list[Outcome]) -> list:
    scores: list[float | None] = []
    for item in items:
        if item.broken:
            scores.append(0.0)
            continue
        try:
            scores.append(fn(item))
        except Exception:  # a reward must never stop training; count it and move on
            logger.exception("%s failed on a completion", name)
            scores.append(0.0)
    return scores


def format_score(item: Outcome) -> float:
    """Graded format score in [0, 1] of one outcome (see module docstring)."""
    calls = item.parse.calls
    if not calls:
        # Structured output that is not yet a call (a JSON object without a tool name, a broken
        # <tool_call>) earns a sliver, so a fresh model's group is not all zeros; prose earns 0.
        return FORMAT_ATTEMPT if item.parse.n_candidates else 0.0
    quality = sum(item.call_quality) / len(calls)
    unreadable = sum(1 for e in item.parse.errors if "no tool name" not in e)
    quality *= len(calls) / (len(calls) + unreadable)
    protocol = 1.0 if (item.terminal_last and item.n_terminal == 1) else 0.0
    if not protocol and item.n_terminal:
        protocol = 0.5  # a decision, but followed by wasted calls
    return round((1 - FORMAT_PROTOCOL_SHARE) * quality + FORMAT_PROTOCOL_SHARE * protocol, 6)


def format_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any) -> list:
    """Graded tool-call format in [0, 1]: unknown tool < bad arguments < valid; one final decision.

    >>> format_reward([""], ["no calls here"], env=["aml"], task=["easy"], seed=[0])
    [0.0]
    """
    items = outcomes(completions, **kwargs)
    _log_parse(items, kwargs)
    _log_decisions(items, kwargs)
    return _safe("format_reward", format_score, items)


def investigation_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any):
    """Share of the case's hidden evidence the calls revealed (``evidence_coverage``), capped."""
    return _safe("investigation_reward", _investigation, outcomes(completions, **kwargs))


def _investigation(item: Outcome) -> float:
    # Steps mode: only what the reply revealed beyond the prefix is the reply's.
    coverage = float(item.report.metrics.get("evidence_coverage", 0.0)) - item.prefix_coverage
    return round(min(max(coverage, 0.0), INVESTIGATION_CAP) * decision_gate(item), 6)


def execution_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any):
    """Sum of the replay's per-step environment rewards (costs, penalties, shaping) only; the
    positive steps count times the decision gate, the negative ones always."""
    return _safe("execution_reward", _execution, outcomes(completions, **kwargs))


def _execution(item: Outcome) -> float:
    steps = [float(r) for r in item.reply_step_rewards]  # the prefix's steps are not the reply's
    gained = sum(r for r in steps if r > 0)
    lost = sum(r for r in steps if r < 0)
    return round(lost + gained * decision_gate(item), 6)


def _grade(item: Outcome) -> float:
    """gate * grade - (1 - gate) * penalty: the grade when right, minus the penalty when wrong or
    undecided, and in between a partly right triage (ops expenses) weighs the two.

    An undecided episode has gate 0, so it scores as a wrong decision: an alert left open is a
    failure too, and with 0 for it a model that cannot yet read the evidence learns that not
    finishing its terminal call beats a coin-flip decision (measured: rewards/README.md)."""
    gate = decision_gate(item)
    grade = float(item.report.grade.total)
    return round(gate * grade - (1.0 - gate) * WRONG_DECISION_PENALTY, 6)


def grade_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any):
    """The episode's terminal grade in [0, 1] with the right decision;
    ``-WRONG_DECISION_PENALTY`` when the decision is wrong or the calls never reach one."""
    return _safe("grade_reward", _grade, outcomes(completions, **kwargs))


def decision_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any):
    """The decision alone, in [-1, 1]: ``2 * gate - 1`` (right 1, wrong or undecided -1).

    Off by default (weight 0, logged). ``grade_reward`` pays a right decision its grade, and the
    grade of a right decision differs between decisions: a right ``close_alert`` earns its
    efficiency at once, a right ``file_sar`` only with the right typology and subjects. So for a
    policy that cannot yet read the case, one decision pays more on average whatever the case, and
    GRPO's update pushes every prompt towards it: the drift of the steps learning runs. This
    component pays every right decision the same, for runs that train the decision itself."""
    return _safe("decision_reward", _decision, outcomes(completions, **kwargs))


def _decision(item: Outcome) -> float:
    return round(2.0 * decision_gate(item) - 1.0, 6)


def decisions_reached(completions: Sequence[Any], **kwargs: Any) -> list[bool]:
    """Whether each completion's episode reached a decision (from the shared replay), which
    ``decision_reward``'s -1 does not tell apart from a wrong one."""
    return [bool(o.report and o.report.decision_reached) for o in outcomes(completions, **kwargs)]


def os_mechanics_reward(prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any):
    """The env's measured OS-mechanics effect in [0, 1]; ``None`` where the env has none."""
    scores: list[float | None] = []
    for item in outcomes(completions, **kwargs):
        value = None if item.broken else item.report.metrics.get("os_mechanics")
        if value is not None:
            value = float(value) * decision_gate(item)
        scores.append(None if value is None and not item.broken else float(value or 0.0))
    return scores


def _log_parse(items: list[Outcome], kwargs: dict[str, Any]) -> None:
    """Report parse diagnostics through TRL's logging hooks (once per batch, from format)."""
    if not items:
        return
    broken = [item.problem for item in items if item.broken]
    for problem in sorted(set(broken)):
        logger.warning("reward row cannot be scored: %s", problem)
    log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
    try:
        if callable(log_metric):
            n = len(items)
            log_metric("parse/calls_mean", sum(len(i.parse.calls) for i in items) / n)
            log_metric("parse/error_rate", sum(bool(i.parse.errors) for i in items) / n)
            log_metric("parse/no_calls_rate", sum(not i.parse.calls for i in items) / n)
            log_metric("rewards/broken_rows", float(len(broken)))
        if callable(log_extra):
            log_extra(
                "parse_errors",
                [i.problem or "; ".join(i.parse.errors[:3]) for i in items],
            )
    except Exception:  # logging must never cost a training step
        logger.exception("could not log parse diagnostics")


def decision_metrics(
    items: Sequence[Outcome], keys: Sequence[Any], seen: set[str] | None = None
) -> dict[str, float]:
    """What a batch decided, for the training curves: the share of completions that reached a
    decision, that were right (mean gate), each decision's share, and ``decision/split_groups``,
    the share of groups (rows with the same key: one prompt's completions) whose decisions were
    not all equally right. Only split groups carry a decision signal to GRPO; a run whose split
    share falls towards 0 while one decision's share rises is drifting to that decision.

    ``seen``: decisions met in earlier batches (updated here); each gets its share, 0 if absent
    now, so a decision's curve does not skip the batches that lacked it."""
    scored = [(item, key) for item, key in zip(items, keys, strict=True) if not item.broken]
    if not scored:
        return {}
    n = len(scored)
    gates = [decision_gate(item) for item, _ in scored]
    metrics = {
        "decision/decided_rate": sum(i.report.decision_reached for i, _ in scored) / n,
        "decision/right_rate": sum(gates) / n,
    }
    decisions = [item.report.grade.decision or "none" for item, _ in scored]
    seen = set() if seen is None else seen
    seen.update(decisions)
    for name in sorted(seen):
        metrics[f"decision/{name}_share"] = decisions.count(name) / n
    groups: dict[Any, set[float]] = {}
    for (_, key), gate in zip(scored, gates, strict=True):
        groups.setdefault(key, set()).add(gate)
    metrics["decision/split_groups"] = sum(len(g) > 1 for g in groups.values()) / len(groups)
    return metrics


_SEEN_DECISIONS: set[str] = set()
"""Decisions this process's batches have reached so far (``decision_metrics``' ``seen``)."""


def _log_decisions(items: list[Outcome], kwargs: dict[str, Any]) -> None:
    """``decision_metrics`` through TRL's ``log_metric`` hook, groups keyed by the row's case."""
    log_metric = kwargs.get("log_metric")
    if not callable(log_metric) or not items:
        return
    try:
        columns = [kwargs.get(c) or [None] * len(items) for c in ("env", "task", "seed", "prefix")]
        keys = [repr(key) for key in zip(*columns, strict=False)]
        keys += [repr(i) for i in range(len(keys), len(items))]  # rows without columns: alone
        for name, value in decision_metrics(items, keys, _SEEN_DECISIONS).items():
            log_metric(name, value)
    except Exception:  # logging must never cost a training step
        logger.exception("could not log decision metrics")
