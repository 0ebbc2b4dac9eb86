"""Format warm start: a few SFT steps on the honest heuristic's plans before GRPO.

A small model at the start of GRPO rarely writes a parseable tool call, so every completion in a
group scores the same and the group teaches nothing (``frac_reward_zero_std`` = 1). The warm start
plays the registered ``heuristic`` policy (it reads observations only, never the hidden truth) on the
very prompts of the training dataset (train seeds only, so no evaluation world leaks in), renders
each played episode as a plan-mode completion, and runs TRL's SFTTrainer for N steps on those
prompt/completion pairs (loss on the completion only). The same LoRA model then goes on to GRPO.
Plan mode only: the interactive mode's multi-turn format is learned from tool results instead.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

SFT_LEARNING_RATE = 1e-4
"""LoRA SFT on a few hundred tokens of plans: a rate ~5x GRPO's learns the format in tens of steps."""


def heuristic_examples(dataset: Any) -> Any:
    """Prompt/completion rows: each training prompt with the heuristic's plan for its episode."""
    import datasets

    from env.registry import make, policies
    from env.rollout import play
    from pipeline.prompts import render_completion

    envs: dict[str, Any] = {}
    rows = []
    for row in dataset:
        name = row["env"]
        env = envs.setdefault(name, make(name))
        episode = play(
            env, policies(name)["heuristic"](row["seed"]), row["task"] or None, row["seed"]
        )
        rows.append(
            {
                "prompt": row["prompt"],
                "completion": [{"role": "assistant", "content": render_completion(episode.plan)}],
                "grade": episode.report.grade.total,
            }
        )
    return datasets.Dataset.from_list(rows)


def sft_warmup(
    model: Any, tokenizer: Any, dataset: Any, steps: int, cfg: Any, grpo_args: Any
) -> dict[str, Any]:
    """Run ``steps`` SFT steps on the heuristic's plans; returns the SFT log summary.

    Precision follows the GRPO run's (``grpo_args``): accelerate allows one setting per process."""
    from trl import SFTConfig, SFTTrainer

    examples = heuristic_examples(dataset).remove_columns("grade")
    t = cfg.training
    args = SFTConfig(
        output_dir=str(Path(cfg.output_dir) / "sft_warmup"),
        max_steps=steps,
        per_device_train_batch_size=max(1, t.get("per_device_train_batch_size", 4) // 2),
        learning_rate=SFT_LEARNING_RATE,
        lr_scheduler_type="constant",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=t.get("seed", 42),
        completion_only_loss=True,
        max_length=None,  # AML plan prompts are ~1.5k tokens: never cut the completion off
        use_cpu=cfg.model.backend in ("cpu", "tiny"),
        bf16=grpo_args.bf16,
        fp16=grpo_args.fp16,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=examples, processing_class=tokenizer)
    result = trainer.train()
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    logger.info("SFT warm start: %d steps, loss %s -> %s", steps, losses[:1], losses[-1:])
    return {
        "steps": trainer.state.global_step,
        "losses": losses,
        "train_loss": result.training_loss,
    }
