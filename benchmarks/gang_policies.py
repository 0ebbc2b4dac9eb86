"""Policy figures of the gang environment on eval seeds: ``python -m benchmarks.gang_policies --seeds 300``.

Plays every registered gang policy on the same eval seeds of each task and writes the table of
mean grade, precision, recall and win rate to the ``gang_policies`` section of
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import logging
import time

from benchmarks.policy_grades import policy_means
from env.seeds import split_seeds

logger = logging.getLogger(__name__)
POLICY_ORDER = ("oracle", "heuristic", "flag_everything", "submit_at_once", "random")


def policy_figures(n_seeds: int, tasks: tuple[str, ...] = ("easy", "medium", "hard")) -> dict:
    """``{task: {policy: {mean_grade, precision, recall, success, steps}}}`` on eval seeds."""
    seeds = split_seeds("eval", n_seeds)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for task in tasks:
        rows = policy_means("gang", task, seeds, POLICY_ORDER)
        out[task] = {
            name: {
                key: row[key] for key in ("mean_grade", "precision", "recall", "success", "steps")
            }
            for name, row in rows.items()
        }
        for name, row in out[task].items():
            logger.info("%s %s %.3f", task, name, row["mean_grade"])
    return out


def markdown(figures: dict, n_seeds: int, seconds: float) -> str:
    """The RESULTS.md table."""
    from benchmarks.results import machine

    lines = [
        f"## gang policies (`python -m benchmarks.gang_policies --seeds {n_seeds}`)",
        "",
        f"{n_seeds} eval seeds per task; {seconds:.0f} s on {machine()}.",
        "",
        "| task | policy | mean grade | precision | recall | win rate | steps |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, rows in figures.items():
        for name, f in rows.items():
            lines.append(
                f"| {task} | {name} | {f['mean_grade']:.3f} | {f['precision']:.3f} | "
                f"{f['recall']:.3f} | {f['success']:.2f} | {f['steps']:.1f} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=300, help="eval seeds per task")
    parser.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    figures = policy_figures(args.seeds)
    text = markdown(figures, args.seeds, time.perf_counter() - start)
    if not args.no_write:
        from benchmarks.results import write_section

        write_section("gang_policies", text)
    logger.info("\n%s", text)


if __name__ == "__main__":
    main()
