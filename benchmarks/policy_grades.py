"""Mean grade of every registered policy on eval seeds, per task: the figures of issue 8.

    .venv/bin/python -m benchmarks.policy_grades support ops [--seeds 300] [--write-results]

Prints one markdown table per environment (rows: policies, columns: tasks) and, with
``--write-results``, stores them in benchmarks/RESULTS.md (section "support_ops_policies").
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterable

from env.registry import env_class, make, policies
from env.rollout import play
from env.seeds import split_seeds


def policy_means(
    env_name: str, task: str, seeds: list[int], names: Iterable[str] | None = None
) -> dict[str, dict[str, float]]:
    """Per policy of ``env_name`` (all, or ``names`` in that order) on ``task`` over ``seeds``:
    ``mean_grade``, the mean of every grade component, mean ``steps`` and ``internal_errors``.

    The one loop behind every environment's policy figures."""
    env = make(env_name)
    factories = policies(env_name)
    out = {}
    for name in names or factories:
        errors_before = env.internal_errors
        reports = [play(env, factories[name](seed), task, seed).report for seed in seeds]
        parts: dict[str, list[float]] = {}
        for report in reports:
            for key, value in report.grade.components.items():
                parts.setdefault(key, []).append(value)
        out[name] = {
            "mean_grade": statistics.mean(r.grade.total for r in reports),
            **{key: statistics.mean(values) for key, values in parts.items()},
            "steps": statistics.mean(r.steps for r in reports),
            "internal_errors": float(env.internal_errors - errors_before),
        }
    return out


def mean_grades(env_name: str, task: str, seeds: list[int]) -> dict[str, float]:
    """Mean terminal grade of each policy of ``env_name`` on ``task`` over ``seeds``."""
    return {name: row["mean_grade"] for name, row in policy_means(env_name, task, seeds).items()}


def table(env_name: str, n_seeds: int) -> str:
    """A markdown table of mean grades, policies by tasks, on ``n_seeds`` eval seeds."""
    seeds = split_seeds("eval", n_seeds)
    tasks = env_class(env_name).tasks
    per_task = {task: mean_grades(env_name, task, seeds) for task in tasks}
    rows = [f"| {env_name} policy | " + " | ".join(tasks) + " |", "|---|" + "---|" * len(tasks)]
    for policy_name in per_task[tasks[0]]:
        cells = [f"{per_task[t][policy_name]:.3f}" for t in tasks]
        rows.append(f"| {policy_name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Mean grade per policy and task.")
    parser.add_argument("envs", nargs="+", help="environment names")
    parser.add_argument("--seeds", type=int, default=300, help="eval seeds per task")
    parser.add_argument("--write-results", action="store_true", help="update RESULTS.md")
    args = parser.parse_args(argv)
    tables = [table(name, args.seeds) for name in args.envs]
    body = "\n\n".join(tables)
    sys.stdout.write(body + "\n")
    if args.write_results:
        from benchmarks.results import machine, write_section

        head = (
            f"Mean grade on {args.seeds} eval seeds per task "
            f"(`python -m benchmarks.policy_grades {' '.join(args.envs)} --write-results`); "
            f"{machine()}."
        )
        write_section("support_ops_policies", head + "\n\n" + body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
