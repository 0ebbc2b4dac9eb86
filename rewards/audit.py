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
- ``policy:<name>``: every registered non-honest policy of the env (its played plan).

A completion that games the rewards would show up as a strategy whose mean total reaches the
honest plan's; the audit test asserts a clear margin on every task.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from env.base import ToolObservation, ToolSpec
from env.registry import env_class, make, policies
from env.rollout import play
from env.seeds import split_seeds
from pipeline.prompts import render_completion
from rewards.score import mean, score_batch

HONEST = "honest"
REFERENCE_POLICIES = ("heuristic", "oracle")
_ID = re.compile(r"\b[A-Za-z]{1,6}[-_]?\d{2,}[A-Za-z0-9_-]*\b")
_UNKNOWN = ("investigate_everything", "solve_case", "get_answer", "auto_resolve", "submit_all")


@dataclass
class AuditTable:
    """Mean total (and grade) per strategy and task, and the honest margin per task."""

    env: str
    tasks: list[str]
    totals: dict[str, dict[str, float]]
    grades: dict[str, dict[str, float]]
    n_seeds: int
    components: dict[str, dict[str, float]] = field(default_factory=dict)

    def margin(self, task: str) -> tuple[float, str]:
        """Honest mean total minus the best degenerate mean total on ``task``, and who that is."""
        honest = self.totals[HONEST][task]
        rivals = {s: v[task] for s, v in self.totals.items() if s not in (HONEST, "policy:oracle")}
        best = max(rivals, key=rivals.get)
        return round(honest - rivals[best], 4), best

    def markdown(self) -> str:
        head = "| strategy | " + " | ".join(self.tasks) + " |"
        lines = [head, "|" + "---|" * (len(self.tasks) + 1)]
        for strategy, per_task in self.totals.items():
            cells = [f"{per_task[t]:.3f} (g {self.grades[strategy][t]:.2f})" for t in self.tasks]
            lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
        margins = [f"{t}: {self.margin(t)[0]:+.3f} vs {self.margin(t)[1]}" for t in self.tasks]
        lines.append("")
        lines.append(
            f"Honest margin over the best degenerate ({self.n_seeds} eval seeds per task): "
        )
        lines.append("; ".join(margins))
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


def _ids(observation: ToolObservation) -> list[str]:
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


def degenerate_completions(
    env_name: str, observation: ToolObservation, rng: random.Random
) -> dict[str, str]:
    """The synthetic degenerate completions for one opening observation."""
    specs = env_class(env_name).tool_specs()
    terminals = [s for s in specs if s.terminal]
    tools = [s for s in specs if not s.terminal]
    ids = _ids(observation)

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
    for task in task_list:
        rows: list[tuple[str, dict[str, Any]]] = []
        for seed in split_seeds(split, n_seeds):
            rng = random.Random(f"audit:{env_name}:{task}:{seed}")
            for name, factory in factories.items():
                episode = play(env, factory(seed), task, seed)
                label = HONEST if name == "heuristic" else f"policy:{name}"
                rows.append((label, _row(env_name, task, seed, render_completion(episode.plan))))
            opening = env.reset(seed=seed, task=task)
            for label, text in degenerate_completions(env_name, opening, rng).items():
                rows.append((label, _row(env_name, task, seed, text)))
        scored = score_batch([row for _, row in rows], weights)
        by_strategy: dict[str, list[tuple[float, float]]] = {}
        for (label, _), result in zip(rows, scored, strict=True):
            by_strategy.setdefault(label, []).append((result["total"], result["rewards"]["grade"]))
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
    )


def _row(env_name: str, task: str, seed: int, completion: str) -> dict[str, Any]:
    return {"env": env_name, "task": task, "seed": seed, "completion": completion}
