"""Evaluate a policy on seeded episodes and print a table (and optionally write JSON).

    python scripts/evaluate.py --env aml --policy heuristic --episodes 300 --split eval \
        --difficulty all --json outputs/eval_heuristic.json

``--difficulty`` is the AML name for ``--tasks`` (a comma list or ``all``), so every environment
works the same way. Policies: the environment's registry names, ``checkpoint:PATH`` or
``openai:MODEL`` (``--mode plan|interactive|steps`` for the models).

Steps-trained models, two ways:

    # full episodes, receding horizon: each turn a plan, its first call runs (--horizon whole:
    # every call of the reply runs before the next plan)
    python scripts/evaluate.py --env aml --policy checkpoint:outputs/cpu/final --mode steps \
        --difficulty easy --episodes 30 --prompt-style compact --result-style compact --lockstep 8
    # one reply per held-out decision cut, scored by the training rewards (cheap: hundreds of
    # seeds on a CPU); also takes scripted policies (reference, always_file, ...)
    python scripts/evaluate.py --env aml --policy checkpoint:outputs/cpu/final --mode steps \
        --cuts decision --difficulty easy --episodes 200 --prompt-style compact --result-style compact
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipeline.evaluation.episodes import evaluate, parse_tasks
from pipeline.evaluation.stats import fmt, intervals, result_chart, write_result_csv


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
    parser.add_argument("--mode", default="interactive", choices=("interactive", "plan", "steps"))
    parser.add_argument(
        "--cuts",
        default=None,
        help="steps mode: score one reply per cut point (decision | all | random:N) instead of "
        "playing whole episodes",
    )
    parser.add_argument(
        "--horizon",
        default="receding",
        choices=("receding", "whole"),
        help="steps mode episodes: run the first call of each plan, or all of them",
    )
    parser.add_argument(
        "--result-style",
        default="full",
        choices=("full", "compact"),
        help="model policies: tool results as JSON or compact tables (data.result_style)",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, default=None, help="model policies: tokens of a plan reply"
    )
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


def _settings(args: argparse.Namespace) -> dict | None:
    settings: dict = {}
    if args.prompt_style:
        settings["prompt_style"] = args.prompt_style
    if args.result_style != "full":
        settings["result_style"] = args.result_style
    if args.mode == "steps":
        settings["horizon"] = args.horizon
        settings["train_template"] = True  # earlier calls render as in steps training
    if args.max_new_tokens:
        settings["plan_max_new_tokens"] = args.max_new_tokens
    return settings or None


def _cut_result(args: argparse.Namespace) -> dict:
    from pipeline.evaluation.cuts import evaluate_cuts

    model_settings = {"max_new_tokens": args.max_new_tokens} if args.max_new_tokens else {}
    return evaluate_cuts(
        args.env,
        args.policy,
        parse_tasks(args.env, args.tasks),
        args.episodes,
        args.split,
        args.cuts,
        args.prompt_style or "full",
        args.result_style,
        **(model_settings if args.policy.startswith(("checkpoint:", "openai:")) else {}),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cuts is not None and args.mode != "steps":
        raise SystemExit("--cuts scores steps-mode replies: add --mode steps")
    if args.cuts is not None:
        result = _cut_result(args)
        console = Console()
        render(result["summary"], console)
        summary = result["summary"]
        console.print(
            f"{summary['prompts']} cut prompts ({args.cuts}): valid calls "
            f"{summary['valid_calls']:.3f}, mean reward {summary['mean_reward']:.3f}"
        )
        if args.json is not None:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(result, indent=1, default=str))
        return 0
    result = evaluate(
        args.env,
        args.policy,
        tasks=args.tasks,
        episodes=args.episodes,
        split=args.split,
        seed_offset=args.seed_offset,
        progress=not args.no_progress,
        mode=args.mode,
        settings=_settings(args),
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
