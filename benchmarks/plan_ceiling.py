"""What can a blind plan score on AML easy? The room GRPO has above the plan-mode warm start.

    python benchmarks/plan_ceiling.py          # seconds: replays only, no model

A plan is written before any tool result is seen, so it can only use what the prompt shows: the
alert (its rule, the subject's id). ``learning_cpu``'s warm start writes one 6-call plan for every
case; this script replays families of hand-written blind plans on the same 100 held-out seeds
(``env.seeds`` eval split) and reports each one's mean grade with its 95% interval, its gain over
the warm start's plan (paired interval), and the mean training reward (``rewards``, default
weights) on the 64 training prompts, i.e. what GRPO would see. The typology "by rule" is the most
common family behind each alert rule on the training seeds only (no eval truth is read).
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from collections.abc import Callable
from typing import Any

from benchmarks.results import machine, publish
from pipeline.evaluation.stats import bootstrap_interval, fmt, paired_difference

Call = dict[str, Any]
EXTRA: dict[str, Callable[[str], list[Call]]] = {
    "warm start's plan": lambda subject: [
        {"tool": "check_device_overlap", "arguments": {"customer_id": subject}}
    ],
    "+ rule mode with an effect": lambda subject: [
        {"tool": "update_system_prompt", "arguments": {"rule_mode": "enhanced_due_diligence"}},
        {"tool": "check_source_of_funds", "arguments": {"customer_id": subject}},
    ],
}
"""The calls between the opening three (alert, profile, transactions) and the case-file note."""


def alert_facts(row: dict[str, Any]) -> tuple[str, str, str]:
    """(alert id, subject id, alert rule) as the prompt shows them."""
    text = row["prompt"][-1]["content"]
    alert = re.search(r"AL-\d+", text)
    subject = re.search(r'"subject_id": "([^"]+)"', text)
    rule = re.search(r'"rule": "(\w+)"', text)
    if not (alert and subject and rule):
        raise ValueError(f"no alert in the prompt of seed {row['seed']}")
    return alert.group(0), subject.group(1), rule.group(1)


def blind_plan(row: dict[str, Any], extra: str, typology: str) -> list[Call]:
    """The warm start's plan shape with ``extra`` calls in the middle and the given typology."""
    alert, subject, _ = alert_facts(row)
    return [
        {"tool": "review_alert", "arguments": {"alert_id": alert}},
        {"tool": "get_customer_profile", "arguments": {"customer_id": subject}},
        {"tool": "query_transactions", "arguments": {"customer_id": subject}},
        *EXTRA[extra](subject),
        {"tool": "write_to_case_file", "arguments": {"note": f"Case notes: {subject}"}},
        {
            "tool": "file_sar",
            "arguments": {
                "findings": f"{typology} indicators",
                "typology": typology,
                "entities_involved": [subject],
            },
        },
    ]


def typology_by_rule(env: Any, rows: list[dict[str, Any]]) -> dict[str, str]:
    """Most common laundering family behind each alert rule, from training episodes."""
    seen: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for row in rows:
        env.reset(task=row["task"], seed=row["seed"])
        family = env.reveal().get("typology")
        if family:
            seen[alert_facts(row)[2]][family] += 1
    return {rule: counts.most_common(1)[0][0] for rule, counts in seen.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=100, help="Eval seeds")
    parser.add_argument("--n-train", type=int, default=64, help="Training prompts")
    parser.add_argument("--no-results", action="store_true", help="Do not write RESULTS.md")
    args = parser.parse_args(argv)

    import env as registry
    from env.rollout import replay
    from pipeline.data.dataset import build_rows
    from rewards.protocol import render_completion
    from rewards.score import mean, score_batch

    env = registry.make("aml")
    train = build_rows("aml", ["easy"], args.n_train, "train", 0, "plan", "compact")
    evaluation = build_rows("aml", ["easy"], args.episodes, "eval", 0, "plan", "compact")
    by_rule = typology_by_rule(env, train)

    def typology(row: dict[str, Any], choice: str) -> str:
        return by_rule.get(alert_facts(row)[2], "mule_ring") if choice == "by rule" else choice

    def reward(extra: str, choice: str) -> float:
        """Mean weighted training reward (what TRL would sum) of the plans on the train prompts."""
        rows = [
            {
                "env": r["env"],
                "task": r["task"],
                "seed": r["seed"],
                "completion": render_completion(blind_plan(r, extra, typology(r, choice))),
            }
            for r in train
        ]
        return mean(result["total"] for result in score_batch(rows))

    results = {}
    for extra in EXTRA:
        for choice in ("mule_ring", "by rule"):
            rows = [
                {
                    "task": r["task"],
                    "seed": r["seed"],
                    "grade": replay(
                        env, r["task"], r["seed"], blind_plan(r, extra, typology(r, choice))
                    ).grade.total,
                }
                for r in evaluation
            ]
            results[(extra, choice)] = (rows, reward(extra, choice))
    base = results[("warm start's plan", "mule_ring")][0]
    lines = [
        "## plan_ceiling",
        "",
        f"Written by `benchmarks/plan_ceiling.py` on {machine()}: hand-written blind plans "
        f"replayed on {args.episodes} held-out AML-easy seeds (grade) and scored by the reward "
        f"functions on {args.n_train} training prompts. Typology by rule: {by_rule}.",
        "",
        "| plan | typology | mean grade [95% CI] | gain over the warm start's plan | mean reward |",
        "|---|---|---|---|---|",
    ]
    for (extra, choice), (rows, mean_reward) in results.items():
        grade = bootstrap_interval([r["grade"] for r in rows])
        gain = paired_difference(base, rows)
        lines.append(f"| {extra} | {choice} | {fmt(grade)} | {fmt(gain)} | {mean_reward:.3f} |")
    body = "\n".join(lines)
    publish("plan_ceiling", body, write=not args.no_results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
