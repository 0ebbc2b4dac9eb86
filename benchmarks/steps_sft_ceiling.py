"""Diagnostic: how far supervised learning of the decision gets SmolLM2 on the steps data.

The steps learning run (``benchmarks/learning_cpu.py --modes steps``) asks GRPO to learn, from
reward alone, which decision the evidence at a decision cut calls for. When it misses, is the
limit the reward signal, or can this model not learn the mapping from this many prompts at all?
This script answers the second half: it trains the same LoRA model, on the same train-seed
decision cuts, by SFT on the honest reference's own replies (which carry the right decision, so
this is *not* an admissible warm start: it teaches the answer) and scores it on the same held-out
cuts as the learning run, beside ``always_file`` and the reference.

If even supervision on the answers stays at the majority decision, a GRPO run of the same size
cannot be expected to do better; if it lifts accuracy, the missing piece is the RL signal.

    OMP_NUM_THREADS=2 python benchmarks/steps_sft_ceiling.py --episodes 16 --n-train 32 \\
        --sft-steps 12 --reply-tokens 128
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.learning_steps import CONFIG, SCRIPTED, cut_rows, evaluate_cuts, stage_table
from pipeline.evaluation.stats import fmt, paired_difference

logger = logging.getLogger("steps_sft_ceiling")


def train_on_reference(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """SFT on the reference's replies at train-seed decision cuts; the adapter saved in
    ``folder``. Same config, rate and fixed-context loss as the learning run's blind warm start."""
    from pipeline.training.config import load_config
    from pipeline.training.model import load_model_and_tokenizer
    from pipeline.training.trainer import build_datasets, build_grpo_config
    from pipeline.training.warmup import sft_warmup
    from rewards import build_reward_functions

    overrides = [
        f"output_dir={folder.parent / 'run'}",
        f"data.n_train={args.n_train}",
        f"training.max_completion_length={args.reply_tokens}",
        "logging.report_to=none",
    ]
    cfg = load_config(CONFIG, overrides)
    train, _ = build_datasets(cfg)
    _, weights = build_reward_functions(cfg.rewards.weights or None)
    grpo_args = build_grpo_config(cfg, weights)
    model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.peft, cfg.data.prompt_style)
    started = time.perf_counter()
    summary = sft_warmup(
        model, tokenizer, train, args.sft_steps, cfg, grpo_args, steps_policy="reference"
    )
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    decisions = Counter(
        "file_sar" if "file_sar" in reply else "close_alert" for reply in _reference_replies(train)
    )
    return {
        **summary,
        "seconds": round(time.perf_counter() - started, 1),
        "train_rows": len(train),
        "train_decisions": dict(decisions),
        "overrides": overrides,
    }


def _reference_replies(train: Any) -> list[str]:
    from pipeline.evaluation.cuts import scripted_replies

    return scripted_replies([dict(r) for r in train], "reference")


TERMINAL_NAME = re.compile(r'"name":\s*"(file_sar|close_alert)"')


def intended(episodes: list[dict[str, Any]], reference: list[dict[str, Any]]) -> tuple[int, int]:
    """How many replies *open* the terminal call the reference makes, whether or not the call is
    ever closed: the decision the model meant, which greedy repetition may keep from parsing.
    A diagnostic only: the learning run's decision accuracy counts parsed calls alone."""
    right = {e["seed"]: e["decision"] for e in reference}
    hits = 0
    for e in episodes:
        found = TERMINAL_NAME.search(e["reply"])
        hits += found is not None and found.group(1) == right[e["seed"]]
    return hits, len(episodes)


def markdown(run: dict[str, Any], command: str) -> list[str]:
    cuts = run["cuts"]
    reference = cuts["reference"]["episodes"]
    filed = sum(e["decision"] == "file_sar" for e in reference)
    sft = run["sft"]
    lines = [
        f"Command: `{command}` ({run['seconds']:.0f} s in all; SFT {sft['seconds']:.0f} s, "
        f"{sft['steps']} steps, loss {fmt_losses(sft['losses'])}; train decisions "
        f"{sft['train_decisions']}). Nothing else ran on the machine.",
        "",
        "Held-out AML-easy decision cuts (the learning run's seeds; one greedy reply each; "
        "`no_repeat_N`: greedy decoding that never repeats an N-gram of its own reply):",
        "",
        *stage_table(
            cuts, "cuts", ("decision_accuracy", "decision_rate", "valid_call_rate", "grade")
        ),
        "",
        "| SFT model | decision acc. - always_file [95% CI] | decisions parsed | "
        "opens the reference's decision |",
        "|---|---|---|---|",
    ]
    for name, result in cuts.items():
        if not name.startswith("sft_reference"):
            continue
        episodes = result["episodes"]
        gain = paired_difference(cuts["always_file"]["episodes"], episodes, "decision_accuracy")
        meant, total = intended(episodes, reference)
        parsed = dict(Counter(e["decision"] for e in episodes))
        lines.append(f"| {name} | {fmt(gain)} | {parsed} | {meant} of {total} |")
    lines += [
        "",
        "The last column is a diagnostic, not a decision: replies that open the terminal call "
        'the reference makes (`"name": "file_sar"` or `close_alert`), whether or not the call '
        f"is ever closed; the majority decision opens {max(filed, total - filed)} of {total}.",
    ]
    return lines


def fmt_losses(losses: list[float]) -> str:
    return f"{losses[0]:.2f} -> {losses[-1]:.2f}" if losses else "n/a"


def guarded(folder: Path, rows: list[dict[str, Any]], args: argparse.Namespace) -> dict:
    """The SFT model's row with greedy decoding that never repeats an n-gram of its own reply."""
    from pipeline.evaluation.cuts import score_policy

    n = args.no_repeat_ngram
    if n < 2:
        raise SystemExit("--no-repeat-ngram needs n >= 2")
    result = score_policy(
        f"checkpoint:{folder}", rows, max_new_tokens=args.reply_tokens, no_repeat_ngram=n
    )
    return {f"sft_reference_no_repeat_{n}": result}


def measure(args: argparse.Namespace, argv: list[str] | None) -> tuple[dict[str, Any], str]:
    """Baselines, the SFT on the reference's replies, and its evaluation; saved under
    ``--output-dir`` (run.json, command.txt)."""
    args.output_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows = cut_rows(args.episodes)
    cuts = {name: evaluate_cuts(name, rows, args.reply_tokens) for name in SCRIPTED}
    folder = args.output_dir / "sft_reference"
    sft = train_on_reference(args, folder)
    cuts["sft_reference"] = evaluate_cuts(f"checkpoint:{folder}", rows, args.reply_tokens)
    if args.no_repeat_ngram:
        cuts.update(guarded(folder, rows, args))
    run = {"seconds": round(time.perf_counter() - started, 1), "sft": sft, "cuts": cuts}
    (args.output_dir / "run.json").write_text(json.dumps(run, indent=1, default=str))
    command = "OMP_NUM_THREADS=2 python benchmarks/steps_sft_ceiling.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    (args.output_dir / "command.txt").write_text(command.strip() + "\n")
    return run, command.strip()


def load_run(folder: Path) -> tuple[dict[str, Any], str]:
    """A finished run and its command, from its output folder."""
    run = json.loads((folder / "run.json").read_text())
    return run, (folder / "command.txt").read_text().strip()


def extend(folder: Path, args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    """Add the guarded-decoding row to a finished run, saved back to its folder."""
    run, command = load_run(folder)
    rows = cut_rows(len(run["cuts"]["always_file"]["episodes"]))
    run["cuts"].update(guarded(folder / "sft_reference", rows, args))
    (folder / "run.json").write_text(json.dumps(run, indent=1, default=str))
    command += f"; then --extend {folder} --no-repeat-ngram {args.no_repeat_ngram}"
    command += f" --reply-tokens {args.reply_tokens}"
    (folder / "command.txt").write_text(command + "\n")
    return run, command


def report(runs: list[tuple[dict[str, Any], str]]) -> str:
    """The RESULTS.md section: one block of tables per run (e.g. one per SFT length)."""
    lines = ["## steps_sft_ceiling (diagnostic)"]
    for run, command in runs:
        if len(runs) > 1:
            lines += ["", f"### {run['sft']['steps']} SFT steps"]
        lines += ["", *markdown(run, command)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=16, help="held-out decision cuts")
    parser.add_argument("--n-train", type=int, default=32, help="train-seed decision cuts")
    parser.add_argument("--sft-steps", type=int, default=12)
    parser.add_argument("--reply-tokens", type=int, default=128)
    parser.add_argument("--output-dir", type=Path, default=Path("outputs/steps_sft_ceiling"))
    parser.add_argument("--no-results", action="store_true", help="Do not write RESULTS.md")
    parser.add_argument(
        "--report-only",
        type=Path,
        nargs="+",
        help="Write the tables of finished runs (their command files), one block per run",
    )
    parser.add_argument(
        "--no-repeat-ngram",
        type=int,
        default=0,
        help="Also score the SFT model with greedy decoding that never repeats an n-gram of its "
        "own reply (with --extend: add that row to a finished run, from its saved adapter)",
    )
    parser.add_argument("--extend", type=Path, help="A finished run's output folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.report_only:
        runs = [load_run(folder) for folder in args.report_only]
    elif args.extend:
        runs = [extend(args.extend, args)]
    else:
        runs = [measure(args, argv)]
    text = report(runs)
    sys.stdout.write(text + "\n")
    if not args.no_results:
        from benchmarks.results import machine, write_section

        where = "Tables written from the saved runs" if args.report_only else "Measured"
        write_section("steps_sft_ceiling", text + f"\n\n{where} on {machine()}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
