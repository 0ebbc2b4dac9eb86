"""Our GRPO step time against a plain GRPOTrainer script, same model/data/G/lengths, one run.

What the pipeline adds around TRL (config, the five replaying reward functions, the prompt log,
the Ctrl-C callback) must cost little next to generation and the backward pass. Both trainers get
the same prompt dataset, the same freshly loaded model (LoRA), the same GRPOConfig and seed; the
plain one scores every completion with a constant. The learning rate is 0 in both, so the model,
and therefore every sampled completion, is identical in the two runs: the difference in step time
is the pipeline's overhead alone, measured as process CPU time per step (wall time is reported
too, but on a shared machine it mostly measures the neighbours). Runs alternate (ours, plain, ours, plain, ...) so a change of
machine load hits both; the first step of each run (warm-up) is dropped and the median is reported.

    python benchmarks/bench_train_cpu.py                     # SmolLM2-135M, writes RESULTS.md
    python benchmarks/bench_train_cpu.py --backend tiny --steps 3 --repeats 1 --no-write
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from benchmarks.results import machine, write_section
from pipeline.training.config import load_config

ROOT = Path(__file__).resolve().parents[1]

logger = logging.getLogger("bench_train_cpu")


class StepTimer(TrainerCallback):
    """Wall time and process CPU time of every optimizer step (generation + rewards + backward).

    CPU time (all threads of this process) is the work the step did; on a shared machine the wall
    time also counts the time other people's processes held the cores, so the ratio uses CPU time.
    """

    def __init__(self) -> None:
        self.times: list[tuple[float, float]] = []
        self._start = (0.0, 0.0)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._start = (time.perf_counter(), time.process_time())

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        wall, cpu = self._start
        self.times.append((time.perf_counter() - wall, time.process_time() - cpu))


def constant_reward(completions: list, **kwargs: Any) -> list[float]:
    """The plain script's reward: the same number for every completion."""
    return [1.0] * len(completions)


def run_ours(cfg: Any) -> list[tuple[float, float]]:
    """Step times of our pipeline's trainer (build_trainer, rewards, callbacks)."""
    from pipeline.training.trainer import build_trainer

    timer = StepTimer()
    bundle = build_trainer(cfg, extra_callbacks=[timer])
    bundle.trainer.train()
    return timer.times


def run_plain(cfg: Any, dataset: Any) -> list[tuple[float, float]]:
    """Step times of a plain GRPOTrainer script on the same model, data and settings."""
    from trl import GRPOConfig, GRPOTrainer

    from pipeline.training.model import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.peft)
    args = GRPOConfig(
        output_dir=cfg.output_dir + "-plain", report_to=[], use_cpu=True, **cfg.training
    )
    timer = StepTimer()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[constant_reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[timer],
    )
    trainer.train()
    return timer.times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", help="cpu (SmolLM2-135M) or tiny")
    parser.add_argument("--env", default="aml")
    parser.add_argument("--steps", type=int, default=4, help="steps per run (first is dropped)")
    parser.add_argument("--repeats", type=int, default=2, help="alternating runs of each")
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--completion-length", type=int, default=64)
    parser.add_argument("--output-dir", default="outputs/bench_train_cpu")
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    g = args.generations
    cfg = load_config(
        ROOT / "configs/cpu.yaml",
        [
            f"model.backend={args.backend}",
            f"data.envs=[{args.env}]",
            f"data.n_train={args.steps * 2}",
            f"output_dir={args.output_dir}",
            f"training.max_steps={args.steps}",
            f"training.num_generations={g}",
            f"training.per_device_train_batch_size={g}",
            f"training.max_completion_length={args.completion_length}",
            "training.learning_rate=0.0",
            "training.save_strategy=no",
            "training.logging_steps=1",
            "logging.log_completions=false",
            "logging.plots=false",
        ],
    )
    from pipeline.training.trainer import build_datasets

    dataset, _ = build_datasets(cfg)
    ours: list[tuple[float, float]] = []
    plain: list[tuple[float, float]] = []
    for repeat in range(args.repeats):
        ours += run_ours(cfg)[1:]
        plain += run_plain(cfg, dataset)[1:]
        logger.info("repeat %d: ours %s plain %s", repeat, ours[-1:], plain[-1:])

    def median(rows: list[tuple[float, float]], i: int) -> float:
        return statistics.median(row[i] for row in rows)

    ratio = median(ours, 1) / median(plain, 1)
    wall_ratio = median(ours, 0) / median(plain, 0)
    body = (
        f"Pipeline GRPO step vs a plain GRPOTrainer script with a constant reward: model "
        f"`{args.backend}` ({'SmolLM2-135M-Instruct + LoRA' if args.backend == 'cpu' else 'tiny 2-layer + LoRA'}), "
        f"env `{args.env}` plan prompts, G={g}, {g} completions/step, max completion "
        f"{args.completion_length} tokens, learning rate 0 (identical samples in both), "
        f"{args.repeats} alternating runs x {args.steps - 1} timed steps each.\n\n"
        f"| trainer | median step CPU time (s) | median step wall (s) | steps timed |\n"
        f"|---|---|---|---|\n"
        f"| ours (train_grpo pipeline) | {median(ours, 1):.2f} | {median(ours, 0):.2f} | {len(ours)} |\n"
        f"| plain GRPOTrainer | {median(plain, 1):.2f} | {median(plain, 0):.2f} | {len(plain)} |\n\n"
        f"Ratio ours/plain (CPU time): **{ratio:.3f}** (target <= 1.10); wall-time ratio "
        f"{wall_ratio:.3f} (wall time on a shared machine also counts other processes).\n\n"
        f"Command: `python benchmarks/bench_train_cpu.py --backend {args.backend} --env {args.env}"
        f" --steps {args.steps} --repeats {args.repeats} --generations {g}"
        f" --completion-length {args.completion_length}`. Machine: {machine()}.\n"
    )
    logger.info("\n%s", body)
    if not args.no_write:
        write_section("bench_train_cpu", body)
    return 0 if ratio <= 1.10 else 1


if __name__ == "__main__":
    raise SystemExit(main())
