"""Export fraud rollouts (one row per step) and grades (one row per episode) as CSV or a table.

    from env.fraud.export import run_and_export
    paths = run_and_export("heuristic", "defender", range(20), "out/")

writes ``out/fraud_heuristic_defender_steps.csv`` and ``..._grades.csv``; ``to_dataset(rows)``
turns either list of rows into a ``datasets.Dataset``. Hidden truth (family, ring accounts) is
added only to the grade rows, after each episode has ended.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from env.fraud.environment import FraudEnvironment
from env.fraud.policies import POLICIES
from env.rollout import Episode, play

STEP_FIELDS = ("policy", "task", "seed", "step", "tool", "arguments", "reward", "error", "done")


def step_rows(episode: Episode, policy: str) -> list[dict[str, Any]]:
    """One row per tool call of a played episode."""
    rows = []
    for i, (action, obs) in enumerate(
        zip(episode.actions, episode.observations[1:], strict=True), start=1
    ):
        rows.append(
            {
                "policy": policy,
                "task": episode.task,
                "seed": episode.seed,
                "step": i,
                "tool": action.tool,
                "arguments": json.dumps(action.arguments, sort_keys=True),
                "reward": float(obs.reward or 0.0),
                "error": obs.error or "",
                "done": bool(obs.done),
            }
        )
    return rows


def grade_row(episode: Episode, policy: str, family: str | None = None) -> dict[str, Any]:
    """One row per episode: total, components, decision, steps and the revealed family."""
    report = episode.report
    if report is None:
        raise ValueError("play the episode to its end before exporting its grade")
    row: dict[str, Any] = {
        "policy": policy,
        "task": episode.task,
        "seed": episode.seed,
        "family": family or episode.truth.get("family") or "",
        "total": report.grade.total,
        "decision": report.grade.decision or "",
        "steps": report.steps,
    }
    row.update({f"c_{k}": v for k, v in sorted(report.grade.components.items())})
    row.update({f"m_{k}": v for k, v in sorted(report.metrics.items())})
    return row


def write_csv(rows: list[dict[str, Any]], path: str | Path) -> Path:
    """Write rows (union of their keys as the header, in first-seen order) to a CSV file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fields: list[str] = []
    for row in rows:
        fields.extend(k for k in row if k not in fields)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, restval="")
        writer.writeheader()
        writer.writerows(rows)
    return path


def to_dataset(rows: list[dict[str, Any]]):
    """The rows as a ``datasets.Dataset`` (columns filled with None where a row lacks a key)."""
    from datasets import Dataset

    keys: list[str] = []
    for row in rows:
        keys.extend(k for k in row if k not in keys)
    return Dataset.from_dict({k: [row.get(k) for row in rows] for k in keys})


def run_and_export(
    policy: str, task: str, seeds: Iterable[int], out_dir: str | Path, **config: Any
) -> dict[str, Path]:
    """Play ``policy`` on ``task`` for each seed and write the step and grade CSVs."""
    env = FraudEnvironment(**config)
    steps: list[dict[str, Any]] = []
    grades: list[dict[str, Any]] = []
    for seed in seeds:
        episode = play(env, POLICIES[policy](seed), task, seed)
        steps.extend(step_rows(episode, policy))
        grades.append(grade_row(episode, policy, env.family))
    out = Path(out_dir)
    return {
        "steps": write_csv(steps, out / f"fraud_{policy}_{task}_steps.csv"),
        "grades": write_csv(grades, out / f"fraud_{policy}_{task}_grades.csv"),
    }
