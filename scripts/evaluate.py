"""Evaluate a policy on seeded episodes and print a table (and optionally write JSON).

    python scripts/evaluate.py --env aml --policy heuristic --episodes 300 --split eval \
        --difficulty all --json outputs/eval_heuristic.json

``--difficulty`` is the AML name for ``--tasks`` (a comma list or ``all``), so every environment
works the same way. Policies: the environment's registry names, ``checkpoint:PATH`` or
``openai:MODEL`` (``--mode plan|interactive`` for the models).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from pipeline.evaluation import evaluate  # noqa: E402
from pipeline.stats import fmt, intervals, result_chart, write_result_csv  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="aml", help="Registered environment name")
    parser.add_argument("--policy", default="heuristic", help="Policy name or model spec")
    parser.add_argument("--episodes", type=int, default=100, help="Episodes (seeds) per task")
    parser.add_argument("--split", default="eval", choices=("train", "eval", "test"))
    parser.add_argument(
        "--tasks",
        "--difficulty",
        dest="tasks",
        default="all",
        help="Comma list of tasks/difficulties, or all",
    )
    parser.add_argument("--seed-offset", type=int, default=0, help="First seed within the split")
    parser.add_argument("--mode", default="interactive", choices=("interactive", "plan"))
    parser.add_argument("--json", type=Path, default=None, help="Write summary + episodes here")
    parser.add_argument("--csv", type=Path, default=None, help="Write 95%% CIs per group here")
    parser.add_argument("--png", type=Path, default=None, help="Write a chart with 95%% CIs")
    parser.add_argument("--no-progress", action="store_true", help="Hide the progress bar")
    parser.add_argument(
        "--prompt-style",
        default=None,
        choices=("full", "compact"),
        help="checkpoint:/openai: policies: the tool list of the training run's prompts "
        "(data.prompt_style; compact: tool signatures only); default full",
    )
    parser.add_argument(
        "--lockstep",
        type=int,
        default=0,
        metavar="N",
        help="checkpoint: policies: play every episode at once and decode each turn's greedy "
        "replies in batches of N (the same episodes as one by one)",
    )
    return parser.parse_args(argv)


def render(summary: dict, console: Console) -> None:
    """The summary as tables: overall, per task, per hidden category."""
    title = f"{summary['env']} / {summary['policy']} ({summary['split']})"
    for key, label in (("per_task", "task"), ("per_category", "category")):
        table = Table(title=f"{title}: per {label}")
        for col in (label, "episodes", "mean grade", "decision acc.", "decided", "steps"):
            left = col == label
            table.add_column(
                col, justify="left" if left else "right", min_width=28 if left else None
            )
        for name, s in summary[key].items():
            table.add_row(
                name,
                str(s["episodes"]),
                f"{s['mean_grade']:.3f}",
                f"{s['decision_accuracy']:.3f}",
                f"{s['decision_rate']:.2f}",
                f"{s['mean_steps']:.1f}",
            )
        table.add_row(
            "all",
            str(summary["episodes"]),
            f"{summary['mean_grade']:.3f}",
            f"{summary['decision_accuracy']:.3f}",
            f"{summary['decision_rate']:.2f}",
            f"{summary['mean_steps']:.1f}",
            style="bold",
        )
        console.print(table)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = evaluate(
        args.env,
        args.policy,
        tasks=args.tasks,
        episodes=args.episodes,
        split=args.split,
        seed_offset=args.seed_offset,
        progress=not args.no_progress,
        mode=args.mode,
        settings={"prompt_style": args.prompt_style} if args.prompt_style else None,
        lockstep=args.lockstep,
    )
    console = Console()
    render(result["summary"], console)
    overall = intervals(result)["overall"]
    console.print(f"mean grade {fmt(overall['grade'])} (95% bootstrap interval)")
    if args.csv is not None:
        write_result_csv(result, args.csv)
    if args.png is not None:
        result_chart(result, args.png)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
