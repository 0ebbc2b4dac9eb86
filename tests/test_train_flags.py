"""train_grpo.py takes every trl.GRPOConfig field by its TRL flag name, on top of the YAML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import train_grpo
from pipeline.training.config import load_config

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "model.backend=tiny",
    "data.envs=[support]",
    "logging.log_completions=false",
]


def _sets(overrides: list[str]) -> list[str]:
    return [arg for item in overrides for arg in ("--set", item)]


def _config(argv: list[str]):
    args = train_grpo.parse_args(argv)
    overrides = train_grpo.collect_overrides(args, train_grpo.grpo_overrides(args.grpo_flags))
    return load_config(args.config, overrides)


def test_trl_flags_are_typed_by_trl_and_land_in_the_owning_section() -> None:
    cfg = _config(
        [
            "--learning_rate", "5e-6", "--num_generations", "2", "--bf16", "false",
            "--lr_scheduler_type", "cosine", "--max_grad_norm", "0.5", "--no_shuffle_dataset",
            "--report_to", "trackio", "--project", "flags", "--output_dir", "outputs/flags",
            "--log_completions", "false", "--hub_model_id", "me/agent", "--push_to_hub",
        ]
    )  # fmt: skip
    t = cfg.training
    assert t["learning_rate"] == 5e-6 and isinstance(t["learning_rate"], float)
    assert t["num_generations"] == 2 and t["bf16"] is False and t["shuffle_dataset"] is False
    assert t["lr_scheduler_type"] == "cosine" and t["max_grad_norm"] == 0.5
    assert cfg.logging.report_to == "trackio" and cfg.logging.project == "flags"
    assert cfg.logging.log_completions is False and cfg.output_dir == "outputs/flags"
    assert cfg.hub.push is True and cfg.hub.hub_model_id == "me/agent"
    yaml_default = load_config(ROOT / "configs/cpu.yaml").training
    assert t["max_completion_length"] == yaml_default["max_completion_length"]  # YAML kept


def test_later_sources_win_and_shortcuts_win_over_trl_flags() -> None:
    cfg = _config(
        ["--set", "training.learning_rate=1e-4", "--learning_rate", "2e-5", "--max_steps", "7",
         "--max-steps", "3"]
    )  # fmt: skip
    assert cfg.training["learning_rate"] == 2e-5  # TRL flag after --set
    assert cfg.training["max_steps"] == 3  # our shortcut last


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--learning_rat", "1e-5"], "did you mean --learning_rate"),
        (["--num_generations", "four"], "invalid int value"),
        (["--reward_weights", "1", "2"], "rewards.weights"),
        (["--num_generations", "3"], "not divisible by training.num_generations 3"),
    ],
)
def test_bad_flags_stop_before_anything_loads(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert train_grpo.main([*argv, *_sets(TINY)]) == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_dry_run_with_trl_flags_trains_with_them(tmp_path: Path) -> None:
    """``python train_grpo.py --dry-run --learning_rate 5e-6 --num_generations 4``, tiny model."""
    out = tmp_path / "dry"
    argv = ["--dry-run", "--learning_rate", "5e-6", "--num_generations", "4"]
    assert train_grpo.main([*argv, "--output-dir", str(out), *_sets(TINY)]) == 0
    args = torch.load(out / "checkpoint-2" / "training_args.bin", weights_only=False)
    assert args.learning_rate == 5e-6 and args.num_generations == 4
    state = json.loads((out / "checkpoint-2" / "trainer_state.json").read_text())
    rates = [row["learning_rate"] for row in state["log_history"] if "learning_rate" in row]
    assert rates and all(rate == pytest.approx(5e-6) for rate in rates)  # constant schedule
    batches = [json.loads(line) for line in (out / "prompts_seen.jsonl").read_text().splitlines()]
    # one group of 4 completions of one prompt, trained over the 2 steps in micro-batches of 2
    assert len(batches) == 1 and len(batches[0]["seed"]) == 4 and len(set(batches[0]["seed"])) == 1
    assert args.per_device_train_batch_size == 2 and args.steps_per_generation == 2
    assert (out / "final" / "adapter_model.safetensors").exists()
