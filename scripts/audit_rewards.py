"""Reward-hacking audit: mean total reward per strategy, degenerate vs honest, per difficulty.

    python scripts/audit_rewards.py --env aml --seeds 200 [--tasks easy,medium,hard]
        [--weights grade=2,format=0.2] [--write-results]

Prints one table per environment (rows: strategies, columns: tasks, cells: mean weighted total and
mean grade over ``--seeds`` eval seeds), the honest plan's margin over the best blind or
wrong-decision strategy and over the citation dumps on each task, and the decision-cut check
(honest prefix, right vs wrong terminal call). A summary table ends the output: the margin, the
target (1.0, or 40% of the honest total where that is smaller) and whether it holds. Exit status 1
when any margin is not positive. ``--write-results`` also stores everything in
benchmarks/RESULTS.md (section "audit_rewards").
"""

from __future__ import annotations

import argparse
import logging
import sys
import time

from rewards import resolve_weights
from rewards.audit import audit

logger = logging.getLogger("audit_rewards")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="aml", help="environment name(s), comma separated")
    parser.add_argument("--tasks", default="all", help="comma list of tasks (default: all)")
    parser.add_argument("--seeds", type=int, default=200, help="eval seeds per task")
    parser.add_argument("--weights", help="override reward weights, e.g. grade=2,format=0.2")
    parser.add_argument("--write-results", action="store_true", help="update RESULTS.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    weights = None
    if args.weights:
        pairs = [item.split("=", 1) for item in args.weights.split(",") if item.strip()]
        weights = {k.strip(): float(v) for k, v in pairs}
    resolved = resolve_weights(weights)

    sections, worst, summary = [], float("inf"), []
    for env_name in [e.strip() for e in args.env.split(",") if e.strip()]:
        start = time.perf_counter()
        tasks = None if args.tasks == "all" else args.tasks.split(",")
        table = audit(env_name, tasks, n_seeds=args.seeds, weights=weights)
        elapsed = time.perf_counter() - start
        text = f"### {env_name}\n\n{table.markdown()}\n\n({elapsed:.1f} s)"
        print(text + "\n")
        sections.append(text)
        worst = min([worst] + [table.margin(t)[0] for t in table.tasks])
        summary += summary_rows(table)
    head = [
        "| env / task | honest total (grade) | margin over blind / wrong decision (rival) | "
        "target | met | margin over citation dumps | decision cuts: right wins (total, grade) |",
        "|---|---|---|---|---|---|---|",
    ]
    summary_text = "\n".join(head + summary)
    print(summary_text + "\n")
    print(f"weights: {resolved}; smallest honest margin: {worst:+.3f}")
    if args.write_results:
        from benchmarks.results import machine, write_section

        body = "\n\n".join(
            [
                f"`python scripts/audit_rewards.py --env {args.env} --seeds {args.seeds}` "
                f"on {machine()}. Cells: mean weighted total (g mean grade). Weights {resolved}.",
                "Summary (target: 1.0, or 40% of the honest total where that is smaller; "
                "citation dumps: 0.2; decision cuts: 99%):",
                summary_text,
                *sections,
            ]
        )
        write_section("audit_rewards", body)
    return 0 if worst > 0 else 1


def summary_rows(table) -> list[str]:
    """One summary line per task: margins, target, whether it holds, decision cuts."""
    rows = []
    for task in table.tasks:
        honest = table.totals["honest"][task]
        margin, rival = table.margin(task)
        target = min(1.0, 0.4 * honest)
        cite, cite_rival = table.citation_margin(task)
        cut = table.cuts.get(task)
        cells = [
            f"{table.env} / {task}",
            f"{honest:.3f} ({table.grades['honest'][task]:.3f})",
            f"{margin:+.3f} ({rival})",
            f"{target:.2f}",
            "yes" if margin >= target else "**no**",
            "-" if cite_rival == "-" else f"{cite:+.3f} ({cite_rival})",
            "-"
            if not cut
            else f"{cut['total_wins']:.1%}, {cut['grade_wins']:.1%} of {int(cut['rows'])}",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return rows


if __name__ == "__main__":
    sys.exit(main())
