"""configs/cpu_interactive.yaml: a valid interactive run whose budget fits an AML-easy case."""

from __future__ import annotations

from pathlib import Path

from pipeline.training.config import load_config
from pipeline.training.trainer import build_grpo_config

ROOT = Path(__file__).resolve().parents[1]


def test_cpu_interactive_config_builds_a_multi_turn_grpo_config():
    cfg = load_config(ROOT / "configs/cpu_interactive.yaml")
    assert cfg.data.mode == "interactive" and cfg.model.chat_template == "qwen2_5"
    args = build_grpo_config(cfg, [1.0] * 5)
    assert args.max_tool_calling_iterations >= 8  # the AML-easy oracle makes ~8 calls
    assert args.max_completion_length >= 2048  # tool results count against this budget
    assert args.mask_truncated_completions
    assert args.gradient_checkpointing  # multi-turn rollouts on CPU ran out of 24 GB without it
