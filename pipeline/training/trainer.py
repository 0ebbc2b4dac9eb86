"""Trainer assembly: config -> datasets, model, rewards -> TRL GRPOTrainer -> train -> artefacts.

One run: build the prompt datasets from seeded episodes (``pipeline.data.dataset``), load the model for
the configured backend (``pipeline.training.model``), take the decomposed reward functions and their weights
(``rewards``), and hand them to TRL's GRPOTrainer (plan mode), or additionally the environment
adapters (``pipeline.training.interactive``, interactive mode) so the model sees every tool result. TRL does
the learning; this module adds what a run needs around it: a Ctrl-C that saves a checkpoint before
exiting, resume from the newest checkpoint with the same data order, a record of which episodes each
step trained on, a ``run_info.json`` (world size, steps, timing), and at the end a CSV of the log
history and a PNG of the reward curves per component.
"""

from __future__ import annotations

import csv
import functools
import json
import logging
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from pipeline.training.config import TrainConfig
from pipeline.training.memory import release_callbacks

logger = logging.getLogger(__name__)

PROMPT_LOG = "prompts_seen.jsonl"
RUN_INFO = "run_info.json"
FINAL_DIR = "final"


class GracefulInterrupt(TrainerCallback):
    """First Ctrl-C: finish the current step, save a checkpoint, stop. Second Ctrl-C: abort."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None

    def install(self) -> None:
        """Take over SIGINT (main thread only; a no-op elsewhere)."""
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread
            self._previous = None

    def uninstall(self) -> None:
        """Give SIGINT back to whoever had it."""
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        logger.warning("Ctrl-C: saving a checkpoint after this step (press again to abort)")

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
        return control


def record_prompts(func: Callable[..., list], path: Path) -> Callable[..., list]:
    """Wrap a reward function so every call appends the batch's (step, env, task, seed) to
    ``path``: an audit of which episodes each step trained on (and the resume test's evidence)."""

    @functools.wraps(func)
    def wrapper(prompts: Any, completions: Any, **kwargs: Any) -> list:
        state = kwargs.get("trainer_state")
        entry = {
            "step": getattr(state, "global_step", None),
            "rank": int(os.environ.get("RANK", "0")),
            "env": list(kwargs.get("env", [])),
            "task": list(kwargs.get("task", [])),
            "seed": [int(s) for s in kwargs.get("seed", [])],
        }
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
        return func(prompts, completions, **kwargs)

    return wrapper


def newest_checkpoint(output_dir: str | Path) -> Path | None:
    """The ``checkpoint-N`` folder with the largest N, or None."""
    folders = [p for p in Path(output_dir).glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    return max(folders, key=lambda p: int(p.name.split("-")[-1])) if folders else None


def build_datasets(cfg: TrainConfig) -> tuple[Any, Any | None]:
    """Train (and optional eval) prompt datasets; seeds from disjoint splits."""
    from pipeline.data.dataset import build_dataset

    d = cfg.data
    steps = {"cuts": d.cuts, "detour": d.detour, "result_style": d.result_style}
    style = d.prompt_style
    train = build_dataset(
        d.envs, d.tasks, d.n_train, "train", d.seed_offset, d.mode, style, **steps
    )
    evaluation = (
        build_dataset(d.envs, d.tasks, d.n_eval, "eval", 0, d.mode, style, **steps)
        if d.n_eval > 0
        else None
    )
    if d.balance:
        from pipeline.data.balance import balanced

        seed = int(cfg.training.get("seed", 42))
        train = type(train).from_list(balanced(train.to_list(), seed), features=train.features)
    if d.mode == "interactive" and len(set(d.envs)) > 1:
        from pipeline.training.interactive import add_environment_column

        train = add_environment_column(train)
        evaluation = add_environment_column(evaluation) if evaluation is not None else None
    return train, evaluation


def build_grpo_config(cfg: TrainConfig, reward_weights: list[float]) -> Any:
    """GRPOConfig from the ``training`` section plus the fields other sections own."""
    from trl import GRPOConfig

    fields = dict(cfg.training)
    fields.update(
        output_dir=cfg.output_dir,
        report_to=[] if cfg.logging.report_to == "none" else [cfg.logging.report_to],
        log_completions=cfg.logging.log_completions,
        reward_weights=reward_weights,
    )
    if cfg.data.balance:  # the balanced order is the point (pipeline/data/balance.py)
        fields["shuffle_dataset"] = False
    if cfg.logging.project:
        fields.setdefault("project", cfg.logging.project)  # trackio reads TrainingArguments.project
        os.environ.setdefault("WANDB_PROJECT", cfg.logging.project)
        os.environ.setdefault("TRACKIO_PROJECT", cfg.logging.project)
    if cfg.model.on_cpu:
        fields.setdefault("use_cpu", True)
        # TRL defaults to bf16 autocast and gradient checkpointing. A CPU without bf16 units
        # emulates bf16 matmuls (~5x slower than fp32 here) and a 135M model needs no activation
        # savings, so both default off on the CPU (an explicit config value still wins).
        fields.setdefault("bf16", False)
        fields.setdefault("gradient_checkpointing", False)
    return GRPOConfig(**fields)


@dataclass
class TrainerBundle:
    """What ``build_trainer`` assembled (the trainer and the pieces a caller may inspect)."""

    trainer: Any
    model: Any
    tokenizer: Any
    train_dataset: Any
    interrupt: GracefulInterrupt
    reward_names: list[str] = field(default_factory=list)


def build_trainer(
    cfg: TrainConfig,
    extra_callbacks: list[Any] | None = None,
    sft_steps: int = 0,
    init_adapter: str | os.PathLike | None = None,
) -> TrainerBundle:
    """Assemble TRL's GRPOTrainer for ``cfg`` (no training yet). ``init_adapter`` (a saved LoRA
    adapter folder) starts the model from an earlier run's adapter, e.g. interactive GRPO from a
    plan-mode warm start; ``sft_steps`` > 0 then runs the heuristic SFT warm start of the run's
    mode (pipeline/training/warmup.py) on the same model."""
    from trl import GRPOTrainer

    from pipeline.training.model import load_model_and_tokenizer
    from rewards import build_reward_functions

    Path(cfg.output_dir).mkdir(parents=True, exist_ok=True)
    train, evaluation = build_datasets(cfg)
    funcs, weights = build_reward_functions(cfg.rewards.weights or None)
    funcs = [record_prompts(funcs[0], Path(cfg.output_dir) / PROMPT_LOG), *funcs[1:]]
    args = build_grpo_config(cfg, weights)
    model, tokenizer = load_model_and_tokenizer(cfg.model, cfg.peft, cfg.data.prompt_style)
    if init_adapter is not None:
        from pipeline.training.model import load_adapter_weights

        copied = load_adapter_weights(model, init_adapter)
        logger.info("started from adapter %s (%d tensors)", init_adapter, copied)
    if sft_steps > 0:
        from pipeline.training.warmup import sft_warmup

        sft_warmup(model, tokenizer, train, sft_steps, cfg, args)
    kwargs: dict[str, Any] = {}
    if cfg.data.mode == "interactive":
        from pipeline.training.interactive import environment_factory

        # The decomposed rewards already score the grade; get_reward would count it twice.
        with_reward = cfg.rewards.weights.get("grade", 1.0) == 0.0
        kwargs["environment_factory"] = environment_factory(cfg.data.envs, with_reward=with_reward)
    interrupt = GracefulInterrupt()
    if cfg.model.on_cpu:
        from pipeline.decoding.trainer_sampling import fast_sampling_trainer, terminal_tools

        plan = cfg.data.mode in ("plan", "steps")  # replies that end at their decision
        terminal = terminal_tools(cfg.data.envs) if plan else None
        branches = cfg.data.decision_branches
        GRPOTrainer = fast_sampling_trainer(GRPOTrainer, terminal, branches)  # noqa: N806
        credit = cfg.rewards.branch_credit
        if credit != "total":
            from pipeline.training.branch_credit import branch_credit_trainer

            held = cfg.rewards.decision_rate == "held"  # it weighs by d + offset itself
            tokens = credit != "decision"
            likelihood = credit == "decision_likelihood" and not held
            GRPOTrainer = branch_credit_trainer(GRPOTrainer, tokens, likelihood)  # noqa: N806
            if held:
                from pipeline.training.rate_hold import rate_hold_trainer

                GRPOTrainer = rate_hold_trainer(GRPOTrainer, cfg.rewards.rate_lr)  # noqa: N806
    if not cfg.model.context_grad:
        from pipeline.training.context_grad import context_grad_trainer

        reuse = 1
        if cfg.model.context_reuse == "generation":  # every optimizer step on those samples
            micro = args.num_iterations * args.steps_per_generation
            reuse = max(1, math.ceil(micro / args.gradient_accumulation_steps))
        GRPOTrainer = context_grad_trainer(GRPOTrainer, reuse)  # noqa: N806 (TRL's class)
    # A CPU run's heaps keep what each step frees: handed back before the next step's peak.
    released = release_callbacks(cfg.model)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=train,
        eval_dataset=evaluation,
        processing_class=tokenizer,
        callbacks=[interrupt, *released, *(extra_callbacks or [])],
        **kwargs,
    )
    names = [getattr(f, "__name__", str(f)) for f in funcs]
    return TrainerBundle(trainer, model, tokenizer, train, interrupt, names)


@dataclass
class RunResult:
    """What a finished (or interrupted) run produced."""

    output_dir: Path
    final_dir: Path
    global_step: int
    interrupted: bool
    resumed_from: str | None
    seconds: float
    world_size: int
    history_csv: Path | None = None
    curves_png: Path | None = None


def train(
    cfg: TrainConfig,
    resume: bool = False,
    extra_callbacks: list | None = None,
    sft_steps: int = 0,
    init_adapter: str | os.PathLike | None = None,
) -> RunResult:
    """Train, save the final adapter/model to ``output_dir/final`` and write the artefacts.

    A resumed run skips the SFT warm start and ``init_adapter``: its checkpoint already holds the
    adapter they produced."""
    checkpoint = newest_checkpoint(cfg.output_dir) if resume else None
    start_from = None if checkpoint else init_adapter
    bundle = build_trainer(cfg, extra_callbacks, 0 if checkpoint else sft_steps, start_from)
    trainer = bundle.trainer
    if resume and checkpoint is None:
        logger.warning("--resume: no checkpoint in %s, starting from step 0", cfg.output_dir)
    start = time.perf_counter()
    bundle.interrupt.install()
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    finally:
        bundle.interrupt.uninstall()
    seconds = time.perf_counter() - start
    out = Path(cfg.output_dir)
    final = out / FINAL_DIR
    trainer.save_model(str(final))
    result = RunResult(
        output_dir=out,
        final_dir=final,
        global_step=trainer.state.global_step,
        interrupted=bundle.interrupt.requested,
        resumed_from=str(checkpoint) if checkpoint else None,
        seconds=seconds,
        world_size=trainer.accelerator.num_processes,
    )
    if trainer.is_world_process_zero():
        bundle.tokenizer.save_pretrained(str(final))
        if cfg.logging.plots:
            result.history_csv, result.curves_png = write_history(trainer.state.log_history, out)
        info = {
            "global_step": result.global_step,
            "world_size": result.world_size,
            "distributed_type": str(trainer.accelerator.distributed_type),
            "interrupted": result.interrupted,
            "resumed_from": result.resumed_from,
            "train_seconds": round(seconds, 2),
            "reward_functions": bundle.reward_names,
            "mode": cfg.data.mode,
            "backend": cfg.model.backend,
            "sft_warmup_steps": 0 if checkpoint else sft_steps,
            "init_adapter": str(start_from) if start_from else None,
            "peak_gpu_memory_gb": _peak_gpu_memory_gb(),
        }
        (out / RUN_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return result


def _peak_gpu_memory_gb() -> float | None:
    """Peak memory torch allocated on this GPU during the run (None on CPU)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 2)


def write_history(log_history: list[dict[str, Any]], out: Path) -> tuple[Path, Path | None]:
    """``log_history.csv`` (one row per logged step) and ``reward_curves.png`` (mean reward of
    each component and the total, per step; below it the ``decision/`` shares, when logged)."""
    csv_path = out / "log_history.csv"
    columns = sorted({key for row in log_history for key in row})
    with open(csv_path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(log_history)
    curves = [c for c in columns if c.startswith("rewards/") and c.endswith("/mean")]
    curves += [c for c in ("reward",) if c in columns]
    rows = [r for r in log_history if "step" in r and any(c in r for c in curves)]
    if not rows:
        return csv_path, None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    decisions = [c for c in columns if c.startswith("decision/")]
    panels = 2 if decisions else 1
    fig, axes = plt.subplots(panels, 1, figsize=(8, 4.5 * panels), squeeze=False)
    _plot_columns(axes[0][0], rows, curves, "mean reward", "GRPO reward per component")
    if decisions:  # what the sampled replies decided: drift to one decision shows here first
        title = "Decisions per step (split_groups: groups whose replies differ in rightness)"
        _plot_columns(axes[1][0], rows, decisions, "share", title)
    png_path = out / "reward_curves.png"
    fig.tight_layout()
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return csv_path, png_path


def read_history(path: Path) -> list[dict[str, Any]]:
    """``write_history``'s ``log_history.csv`` back as TRL's log rows: numbers as floats, empty
    cells left out."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return [{k: _number(v) for k, v in row.items() if v != ""} for row in rows]


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text


def _plot_columns(ax: Any, rows: list[dict[str, Any]], columns: list[str], ylabel: str, title: str):
    for column in columns:
        points = [(r["step"], r[column]) for r in rows if r.get(column) is not None]
        if points:
            label = column.removeprefix("rewards/").removesuffix("/mean").removeprefix("decision/")
            ax.plot(*zip(*points, strict=True), marker="o", label=label)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
