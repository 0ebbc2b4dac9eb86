"""The report of the CPU learning benchmark (``benchmarks/learning_cpu.py``): its sections of
benchmarks/RESULTS.md, the per-mode tables with the targets checked, the command lines that
reproduce each run and the per-stage charts. Kept apart from the runner so that rebuilding a
report (``--report-only``) reads saved runs without the training code.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchmarks.learning_cpu import FULL, PROMPT_STYLE, QUICK, TARGETS, TIME_LIMIT_S, own_warm_start
from benchmarks.results import machine, publish
from pipeline.evaluation.stats import bar_chart, fmt, interval_table, paired_difference


def mode_markdown(mode: str, run: dict[str, Any]) -> list[str]:
    """Table of one mode: each stage's figures with 95% intervals, then the paired gains."""
    results = run["results"]
    args = run.get("args", {})
    lines = [
        f"**{mode} mode** ({run['seconds']:.0f} s in all; warm start + model load "
        f"{run['warm_seconds']:.0f} s, GRPO {run['grpo_seconds']:.0f} s, mean "
        f"frac_reward_zero_std {run['frac_reward_zero_std']})",
        "",
        f"Command: `{run_command(mode, args)}`"
        + (f" (run on {run['machine']})" if run.get("machine") else "")
        + f"; {args.get('episodes')} eval seeds per stage, "
        f"warm start: {warm_start_label(mode, args)}, "
        f"{args.get('grpo_steps')} GRPO steps on {args.get('n_train')} train prompts, replies "
        f"capped at {args.get('plan_tokens') if mode == 'plan' else args.get('turn_tokens')} "
        f"tokens{'' if mode == 'plan' else ' a turn'}"
        + (
            f", conversations at {args['max_context']} tokens"
            if mode != "plan" and "max_context" in args
            else ""
        )
        + "; GRPO config overrides "
        f"`{' '.join(run.get('overrides', []))}`. Chart: `{run.get('chart', '')}`.",
        "",
        "| stage | episodes | mean grade [95% CI] | decision rate | valid calls | decision acc. |",
        "|---|---|---|---|---|---|",
    ]
    for stage, result in results.items():
        t = interval_table(result["episodes"])["all"]
        lines.append(
            f"| {stage} | {t['grade']['n']} | {fmt(t['grade'])} | {fmt(t['decision_rate'])} | "
            f"{fmt(t['valid_call_rate'])} | {fmt(t['decision_accuracy'])} |"
        )
    lines += ["", "| comparison | grade difference [paired 95% CI] |", "|---|---|"]
    pairs = [("untrained", s) for s in results if s != "untrained"]
    if "warm" in results:
        pairs.append(("warm", "grpo"))
    for before, after in pairs:
        diff = paired_difference(results[before]["episodes"], results[after]["episodes"])
        lines.append(f"| {after} - {before} | {fmt(diff)} |")
    final = interval_table(results["grpo"]["episodes"])["all"]
    base = interval_table(results["untrained"]["episodes"])["all"]
    gain = final["grade"]["mean"] - base["grade"]["mean"]
    checks = [
        ("valid calls >= 0.9", final["valid_call_rate"]["mean"] >= TARGETS["valid_call_rate"]),
        ("decisions >= 0.8", final["decision_rate"]["mean"] >= TARGETS["decision_rate"]),
        (
            "grade gain >= 0.10, intervals apart",
            gain >= TARGETS["grade_gain"] and final["grade"]["low"] > base["grade"]["high"],
        ),
    ]
    checks.append((f"run under {TIME_LIMIT_S // 60} min", run["seconds"] < TIME_LIMIT_S))
    if "warm" in results:
        diff = paired_difference(results["warm"]["episodes"], results["grpo"]["episodes"])
        checks.append(("GRPO above warm start", diff["low"] > 0))
        apart = "excludes" if diff["low"] > 0 or diff["high"] < 0 else "includes"
        note = f" (paired interval {fmt(diff)} {apart} 0)"
    else:
        note = ""
    scope = "Targets" if mode == "plan" else "Plan-mode targets, applied for reference"
    verdicts = "; ".join(f"{n}: {verdict(n, ok)}" for n, ok in checks)
    lines += ["", f"{scope}: {verdicts}{note}"]
    return lines


def verdict(name: str, ok: bool) -> str:
    """ "met" only when the target's own condition holds; a gain whose paired interval includes 0
    is "not shown", not met."""
    if ok:
        return "met"
    return "not shown" if name == "GRPO above warm start" else "NOT met"


def warm_start_label(mode: str, args: dict[str, str]) -> str:
    """How a mode's run was warm-started, for its report line."""
    if own_warm_start(mode, args.get("interactive_warm")):
        return f"{args.get('sft_steps')} SFT steps"
    if args.get("interactive_warm", "none") == "plan":
        return "the plan mode's warm adapter (`plan/warm`)"
    return "none"


def run_command(mode: str, args: dict[str, str]) -> str:
    """The command line that reproduces one mode's run (its non-default arguments)."""
    preset = QUICK if args.get("quick") == "True" else FULL
    parts = ["OMP_NUM_THREADS=2 python benchmarks/learning_cpu.py", f"--modes {mode}"]
    if args.get("quick") == "True":
        parts.append("--quick")
    for key, default in preset.items():
        if key in args and str(args[key]) != str(default):
            parts.append(f"--{key.replace('_', '-')} {args[key]}")
    if args.get("threads") not in (None, "None"):
        parts.append(f"--threads {args['threads']}")
    return " ".join(parts)


def steps_command(args: dict[str, str]) -> str:
    """The command line of a steps run (its steps arguments)."""
    parts = [run_command("steps", args)]
    reused = args.get("steps_warm") not in (None, "None")  # then no SFT step runs
    for key in ("horizon_episodes", "reply_tokens", "steps_sft", "steps_warm"):
        if args.get(key) not in (None, "None") and not (key == "steps_sft" and reused):
            parts.append(f"--{key.replace('_', '-')} {args[key]}")
    if args.get("steps_set") not in (None, "None"):
        import ast

        parts += [f"--steps-set {item}" for item in ast.literal_eval(args["steps_set"])]
    return " ".join(parts)


def chart(mode: str, run: dict[str, Any], path: Path) -> Path:
    """Mean grade with 95% intervals of every stage of one mode's run."""
    series = {
        stage: {mode: interval_table(result["episodes"])["all"]["grade"]}
        for stage, result in run["results"].items()
    }
    return bar_chart(series, path, "SmolLM2-135M on AML easy (held-out seeds): grade per stage")


def report(runs: dict[str, dict[str, Any]], args: argparse.Namespace) -> int:
    """The "learning_cpu" section of benchmarks/RESULTS.md and one "learning_cpu_<mode>" section
    (and chart) per mode in ``runs``: a mode's run rewrites its own figures only."""
    body = [
        "## learning_cpu",
        "",
        "Written by `benchmarks/learning_cpu.py`; each mode's figures follow in their own section "
        "(`--report-only --modes <mode>` rebuilds one from its saved run). SmolLM2-135M-Instruct "
        "+ LoRA on AML easy; held-out eval seeds, greedy; warm start: SFT on the heuristic's "
        "blind plans (pipeline/training/warmup.py) in plan mode, whose adapter the interactive mode "
        "starts from unless its command says otherwise. GRPO reward curves "
        f"`{args.output_dir}/<mode>/reward_curves.png`; per-stage JSON under "
        f"`{args.output_dir}/<mode>/` (compare with scripts/compare_results.py).",
        f"Plan mode: {PROMPT_STYLE} prompts; the completion budget is the plan-reply cap. GRPO's "
        "sampled plans and the evaluation's greedy ones stop at the decision (the replay ignores "
        "anything after it). Interactive mode: the evaluation plays every episode at once, each "
        "turn's replies decoded in batches (`pipeline.decoding.lockstep`).",
    ]
    publish("learning_cpu", "\n".join(body), write=not args.no_results)
    for mode, run in runs.items():
        quick = run.get("args", {}).get("quick") == "True"
        if mode == "steps":
            from benchmarks.learning_steps import steps_markdown

            label = "SMOKE RUN (--quick): figures say nothing about learning." if quick else ""
            head = [
                "### learning_cpu, steps mode",
                "",
                f"Written on {machine()}. {label}".rstrip(),
                "",
            ]
            body = steps_markdown(run, steps_command(run.get("args", {})))
            publish("learning_cpu_steps", "\n".join(head + body), write=not args.no_results)
            continue
        run["chart"] = chart(mode, run, args.output_dir / f"learning_cpu_{mode}.png")
        label = (
            "SMOKE RUN (--quick): a handful of episodes and steps; it proves the script runs end "
            "to end, its figures say nothing about learning."
            if quick
            else "Full run."
        )
        head = [
            f"### learning_cpu, {mode} mode",
            "",
            f"Written on {machine()}. {label}".rstrip(),
            "",
        ]
        text = "\n".join(head + mode_markdown(mode, run))
        publish(f"learning_cpu_{mode}", text, write=not args.no_results)
    return 0
