"""Baseline figures: every policy on both roles over evaluation seeds.

    python -m benchmarks.fraud_baselines --episodes 300 [--write]

prints mean grade per (role, policy) and, with ``--write``, records the table in
benchmarks/RESULTS.md under "fraud_baselines".
"""

from __future__ import annotations

import argparse
import time

from benchmarks.policy_grades import policy_means
from env.fraud.environment import FraudEnvironment
from env.seeds import split_seeds


def measure(episodes: int, split: str = "eval") -> dict[tuple[str, str], dict[str, float]]:
    """Mean grade, its components and internal errors per (task, policy)."""
    seeds = split_seeds(split, episodes)
    table: dict[tuple[str, str], dict[str, float]] = {}
    for task in FraudEnvironment.tasks:
        for name, row in policy_means("fraud", task, seeds).items():
            table[(task, name)] = {
                "mean": row["mean_grade"],
                **{k: v for k, v in row.items() if k not in ("mean_grade", "steps")},
            }
    return table


def markdown(table: dict[tuple[str, str], dict[str, float]], episodes: int, seconds: float) -> str:
    lines = [
        f"`python -m benchmarks.fraud_baselines --episodes {episodes} --write` "
        f"({episodes} eval seeds per role, {seconds:.0f} s)",
        "",
        "| role | policy | mean grade | components |",
        "|---|---|---|---|",
    ]
    for (task, name), row in table.items():
        parts = ", ".join(
            f"{k} {v:.2f}" for k, v in row.items() if k not in ("mean", "internal_errors")
        )
        lines.append(f"| {task} | {name} | {row['mean']:.3f} | {parts} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--write", action="store_true", help="record in benchmarks/RESULTS.md")
    args = parser.parse_args()
    start = time.perf_counter()
    table = measure(args.episodes)
    text = markdown(table, args.episodes, time.perf_counter() - start)
    print(text)  # noqa: T201 - a CLI's output
    if args.write:
        from benchmarks.results import machine, write_section

        write_section("fraud_baselines", f"### fraud baselines\n\n{machine()}\n\n{text}")


if __name__ == "__main__":
    main()
