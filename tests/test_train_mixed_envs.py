"""A dataset mixing several environments trains in one run, in both modes (tiny model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.training.config import load_config
from pipeline.training.trainer import PROMPT_LOG, train

ROOT = Path(__file__).resolve().parents[1]
MIXED = [
    "model.backend=tiny",
    "data.envs=[aml, fraud, gang, support, ops]",
    "data.n_train=4",
    "training.max_steps=2",
    "training.num_generations=2",
    "training.per_device_train_batch_size=8",
    "training.max_completion_length=16",
    "training.save_steps=100",
    "training.logging_steps=1",
    "logging.log_completions=false",
    "logging.plots=false",
]


def _envs_seen(output_dir: Path) -> set[str]:
    rows = [json.loads(line) for line in (output_dir / PROMPT_LOG).read_text().splitlines()]
    return {env for row in rows for env in row["env"]}


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["plan", "interactive"])
def test_a_dataset_of_several_environments_trains_in_one_run(tmp_path: Path, mode: str) -> None:
    extra = ["training.max_tool_calling_iterations=2"] if mode == "interactive" else []
    cfg = load_config(
        ROOT / "configs/cpu.yaml", [*MIXED, *extra, f"data.mode={mode}", f"output_dir={tmp_path}"]
    )
    result = train(cfg)
    assert result.global_step == 2 and not result.interrupted
    assert len(_envs_seen(tmp_path)) >= 3, _envs_seen(tmp_path)
    assert (result.final_dir / "adapter_config.json").exists()
