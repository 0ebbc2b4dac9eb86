"""Reward-hacking audit: degenerate completions against the honest heuristic's plan.

For each (task, seed) the honest completion is the heuristic policy's played episode rendered as
a plan (it replays to the same episode). Degenerate completions are built generically from the
environment's tool specs and the opening observation, so the audit runs unchanged on every
registered environment:

- ``immediate_<terminal>``: decide at once, arguments filled with ids from the opening;
- ``os_tools_then_decide``: every OS-kind tool once, then the first terminal tool;
- ``every_tool_then_decide``: every non-terminal tool once, then the first terminal tool;
- ``unknown_tools``: calls to tools that do not exist;
- ``repeat_50``: the same valid call fifty times;
- ``prose_only``, ``empty``: no calls at all;
- ``huge_argument``: a decision carrying one enormous string argument;
- ``policy:<name>``: every registered non-honest policy of the env (its played plan);
- ``flipped_decision``: the honest plan with its decision flipped (``flip_plan``);
- ``investigate_then_majority``: the honest investigation, then always the task's majority
  decision (the honest plan where it already decides so, else its flip to the majority);
- ``farm_then_<decision>``: blind farming -- every non-terminal, non-harmful tool of the task
  once per enum value, with ids from the opening -- then each possible decision;
- ``cite_all_seen``: the honest plan citing (or flagging, freezing) every id it saw;
- ``shallow_id_dump``: the first three honest calls, then the honest decision citing every id
  seen so far.

The per-environment knowledge (what "the decision" is and how to flip it, what a citation is)
sits in ``rewards.audit_plans`` (``flip_plan``, ``decision_of``, ``cite_all_plan``). A completion
that games the rewards would show up as a strategy whose mean total reaches the honest plan's;
the audit test asserts a clear margin on every task (``margin`` over blind and wrong-decision
strategies, ``citation_margin`` over the two citation dumps). ``decision_cuts`` checks the
steps-mode guarantee with the prefix replay: after the same prefix the right ending out-scores
the wrong one, in total and in grade.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from env.base import ToolObservation, ToolSpec
from env.registry import env_class, make, policies
from env.rollout import Episode, play
from env.seeds import split_seeds
from rewards.audit_plans import (
    audit_row,
    decision_plans,
    farm_plans,
    fill_arguments,
    flip_plan,
    ids_in,
    majority_decision,
)
from rewards.components import decision_gate
from rewards.protocol import render_completion
from rewards.replay import CACHE
from rewards.score import mean, score_batch

HONEST = "honest"
REFERENCE_POLICIES = ("heuristic", "oracle")
_UNKNOWN = ("investigate_everything", "solve_case", "get_answer", "auto_resolve", "submit_all")
# Strategies that keep the honest decision and only dump ids: held to ``citation_margin``.
CITATION_STRATEGIES = ("cite_all_seen", "shallow_id_dump")


@dataclass
class AuditTable:
    """Mean total (and grade) per strategy and task, and the honest margin per task."""

    env: str
    tasks: list[str]
    totals: dict[str, dict[str, float]]
    grades: dict[str, dict[str, float]]
    n_seeds: int
    components: dict[str, dict[str, float]] = field(default_factory=dict)

    cuts: dict[str, dict[str, float]] = field(default_factory=dict)

    def margin(self, task: str) -> tuple[float, str]:
        """Honest mean total minus the best blind or wrong-decision mean total on ``task``."""
        skip = (HONEST, "policy:oracle", *CITATION_STRATEGIES)
        return self._margin(task, [s for s in self.totals if s not in skip])

    def citation_margin(self, task: str) -> tuple[float, str]:
        """Honest mean total minus the best citation dump's (``CITATION_STRATEGIES``)."""
        return self._margin(
            task, [s for s in CITATION_STRATEGIES if task in self.totals.get(s, {})]
        )

    def _margin(self, task: str, strategies: list[str]) -> tuple[float, str]:
        honest = self.totals[HONEST][task]
        rivals = {s: self.totals[s][task] for s in strategies if task in self.totals[s]}
        if not rivals:
            return float("inf"), "-"
        best = max(rivals, key=rivals.get)
        return round(honest - rivals[best], 4), best

    def markdown(self) -> str:
        head = "| strategy | " + " | ".join(self.tasks) + " |"
        lines = [head, "|" + "---|" * (len(self.tasks) + 1)]
        for strategy, per_task in self.totals.items():
            cells = [
                f"{per_task[t]:.3f} (g {self.grades[strategy][t]:.2f})" if t in per_task else "-"
                for t in self.tasks
            ]
            lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
        margins = [f"{t}: {self.margin(t)[0]:+.3f} vs {self.margin(t)[1]}" for t in self.tasks]
        lines.append("")
        lines.append(
            f"Honest margin over the best blind or wrong-decision strategy ({self.n_seeds} eval "
            "seeds per task): " + "; ".join(margins)
        )
        cites = [
            f"{t}: {self.citation_margin(t)[0]:+.3f} vs {self.citation_margin(t)[1]}"
            for t in self.tasks
            if self.citation_margin(t)[1] != "-"
        ]
        if cites:
            lines += ["", "Honest margin over the citation dumps: " + "; ".join(cites)]
        if self.cuts:
            lines += [
                "",
                "Decision cuts (honest prefix, right vs wrong terminal; rows where exactly one "
                "decision is right): "
                + "; ".join(
                    f"{t}: total {c['total_wins']:.1%}, grade {c['grade_wins']:.1%} of "
                    f"{int(c['rows'])}"
                    for t, c in self.cuts.items()
                ),
            ]
        if self.components:
            names = list(next(iter(self.components.values())))
            lines += ["", "Mean of each component over all tasks (unweighted; None counts 0):", ""]
            lines.append("| strategy | " + " | ".join(names) + " |")
            lines.append("|" + "---|" * (len(names) + 1))
            for strategy, parts in self.components.items():
                lines.append(
                    f"| {strategy} | " + " | ".join(f"{parts[n]:+.3f}" for n in names) + " |"
                )
        return "\n".join(lines)


def degenerate_completions(
    env_name: str, observation: ToolObservation, rng: random.Random
) -> dict[str, str]:
    """The synthetic degenerate completions for one opening observation."""
    specs = env_class(env_name).tool_specs()
    terminals = [s for s in specs if s.terminal]
    tools = [s for s in specs if not s.terminal]
    ids = ids_in(observation)

    def call(spec: ToolSpec) -> dict[str, Any]:
        return {"tool": spec.name, "arguments": fill_arguments(spec, ids, rng)}

    out: dict[str, str] = {}
    for spec in terminals:
        out[f"immediate_{spec.name}"] = render_completion([call(spec)])
    decide = call(terminals[0]) if terminals else None
    tail = [decide] if decide else []
    os_tools = [s for s in tools if "os" in s.kind.lower().split("_")]
    if os_tools:
        out["os_tools_then_decide"] = render_completion([call(s) for s in os_tools] + tail)
    out["every_tool_then_decide"] = render_completion([call(s) for s in tools] + tail)
    out["unknown_tools"] = render_completion([{"tool": t, "arguments": {}} for t in _UNKNOWN])
    if tools:
        out["repeat_50"] = render_completion([call(tools[0])] * 50)
    out["prose_only"] = (
        "I reviewed the case carefully. The activity looks consistent with the customer's "
        "profile, so no further action is needed and the case can be closed."
    )
    out["empty"] = ""
    if terminals:
        huge = call(terminals[0])
        text_args = [k for k, v in huge["arguments"].items() if isinstance(v, str)] or ["findings"]
        huge["arguments"][text_args[0]] = " ".join(ids * 50) + " x" * 20_000
        out["huge_argument"] = render_completion([huge])
    return out


def audit(
    env_name: str,
    tasks: Sequence[str] | None = None,
    n_seeds: int = 200,
    split: str = "eval",
    weights: dict[str, float] | None = None,
) -> AuditTable:
    """Mean weighted total per strategy and task over ``n_seeds`` seeds of ``split``."""
    task_list = list(tasks or env_class(env_name).tasks)
    factories = policies(env_name)
    env = make(env_name)
    totals: dict[str, dict[str, float]] = {}
    grades: dict[str, dict[str, float]] = {}
    parts: dict[str, dict[str, list[float]]] = {}
    cuts: dict[str, dict[str, float]] = {}
    for task in task_list:
        rows: list[tuple[str, dict[str, Any]]] = []
        honest: dict[int, Episode] = {}
        for seed in split_seeds(split, n_seeds):
            rng = random.Random(f"audit:{env_name}:{task}:{seed}")
            for name, factory in factories.items():
                episode = play(env, factory(seed), task, seed)
                label = HONEST if name == "heuristic" else f"policy:{name}"
                if name == "heuristic":
                    honest[seed] = episode
                rows.append(
                    (label, audit_row(env_name, task, seed, render_completion(episode.plan)))
                )
            opening = env.reset(seed=seed, task=task)
            for label, text in degenerate_completions(env_name, opening, rng).items():
                rows.append((label, audit_row(env_name, task, seed, text)))
            for label, plan in farm_plans(env_name, opening, rng).items():
                rows.append((label, audit_row(env_name, task, seed, render_completion(plan))))
        majority = majority_decision(env_name, list(honest.values()))
        for seed, episode in honest.items():
            for label, plan in decision_plans(env_name, episode, majority).items():
                rows.append((label, audit_row(env_name, task, seed, render_completion(plan))))
        scored = score_batch([row for _, row in rows], weights)
        cut = _cut_table(_cut_rows(env_name, task, honest, weights))
        if cut:
            cuts[task] = cut
        by_strategy: dict[str, list[tuple[float, float]]] = {}
        for (label, _), result in zip(rows, scored, strict=True):
            by_strategy.setdefault(label, []).append((result["total"], result["grade"] or 0.0))
            for name, value in result["rewards"].items():
                parts.setdefault(label, {}).setdefault(name, []).append(value or 0.0)
        for label, values in by_strategy.items():
            totals.setdefault(label, {})[task] = round(mean(v[0] for v in values), 4)
            grades.setdefault(label, {})[task] = round(mean(v[1] for v in values), 4)
    order = [HONEST] + sorted(k for k in totals if k != HONEST)
    return AuditTable(
        env_name,
        task_list,
        {k: totals[k] for k in order},
        {k: grades[k] for k in order},
        n_seeds,
        {k: {n: round(mean(v), 4) for n, v in parts[k].items()} for k in order},
        cuts,
    )


def _cut_table(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Share of decision cuts where the right ending out-scores the wrong one."""
    if not rows:
        return {}
    n = len(rows)
    return {
        "rows": n,
        "total_wins": sum(r["right_total"] > r["wrong_total"] for r in rows) / n,
        "grade_wins": sum(r["right_grade"] > r["wrong_grade"] for r in rows) / n,
    }


def _cut_rows(
    env_name: str,
    task: str,
    episodes: dict[int, Episode],
    weights: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """Score each honest episode's decision cut in steps mode: the prefix is every call the honest
    plan and its flip share, the two replies are the rest of each; one row per seed where exactly
    one of the two decisions is right (by the truth: where the heuristic is wrong, its flip is
    the right one)."""
    rows: list[dict[str, Any]] = []
    shared_calls: list[tuple[int, int]] = []
    for seed, episode in episodes.items():
        plan, flipped = episode.plan, flip_plan(env_name, episode)
        if flipped is None or flipped == plan:
            continue
        shared = 0
        while shared < min(len(plan), len(flipped)) and plan[shared] == flipped[shared]:
            shared += 1
        for ending in (plan[shared:], flipped[shared:]):
            row = audit_row(env_name, task, seed, render_completion(ending))
            rows.append({**row, "prefix": plan[:shared]})
        shared_calls.append((seed, shared))
    results = score_batch(rows, weights)
    out = []
    for k, (seed, shared) in enumerate(shared_calls):
        pair = rows[2 * k : 2 * k + 2]
        right = [
            decision_gate(CACHE.outcome(env_name, task, seed, r["completion"], r["prefix"])) > 0
            for r in pair
        ]
        if right[0] == right[1]:
            continue
        good, bad = (results[2 * k], results[2 * k + 1])[:: 1 if right[0] else -1]
        out.append(
            {
                "seed": seed,
                "prefix_calls": shared,
                "right_total": good["total"],
                "wrong_total": bad["total"],
                "right_grade": good["grade"] or 0.0,
                "wrong_grade": bad["grade"] or 0.0,
            }
        )
    return out


def decision_cuts(
    env_name: str, task: str, n_seeds: int = 200, split: str = "eval"
) -> list[dict[str, Any]]:
    """Steps-mode decision cuts, scored with the prefix replay (``rewards.score`` rows with a
    ``prefix``): one row per seed where the decision can be flipped (see ``_cut_rows``)."""
    env = make(env_name)
    heuristic = policies(env_name)["heuristic"]
    episodes = {
        seed: play(env, heuristic(seed), task, seed) for seed in split_seeds(split, n_seeds)
    }
    return _cut_rows(env_name, task, episodes)


# ---------------------------------------------------------------- per-environment knowledge
