"""Diagnostic: does SmolLM2's own reading of a decision-cut prompt carry the verdict?

The steps learning run asks GRPO to move SmolLM2-135M from one decision for every case to the
decision each case's evidence calls for. Six CPU runs drifted to one decision instead. Before
spending more GPU or CPU hours on the RL side, this script asks whether the evidence is there to
be found in the model at all: it encodes every train and held-out AML-easy decision-cut prompt
once with the untrained model (the exact text the learning run trains on, training template,
compact results), and fits linear probes (L2 logistic regression) from the model's hidden states
to the verdict the honest reference gives at that cut (``file_sar`` or ``close_alert``).

- Probes read the last prompt token, or the mean over the prompt, of the middle and the last
  layer. Which one is reported is chosen by cross-validation on the train cuts only; every
  probe's held-out accuracy is listed too, marked as not chosen.
- A bag-of-words probe on the same prompt text (no model) shows how much of the verdict a
  linear reader of the surface tokens finds.
- The majority verdict of the train cuts, and ``always_file``, are the floor.

A probe well above the floor says the model's features carry the verdict and the learning run's
limit is the RL signal and its size; a probe at the floor says a LoRA on this model has little to
build on from this many cases, whatever the reward.

    OMP_NUM_THREADS=2 python benchmarks/probe_decision.py --n-train 64 --n-eval 100
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger("probe_decision")
TERMINALS = ("file_sar", "close_alert")
CS = (0.01, 0.1, 1.0, 10.0)
"""Inverse L2 strengths tried by cross-validation (features are standardised first)."""


def decision_rows(n: int, split: str) -> list[dict[str, Any]]:
    """AML-easy decision-cut rows of ``n`` seeds of ``split``, as configs/cpu_steps.yaml builds
    them, each with ``verdict``: 1 when the reference files at that cut, 0 when it closes."""
    import env as registry
    from pipeline.data.dataset import build_rows
    from pipeline.data.steps import reference

    rows = build_rows("aml", ["easy"], n, split, 0, "steps", "compact", "decision", 0.0, "compact")
    aml = registry.make("aml")
    for row in rows:
        last = reference(aml, row["task"], row["seed"]).rest(row["cut"])[-1]
        name = last.get("name") or last.get("tool")
        if name not in TERMINALS:
            raise ValueError(f"seed {row['seed']}: reference ends with {name!r}, not a decision")
        row["verdict"] = int(name == "file_sar")
    return rows


def prompt_texts(tokenizer: Any, rows: list[dict[str, Any]]) -> list[str]:
    return [
        tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False)
        for r in rows
    ]


def untrained_backend() -> Any:
    """Untrained SmolLM2 with the training template (compact tool list), as the learning run
    renders its steps prompts."""
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings
    from pipeline.training.model import smollm2_path

    return CheckpointBackend(
        smollm2_path(), GenerationSettings(prompt_style="compact", train_template=True)
    )


def hidden_features(backend: Any, texts: list[str]) -> tuple[dict[str, Any], float, list[int]]:
    """Per probe name, an (n, d) array of the untrained model's hidden states; the seconds spent
    and each prompt's token count. One forward pass per prompt, no gradient."""
    import numpy as np
    import torch

    tok, model = backend.tokenizer, backend.model
    feats: dict[str, list[Any]] = {}
    lengths, start = [], time.perf_counter()
    for i, text in enumerate(texts):
        ids = tok(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        lengths.append(int(ids.shape[1]))
        with torch.no_grad():
            states = model(ids, output_hidden_states=True).hidden_states
        layers = {"middle": states[len(states) // 2][0], "last": states[-1][0]}
        for layer, h in layers.items():
            feats.setdefault(f"{layer}_layer_last_token", []).append(h[-1].float().numpy())
            feats.setdefault(f"{layer}_layer_mean", []).append(h.mean(0).float().numpy())
        if (i + 1) % 20 == 0:
            logger.info(
                "encoded %d/%d prompts (%.0f s)", i + 1, len(texts), time.perf_counter() - start
            )
    arrays = {name: np.stack(v) for name, v in feats.items()}
    return arrays, time.perf_counter() - start, lengths


def fit_probe(x_train: Any, y_train: Any, seed: int) -> tuple[Any, float, float]:
    """Standardise + L2 logistic regression; the inverse strength picked by 5-fold CV on the
    train cuts alone. Returns the refitted probe, its CV accuracy and the chosen C."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    best = (-1.0, CS[0])
    for c in CS:
        probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=5000))
        score = float(cross_val_score(probe, x_train, y_train, cv=folds).mean())
        best = max(best, (score, c))
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=best[1], max_iter=5000))
    return probe.fit(x_train, y_train), best[0], best[1]


def accuracy_interval(correct: list[int], seed: int) -> dict[str, float]:
    from pipeline.evaluation.stats import bootstrap_interval

    return bootstrap_interval([float(c) for c in correct], seed=seed)


def paired(a: list[int], b: list[int], seed: int) -> dict[str, float]:
    """Bootstrap interval of mean(b) - mean(a), paired over the same held-out cuts."""
    return accuracy_interval([y - x for x, y in zip(a, b, strict=True)], seed)


def run(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    from sklearn.feature_extraction.text import CountVectorizer

    train, held_out = decision_rows(args.n_train, "train"), decision_rows(args.n_eval, "eval")
    y_train = np.array([r["verdict"] for r in train])
    y_eval = np.array([r["verdict"] for r in held_out])
    logger.info(
        "%d train cuts (%d file), %d held-out cuts (%d file)",
        len(train), int(y_train.sum()), len(held_out), int(y_eval.sum()),
    )  # fmt: skip
    backend = untrained_backend()
    texts_train = prompt_texts(backend.tokenizer, train)
    texts_eval = prompt_texts(backend.tokenizer, held_out)

    majority = int(y_train.mean() >= 0.5)
    floors = {
        "majority_of_train": [int(y == majority) for y in y_eval],
        "always_file": [int(y == 1) for y in y_eval],
    }
    probes: dict[str, dict[str, Any]] = {}

    def record(name: str, x_tr: Any, x_ev: Any) -> None:
        probe, cv, c = fit_probe(x_tr, y_train, args.seed)
        correct = [int(p == y) for p, y in zip(probe.predict(x_ev), y_eval, strict=True)]
        probes[name] = {"cv_accuracy": cv, "C": c, "correct": correct}
        logger.info("%s: cv %.3f, held-out %.3f", name, cv, float(np.mean(correct)))

    words = CountVectorizer(token_pattern=r"[A-Za-z_]+|\d+", binary=True, min_df=2)
    bag_train = words.fit_transform(texts_train).toarray()
    record("bag_of_words", bag_train, words.transform(texts_eval).toarray())
    feats, seconds, lengths = hidden_features(backend, texts_train + texts_eval)
    n = len(train)
    for name, x in feats.items():
        record(f"smollm2_{name}", x[:n], x[n:])
    model_probes = [k for k in probes if k.startswith("smollm2_")]
    chosen = max(model_probes, key=lambda k: probes[k]["cv_accuracy"])
    best_floor = max(floors, key=lambda k: sum(floors[k]))
    return {
        "n_train": len(train),
        "n_eval": len(held_out),
        "train_file_share": float(y_train.mean()),
        "eval_file_share": float(y_eval.mean()),
        "prompt_tokens": {
            "min": min(lengths),
            "max": max(lengths),
            "mean": float(np.mean(lengths)),
        },
        "encode_seconds": round(seconds, 1),
        "floors": floors,
        "probes": probes,
        "chosen": chosen,
        "best_floor": best_floor,
        "chosen_minus_floor": paired(floors[best_floor], probes[chosen]["correct"], args.seed),
        "bag_minus_floor": paired(floors[best_floor], probes["bag_of_words"]["correct"], args.seed),
    }


def markdown(result: dict[str, Any], command: str, ran_on: str) -> list[str]:
    from pipeline.evaluation.stats import fmt

    seed = 0
    lines = [
        "## probe_decision (diagnostic)",
        "",
        f"Command: `{command}`. {ran_on}. {result['n_train']} train and {result['n_eval']} "
        f"held-out AML-easy decision cuts (the learning run's prompts: training template, compact "
        f"results; {result['prompt_tokens']['min']}-{result['prompt_tokens']['max']} tokens, "
        f"mean {result['prompt_tokens']['mean']:.0f}); file share {result['train_file_share']:.2f} "
        f"train, {result['eval_file_share']:.2f} held-out. Untrained SmolLM2-135M-Instruct, one "
        f"forward pass per prompt ({result['encode_seconds']:.0f} s for all).",
        "",
        "| reader of the prompt | train 5-fold CV acc. | held-out acc. [95% CI] |",
        "|---|---|---|",
    ]
    for name, correct in result["floors"].items():
        lines.append(f"| {name} | - | {fmt(accuracy_interval(correct, seed))} |")
    for name, p in result["probes"].items():
        tag = " (chosen by CV)" if name == result["chosen"] else ""
        lines.append(
            f"| {name}{tag} | {p['cv_accuracy']:.3f} (C={p['C']}) | "
            f"{fmt(accuracy_interval(p['correct'], seed))} |"
        )
    lines += [
        "",
        f"Chosen SmolLM2 probe - {result['best_floor']}: {fmt(result['chosen_minus_floor'])}; "
        f"bag of words - {result['best_floor']}: {fmt(result['bag_minus_floor'])} "
        "(paired over the held-out cuts).",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-train", type=int, default=64, help="train seeds (one cut each)")
    parser.add_argument("--n-eval", type=int, default=100, help="held-out seeds (one cut each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", type=Path, default=Path("outputs/probe_decision"))
    parser.add_argument("--no-results", action="store_true", help="do not write RESULTS.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    from benchmarks.results import machine, write_section

    ran_on = machine()
    result = run(args)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "probe.json").write_text(json.dumps(result, indent=1))
    command = "OMP_NUM_THREADS=2 python benchmarks/probe_decision.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    lines = markdown(result, command, ran_on)
    print("\n".join(lines))
    if not args.no_results:
        write_section("probe_decision", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
