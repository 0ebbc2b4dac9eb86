"""Score completions with the training reward functions, or write a policy's plans as completions.

    python scripts/score_completions.py --in rows.jsonl --out scored.jsonl
    python scripts/score_completions.py --policy heuristic --env aml --tasks easy \
        --seeds 0:50 --split eval --out heuristic.jsonl

Each input row is ``{"env", "task", "seed", "completion"}``; each output row adds ``rewards`` (one
value per component), ``total`` (TRL's weighted sum), ``n_calls`` and ``parse_errors``. A row that
cannot be read or scored is reported on stderr by its line number, written with an ``error``, and
the other rows are still scored (exit status 1 then). With ``--policy`` the rows are the policy's
played episodes rendered in the plan-mode format (``A:B`` are offsets inside ``--split``, as in
``scripts/evaluate.py``), scored the same way, with the played ``policy_grade`` alongside.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from env.registry import env_class, make, policies
from env.rollout import play
from env.seeds import split_seeds
from rewards.protocol import render_completion
from rewards.score import check_row, mean, score_batch

logger = logging.getLogger("score_completions")


def read_rows(path: str) -> tuple[list[tuple[int, dict[str, Any]]], list[dict[str, Any]]]:
    """Readable rows (with their line numbers) and error records for the unreadable ones."""
    good, bad = [], []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SystemExit(f"cannot read {path}: {exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            bad.append({"line": number, "error": f"not JSON ({exc.msg} at column {exc.colno})"})
            continue
        problem = check_row(row)
        if problem:
            bad.append({"line": number, "error": problem})
        else:
            good.append((number, row))
    return good, bad


def policy_rows(
    env_name: str, policy: str, tasks: list[str], start: int, stop: int, split: str
) -> list[tuple[int, dict[str, Any]]]:
    """A policy's played episodes as completion rows (plan-mode rendering)."""
    factories = policies(env_name)
    if policy not in factories:
        raise SystemExit(f"unknown policy {policy!r} for {env_name}; have {', '.join(factories)}")
    env, rows = make(env_name), []
    for task in tasks:
        for seed in split_seeds(split, stop - start, start):
            episode = play(env, factories[policy](seed), task, seed)
            row = {"env": env_name, "task": task, "seed": seed}
            row["completion"] = render_completion(episode.plan)
            row["policy_grade"] = episode.report.grade.total
            rows.append((len(rows) + 1, row))
    return rows


def parse_weights(text: str | None) -> dict[str, float] | None:
    if not text:
        return None
    pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
    try:
        return {key.strip(): float(value) for key, value in pairs}
    except ValueError:
        raise SystemExit(f"--weights wants name=value,...; got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--in", dest="inp", help="input JSONL of {env, task, seed, completion}")
    parser.add_argument("--out", required=True, help="output JSONL")
    parser.add_argument("--policy", help="write this registered policy's plans instead of --in")
    parser.add_argument("--env", default="aml", help="environment for --policy")
    parser.add_argument("--tasks", default="all", help="comma list of tasks for --policy")
    parser.add_argument("--seeds", default="0:20", help="A:B offsets inside --split (--policy)")
    parser.add_argument("--split", default="eval", choices=["train", "eval", "test"])
    parser.add_argument("--weights", help="override reward weights, e.g. grade=2,format=0.2")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    weights = parse_weights(args.weights)

    if args.policy:
        start, _, stop = args.seeds.partition(":")
        if not (start.isdigit() and stop.isdigit() and int(stop) > int(start)):
            raise SystemExit(f"--seeds wants A:B with A < B; got {args.seeds!r}")
        tasks = list(env_class(args.env).tasks) if args.tasks == "all" else args.tasks.split(",")
        good = policy_rows(args.env, args.policy, tasks, int(start), int(stop), args.split)
        bad: list[dict[str, Any]] = []
    elif args.inp:
        good, bad = read_rows(args.inp)
    else:
        raise SystemExit("give --in FILE or --policy NAME")

    scored = score_batch([row for _, row in good], weights)
    out_rows: list[tuple[int, dict[str, Any]]] = [(b["line"], b) for b in bad]
    for (number, row), result in zip(good, scored, strict=True):
        if result["grade"] is None:  # the row named an env/task the registry cannot rebuild
            bad.append({"line": number, "error": result["parse_errors"][0]})
            out_rows.append((number, {**row, "line": number, "error": bad[-1]["error"]}))
        else:
            out_rows.append((number, {**row, **result}))
    out_rows.sort(key=lambda item: item[0])
    with open(args.out, "w", encoding="utf-8") as handle:
        for _, row in out_rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    for record in sorted(bad, key=lambda r: r["line"]):
        print(f"row {record['line']}: {record['error']}", file=sys.stderr)
    ok = [r for _, r in out_rows if "error" not in r]
    logger.info(
        "scored %d rows (%d unreadable) -> %s; mean total %.3f, mean grade %.3f",
        len(ok),
        len(bad),
        args.out,
        mean(r["total"] for r in ok),
        mean(r["rewards"]["grade"] for r in ok),
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
