"""Compare two evaluation result files (before/after training): table, CSV and PNG.

    python scripts/compare_results.py outputs/eval_before.json outputs/eval_after.json \
        --labels untrained,trained --png outputs/compare.png --csv outputs/compare.csv

Both files come from ``scripts/evaluate.py --json``. Each row shows the mean of the metric before
and after with its 95% bootstrap interval and the interval of the difference (paired per world
when both files played the same task/seed pairs); ``*`` marks a difference whose interval
excludes zero.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.evaluation.stats import METRICS, compare, comparison_chart, fmt, load_result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", type=Path, help="Evaluation JSON of the baseline")
    parser.add_argument("after", type=Path, help="Evaluation JSON to compare with it")
    parser.add_argument("--labels", default="before,after", help="Two comma-separated names")
    parser.add_argument("--metric", default="grade", choices=sorted(METRICS))
    parser.add_argument("--seed", type=int, default=0, help="Bootstrap seed")
    parser.add_argument("--png", type=Path, default=None, help="Write a bar chart here")
    parser.add_argument("--csv", type=Path, default=None, help="Write the table here")
    parser.add_argument("--json", type=Path, default=None, help="Write the comparison here")
    return parser.parse_args(argv)


def rows_of(comparison: dict) -> list[tuple[str, dict]]:
    """(group name, before/after/difference) rows: overall, per task, per category."""
    rows = [("all", comparison["overall"])]
    rows += [(f"task:{k}", v) for k, v in comparison["per_task"].items()]
    rows += [(f"category:{k}", v) for k, v in comparison["per_category"].items()]
    return rows


def write_csv(comparison: dict, path: Path, labels: list[str]) -> None:
    """One row per group: n and mean/low/high of before, after and the difference."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        sides = (labels[0], labels[1], "difference")
        header = ["group"] + [f"{s}_{p}" for s in sides for p in ("n", "mean", "low", "high")]
        writer.writerow(header + ["significant"])
        for name, row in rows_of(comparison):
            cells = []
            for key in ("before", "after", "difference"):
                iv = row[key]
                cells += [iv["n"], *(round(iv[p], 4) for p in ("mean", "low", "high"))]
            writer.writerow([name, *cells, row["significant"]])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    labels = [s.strip() for s in args.labels.split(",")]
    if len(labels) != 2:
        raise SystemExit("--labels needs exactly two names")
    before, after = load_result(args.before), load_result(args.after)
    comparison = compare(before, after, args.metric, args.seed)
    table = Table(title=f"{args.metric}: {labels[0]} -> {labels[1]} (95% bootstrap intervals)")
    for col in ("group", labels[0], labels[1], "difference", ""):
        table.add_column(col, justify="left" if col == "group" else "right")
    for name, row in rows_of(comparison):
        table.add_row(
            name,
            fmt(row["before"]),
            fmt(row["after"]),
            fmt(row["difference"]),
            "*" if row["significant"] else "",
        )
    Console(width=160).print(table)
    if args.csv is not None:
        write_csv(comparison, args.csv, labels)
    if args.png is not None:
        comparison_chart(before, after, args.png, (labels[0], labels[1]), args.metric, args.seed)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(comparison, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
