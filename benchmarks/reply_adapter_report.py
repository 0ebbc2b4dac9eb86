"""The RESULTS.md section of ``benchmarks/reply_adapter.py``, from its saved figures.

Kept apart from the runs so a saved ``--output`` JSON renders without torch or a model: each
variant's held-out curve, its train fit, its last checkpoint and (with a validation split) the
checkpoint the validation grade chose, each against ``always_file`` paired on the same cuts.
"""

from __future__ import annotations

from typing import Any


def selected(curve: list[dict[str, Any]]) -> dict[str, Any]:
    """The checkpoint with the best validation grade, the earliest of ties."""
    return max(curve, key=lambda point: (point["val_grade"], -point["step"]))


def _interval(values: list[float]) -> str:
    from pipeline.evaluation.stats import bootstrap_interval, fmt

    return fmt(bootstrap_interval(values))


def _value(point: dict[str, Any], key: str) -> str:
    return f"{point[key]:.3f}" if key in point else "-"


TITLE = (
    "## reply_adapter (diagnostic): GRPO on the decision with an adapter active from the "
    "assistant turn"
)


def _gain(point: dict[str, Any], verdicts: list[int]) -> str:
    """The checkpoint's held-out accuracy less always_file's, paired over the same cuts."""
    return _interval([float(r - y) for r, y in zip(point["right"], verdicts, strict=True)])


def _seed(result: dict[str, Any]) -> int:
    """The run's seed: saved with it, or (runs saved before it was) read off its command."""
    if "seed" in result:
        return result["seed"]
    words = result["command"].split()
    return int(words[words.index("--seed") + 1]) if "--seed" in words else 0


def markdown_runs(results: list[dict[str, Any]]) -> str:
    """Several saved runs in one section: a line per run and variant (its last checkpoint and
    the one its validation split chose), then each run in full, in the order given."""
    if len(results) == 1:
        return markdown(results[0])
    lines = [
        TITLE,
        "",
        f"{len(results)} runs, each in full below. Per run and variant, against always_file "
        "paired on the same held-out cuts:",
        "",
        "| run | variant | seed | steps | last: held-out acc. | last - always_file [95% CI] | "
        "chosen on validation: step | held-out acc. | - always_file [95% CI] |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, result in enumerate(results, 1):
        verdicts = result["eval_verdicts"]
        for name, run in result["variants"].items():
            last = run["curve"][-1]
            chosen = selected(run["curve"]) if result.get("n_val") else None
            picked = (
                f"{chosen['step']} | {chosen['accuracy']:.3f} | {_gain(chosen, verdicts)}"
                if chosen
                else "- | - | -"
            )
            lines.append(
                f"| {n} | {name} | {_seed(result)} | {last['step']} | "
                f"{last['accuracy']:.3f} | {_gain(last, verdicts)} | {picked} |"
            )
    for n, result in enumerate(results, 1):
        lines += ["", f"### Run {n}", markdown(result, title=False)]
    return "\n".join(lines)


def markdown(result: dict[str, Any], title: bool = True) -> str:
    """The section RESULTS.md keeps: each variant's held-out curve, its train fit, and its last
    checkpoint against ``always_file`` paired over the same held-out cuts (``title=False``: the
    run's part of a section of several)."""
    from benchmarks.results import machine

    verdicts = result["eval_verdicts"]
    lines = [TITLE] if title else []
    lines += [
        "",
        f"Command: `{result['command']}`. {result['n_train']} AML-easy train decision cuts, "
        f"{result.get('n_val', 0)} validation ones, "
        f"{len(verdicts)} held-out ones (file share {sum(verdicts) / len(verdicts):.2f}); "
        f"untrained SmolLM2-135M-Instruct, PEFT activated LoRA r=16 on every linear layer; each "
        f"context encoded once by the base model and kept on disk ({result['encoding_s']:.0f} s "
        "of encoding in this run; contexts already on disk are loaded). A step: a group of decisions sampled per train case, each "
        "rewarded with the episode grade of prefix + the rest of the case for it "
        f"({result['rewards_not_favouring_the_verdict']} train cases where the wrong decision "
        "grades at least as well). Step 0 is after the decision-blind warm start, if any.",
        "",
        "| variant | step | seconds | held-out acc. [95% CI] | AUC | file share | rate | "
        "val. grade | val. AUC |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, run in result["variants"].items():
        for point in run["curve"]:
            lines.append(
                f"| {name} | {point['step']} | {point['seconds']:.0f} | "
                f"{_interval([float(r) for r in point['right']])} | {point['auc']:.3f} | "
                f"{point['file_share']:.2f} | {point.get('rate', 0.0):+.2f} | "
                f"{_value(point, 'val_grade')} | {_value(point, 'val_auc')} |"
            )

    lines += ["", "| variant | train acc. | train AUC | held-out acc. - always_file [95% CI] |"]
    lines.append("|---|---|---|---|")
    for name, run in result["variants"].items():
        lines.append(
            f"| {name} | {run['train']['accuracy']:.3f} | {run['train']['auc']:.3f} | "
            f"{_gain(run['curve'][-1], verdicts)} |"
        )
    if result.get("n_val"):
        lines += [
            "",
            f"Chosen on the {result['n_val']} validation cuts (train seeds, not trained on) by the "
            "mean grade of the likelier decision; the held-out cuts choose nothing:",
            "",
            "| variant | step chosen | val. grade | held-out acc. [95% CI] | "
            "held-out acc. - always_file [95% CI] |",
            "|---|---|---|---|---|",
        ]
        for name, run in result["variants"].items():
            point = selected(run["curve"])
            lines.append(
                f"| {name} | {point['step']} | {point['val_grade']:.4f} | "
                f"{_interval([float(r) for r in point['right']])} | {_gain(point, verdicts)} |"
            )
    lines += ["", f"always_file on the held-out cuts: {_interval([float(v) for v in verdicts])}."]
    lines += ["", f"Measured on {result.get('measured') or machine()}."]
    return "\n".join(lines)
