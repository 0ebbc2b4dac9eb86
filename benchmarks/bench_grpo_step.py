"""One GRPO step of the CPU steps recipe (``configs/cpu_steps_held.yaml``): contexts encoded by the
float32 model against its bfloat16 copy (``peft.context_dtype``), alternating runs, one process.

A run trains ``--steps`` real GRPO steps of the recipe (activated LoRA, decision branches, held
rate, 8 cases x 2 replies, 128 tokens) on ``8 x --encoding-steps`` train cases, so its first
``--encoding-steps`` steps encode their cases into the context store and the rest read them from
it, as in a learning run (its first steps encode the 64 train cases, the later ones only decode
and train). Each run starts from a fresh store and the same adapter (``--init-adapter``: a warm
start, so replies have a trained model's length; else PEFT's zero adapter). Step times are wall
and process CPU time per optimizer step (``bench_train_cpu.StepTimer``).

    OMP_NUM_THREADS=2 python benchmarks/bench_grpo_step.py --init-adapter outputs/warm   # ~12 min
    OMP_NUM_THREADS=2 python benchmarks/bench_grpo_step.py --steps 2 --encoding-steps 1 --no-write
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
from pathlib import Path
from typing import Any

from benchmarks.bench_train_cpu import StepTimer
from benchmarks.results import machine, publish

ROOT = Path(__file__).resolve().parents[1]
CASES_PER_STEP = 8
VARIANTS = {"float32 (the model)": "null", "bfloat16 copy": "bfloat16"}

logger = logging.getLogger("bench_grpo_step")


def run(context_dtype: str, args: argparse.Namespace) -> tuple[list[tuple[float, float]], list]:
    """Step times and TRL's log of one run of the recipe with ``context_dtype``."""
    from pipeline.decoding import activation
    from pipeline.training.config import load_config
    from pipeline.training.trainer import build_trainer

    activation._STORES.clear()  # every run encodes its cases again
    cfg = load_config(
        ROOT / "configs/cpu_steps_held.yaml",
        [
            f"peft.context_dtype={context_dtype}",
            f"data.n_train={CASES_PER_STEP * args.encoding_steps}",
            f"training.max_steps={args.steps}",
            f"output_dir={args.output_dir}",
            "training.save_strategy=no",
            "logging.log_completions=false",
            "logging.plots=false",
        ],
    )
    timer = StepTimer()
    bundle = build_trainer(cfg, extra_callbacks=[timer], init_adapter=args.init_adapter)
    bundle.trainer.train()
    return timer.times, bundle.trainer.state.log_history


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps per run")
    parser.add_argument(
        "--encoding-steps", type=int, default=1, help="leading steps that encode their cases"
    )
    parser.add_argument("--repeats", type=int, default=1, help="alternating runs of each")
    parser.add_argument("--init-adapter", default=None, help="saved LoRA adapter to start from")
    parser.add_argument("--output-dir", default="outputs/bench_grpo_step")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if not 0 < args.encoding_steps < args.steps:
        parser.error("--encoding-steps must leave at least one step that reads the store")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in VARIANTS}
    lengths: dict[str, list[float]] = {label: [] for label in VARIANTS}
    for repeat in range(args.repeats):
        for label, dtype in VARIANTS.items():
            steps, history = run(dtype, args)
            times[label] += steps
            lengths[label] += [r["completions/mean_length"] for r in history if "step_time" in r]
            logger.info("repeat %d, %s: %s", repeat, label, steps)
    publish("bench_grpo_step", "\n".join(report(args, times, lengths)), write=not args.no_write)
    return 0


def report(
    args: argparse.Namespace,
    times: dict[str, list[tuple[float, float]]],
    lengths: dict[str, list[float]],
) -> list[str]:
    """The section: median wall and CPU seconds of encoding and stored steps per variant."""
    k, n = args.encoding_steps, args.steps

    def split(rows: list[Any]) -> tuple[list[Any], list[Any]]:  # per run: encoding, stored
        runs = [rows[i : i + n] for i in range(0, len(rows), n)]
        return [r for run in runs for r in run[:k]], [r for run in runs for r in run[k:]]

    def cell(rows: list[tuple[float, float]]) -> str:
        wall = statistics.median(r[0] for r in rows)
        cpu = statistics.median(r[1] for r in rows)
        return f"{wall:.1f} / {cpu:.1f}"

    adapter = f"`--init-adapter {args.init_adapter}`" if args.init_adapter else "zero adapter"
    lines = [
        "## bench_grpo_step: a GRPO step of the CPU steps recipe, float32 vs bfloat16 contexts",
        "",
        f"`OMP_NUM_THREADS=2 python benchmarks/bench_grpo_step.py --steps {n} --encoding-steps "
        f"{k} --repeats {args.repeats}`, {adapter}; {machine()}. `configs/cpu_steps_held.yaml` "
        f"(SmolLM2-135M-Instruct fp32, activated LoRA, decision branches, held rate, "
        f"{CASES_PER_STEP} cases x 2 replies, 128 tokens) on {CASES_PER_STEP * k} AML-easy train "
        f"cases; runs alternate, each from a fresh context store.",
        "",
        "| contexts encoded by | step that encodes its cases, s (wall / CPU) | step reading "
        "the store, s (wall / CPU) | mean reply tokens |",
        "|---|---|---|---|",
    ]
    parts = {label: split(rows) for label, rows in times.items()}
    for label, (encoding, stored) in parts.items():
        mean = statistics.mean(lengths[label]) if lengths[label] else float("nan")
        lines.append(f"| {label} | {cell(encoding)} | {cell(stored)} | {mean:.0f} |")
    (fp_enc, fp_st), (bf_enc, bf_st) = parts.values()

    def ratio(a: list[Any], b: list[Any]) -> float:
        return statistics.median(r[0] for r in a) / statistics.median(r[0] for r in b)

    lines += [
        "",
        f"Speed-up of the bfloat16 copy (median wall): {ratio(fp_enc, bf_enc):.2f}x on a step "
        f"that encodes, {ratio(fp_st, bf_st):.2f}x on a step that reads the store. The replies "
        "are sampled, so the two variants' replies differ (the mean lengths above).",
    ]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
