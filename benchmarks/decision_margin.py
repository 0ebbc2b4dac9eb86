"""Diagnostic: did training teach the rate of a decision, or its dependence on the case?

Greedy decision accuracy at held-out decision cuts mixes two things: how often a policy takes
each decision (its rate) and whether it takes it more on the cases that call for it (its
reading). A policy that closes every case scores ``always_close`` whatever it reads, and a small
shift of the rate can swing the accuracy by the share of the majority class. This script
separates them. At each held-out AML-easy decision cut it scores the policy's log-probability of
opening its reply as ``close_alert`` and as ``file_sar`` (the openings decision branches
enumerate, ``branch_openings``), and reports per stage:

- the mean margin log P(close) - log P(file) on clean and on suspicious cuts (the rate: both
  move together when only the rate is learned);
- the AUC, the chance that a clean cut's margin exceeds a suspicious cut's (0.5: no reading,
  1.0: every clean case above every suspicious one, whatever the rate), with a bootstrap
  interval over the cuts;
- the accuracy at margin 0 (the decision the opening favours) and at the best single threshold
  (what the reading would give with the rate set right; chosen on the same cuts, so optimistic).

``--compare grpo:warm`` adds the paired difference of two stages' AUCs on the same cuts, with a
bootstrap interval that resamples the cuts once for both (the stages' own intervals overlap far
more than their difference varies). ``--saved`` takes stages scored by an earlier run on the same
cuts instead of scoring them again (~6 s a cut on 2 cores).

    OMP_NUM_THREADS=2 python benchmarks/decision_margin.py --episodes 24 \\
        --stage warm=runs/steps/warm --stage grpo=runs/steps/grpo --compare grpo:warm
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BOOTSTRAP = 2000


def opening_margins(
    model: Any, prompts: list[list[int]], openings: list[list[int]]
) -> list[list[float]]:
    """Per prompt (token ids), the log-probability of each opening as the reply's first tokens:
    the prompt encoded once, each opening scored against a copy of its cache."""
    import copy

    import torch

    scores = []
    with torch.no_grad():
        for ids in prompts:
            first = model(input_ids=torch.tensor([ids]), use_cache=True, logits_to_keep=1)
            head = first.logits[0, -1].float().log_softmax(-1)
            row = []
            for opening in openings:
                total = float(head[opening[0]])
                if len(opening) > 1:
                    cache = copy.deepcopy(first.past_key_values)
                    out = model(input_ids=torch.tensor([opening[:-1]]), past_key_values=cache)
                    logp = out.logits[0].float().log_softmax(-1)
                    total += sum(float(logp[i, t]) for i, t in enumerate(opening[1:]))
                row.append(total)
            scores.append(row)
    return scores


def auc(clean: list[float], suspicious: list[float]) -> float:
    """P(a clean cut's margin > a suspicious cut's), ties counted half (Mann-Whitney)."""
    if not clean or not suspicious:
        return float("nan")
    wins = sum((c > s) + 0.5 * (c == s) for c in clean for s in suspicious)
    return wins / (len(clean) * len(suspicious))


def bootstrap_interval(
    statistic: Callable[[list[Any], list[Any]], float],
    clean: list[Any],
    suspicious: list[Any],
    seed: int,
) -> tuple[float, float]:
    """95% interval of ``statistic(clean, suspicious)`` over resamples that draw each class
    with replacement, its own size (a stage's AUC, or two stages' difference by cut index)."""
    rng = random.Random(seed)
    resampled = sorted(
        statistic([rng.choice(clean) for _ in clean], [rng.choice(suspicious) for _ in suspicious])
        for _ in range(BOOTSTRAP)
    )
    return resampled[int(0.025 * BOOTSTRAP)], resampled[int(0.975 * BOOTSTRAP) - 1]


def summary(margins: list[float], verdicts: list[int], seed: int = 0) -> dict[str, Any]:
    """Rate, reading and accuracies of one stage (module docstring); verdict 1 = file."""
    clean = [m for m, v in zip(margins, verdicts, strict=True) if not v]
    suspicious = [m for m, v in zip(margins, verdicts, strict=True) if v]
    low, high = bootstrap_interval(auc, clean, suspicious, seed)

    def accuracy(threshold: float) -> float:
        right = [(m > threshold) != bool(v) for m, v in zip(margins, verdicts, strict=True)]
        return sum(right) / len(right)

    thresholds = [float("-inf"), *sorted(margins)]
    return {
        "n": len(margins),
        "mean_margin_clean": round(sum(clean) / len(clean), 3),
        "mean_margin_suspicious": round(sum(suspicious) / len(suspicious), 3),
        "auc": round(auc(clean, suspicious), 3),
        "auc_low": round(low, 3),
        "auc_high": round(high, 3),
        "accuracy_at_0": round(accuracy(0.0), 3),
        "accuracy_best_threshold": round(max(accuracy(t) for t in thresholds), 3),
    }


def paired_auc_difference(
    first: list[float], second: list[float], verdicts: list[int], seed: int = 0
) -> dict[str, float]:
    """AUC(first) - AUC(second) over the same cuts, with a paired bootstrap interval: each
    resample draws the clean and the suspicious cuts once and scores both stages on them."""
    clean = [i for i, v in enumerate(verdicts) if not v]
    suspicious = [i for i, v in enumerate(verdicts) if v]

    def stage_auc(margins: list[float], c: list[int], s: list[int]) -> float:
        return auc([margins[i] for i in c], [margins[i] for i in s])

    def difference(c: list[int], s: list[int]) -> float:
        return stage_auc(first, c, s) - stage_auc(second, c, s)

    low, high = bootstrap_interval(difference, clean, suspicious, seed)
    return {
        "auc_difference": round(difference(clean, suspicious), 3),
        "low": round(low, 3),
        "high": round(high, 3),
    }


def saved_stages(paths: list[Path], verdicts: list[int]) -> dict[str, dict[str, Any]]:
    """Stages earlier runs scored on the same cuts (their ``--output`` files), checked by the
    cuts' verdicts so that margins of different cuts are never paired."""
    stages: dict[str, dict[str, Any]] = {}
    for path in paths:
        if not path.is_file():
            raise SystemExit(f"--saved {path}: no such file")
        saved = json.loads(path.read_text())
        if saved.get("verdicts") != verdicts:
            raise SystemExit(f"--saved {path}: scored other cuts ({saved.get('episodes')})")
        stages.update(saved["stages"])
    return stages


def stage_margins(path: str, rows: list[dict[str, Any]]) -> list[float]:
    """log P(close opening) - log P(file opening) per row, for the model or adapter at ``path``."""
    from benchmarks.probe_decision import prompt_texts
    from pipeline.decoding.trainer_sampling import branch_openings
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings

    settings = GenerationSettings(prompt_style="compact", train_template=True)
    backend = CheckpointBackend(path, settings)
    tok = backend.tokenizer
    openings = branch_openings(tok, ["close_alert", "file_sar"])
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in prompt_texts(tok, rows)]
    return [close - file_ for close, file_ in opening_margins(backend.model, prompts, openings)]


def main(argv: list[str] | None = None) -> int:
    from benchmarks.probe_decision import decision_rows
    from pipeline.training.model import smollm2_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=24, help="held-out decision cuts")
    parser.add_argument(
        "--stage",
        action="append",
        default=[],
        help="NAME=PATH of an adapter or model directory; 'untrained' is scored first unless saved",
    )
    parser.add_argument(
        "--saved", action="append", default=[], type=Path, help="an earlier --output, same cuts"
    )
    parser.add_argument(
        "--compare", action="append", default=[], help="A:B, the paired AUC difference A - B"
    )
    parser.add_argument("--output", type=Path, default=None, help="write the figures as JSON")
    args = parser.parse_args(argv)
    rows = decision_rows(args.episodes, "eval")
    verdicts = [r["verdict"] for r in rows]
    saved = saved_stages(args.saved, verdicts)
    stages = [] if "untrained" in saved else [("untrained", str(smollm2_path()))]
    stages += [s.split("=", 1) for s in args.stage]
    pairs = [c.split(":", 1) for c in args.compare]
    known = {name for name, _ in stages} | set(saved)
    if any(len(pair) != 2 or not set(pair) <= known for pair in pairs):
        raise SystemExit(f"--compare {args.compare}: A:B of stages scored or saved ({known})")
    result: dict[str, Any] = {"episodes": args.episodes, "stages": dict(saved)}
    for name, path in stages:
        start = time.perf_counter()
        margins = stage_margins(path, rows)
        figures = summary(margins, verdicts)
        figures["seconds"] = round(time.perf_counter() - start, 1)
        figures["margins"] = [round(m, 3) for m in margins]
        result["stages"][name] = figures
        print(name, json.dumps({k: v for k, v in figures.items() if k != "margins"}), flush=True)
    result["comparisons"] = {}
    for a, b in pairs:
        first, second = (result["stages"][n]["margins"] for n in (a, b))
        result["comparisons"][f"{a}-{b}"] = paired_auc_difference(first, second, verdicts)
        print(f"{a}-{b}", json.dumps(result["comparisons"][f"{a}-{b}"]), flush=True)
    if args.output:
        args.output.write_text(json.dumps({**result, "verdicts": verdicts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
