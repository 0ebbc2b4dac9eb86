"""Training runs end to end: Ctrl-C checkpoint + resume with the same data order, the two-process
distributed path, the dry run with the configured CPU model, and the artefacts a run leaves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from transformers import TrainerCallback

from pipeline.training.config import load_config
from pipeline.training.trainer import PROMPT_LOG, RUN_INFO, newest_checkpoint, train

ROOT = Path(__file__).resolve().parents[1]
ENV_NAME = "support"  # a small registered environment keeps prompts short
TINY = [
    "model.backend=tiny",
    f"data.envs=[{ENV_NAME}]",
    "data.n_train=16",
    "training.num_generations=2",
    "training.per_device_train_batch_size=4",
    "training.max_completion_length=16",
    "training.save_steps=100",
    "training.logging_steps=1",
    "logging.log_completions=false",
]


def _offline_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}


class CtrlCAfterStep(TrainerCallback):
    """Sends this process a real SIGINT when a given step ends (what a user's Ctrl-C does)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGINT)


def _seen(output_dir: Path) -> list[tuple[int, list[int]]]:
    rows = [json.loads(line) for line in (output_dir / PROMPT_LOG).read_text().splitlines()]
    return [(row["step"], row["seed"]) for row in rows]


@pytest.mark.slow
def test_ctrl_c_saves_a_checkpoint_and_resume_continues_with_the_same_data(tmp_path: Path) -> None:
    reference = load_config(ROOT / "configs/cpu.yaml", [*TINY, f"output_dir={tmp_path / 'ref'}"])
    reference.training["max_steps"] = 4
    full = train(reference)
    assert full.global_step == 4 and not full.interrupted

    cut = load_config(ROOT / "configs/cpu.yaml", [*TINY, f"output_dir={tmp_path / 'cut'}"])
    cut.training["max_steps"] = 4
    stopped = train(cut, extra_callbacks=[CtrlCAfterStep(1)])
    assert stopped.interrupted and stopped.global_step == 2
    assert newest_checkpoint(cut.output_dir).name == "checkpoint-2"

    resumed = train(cut, resume=True)
    assert resumed.resumed_from.endswith("checkpoint-2")
    assert resumed.global_step == 4
    info = json.loads((Path(cut.output_dir) / RUN_INFO).read_text())
    assert info["global_step"] == 4 and info["resumed_from"].endswith("checkpoint-2")
    assert _seen(Path(cut.output_dir)) == _seen(Path(reference.output_dir))


@pytest.mark.slow
def test_two_process_cpu_run_trains_with_world_size_two(tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        str(ROOT / "train_grpo.py"), "--dry-run", "--output-dir", str(out),
        *[arg for item in TINY for arg in ("--set", item)],
        "--set", "training.per_device_train_batch_size=2",
    ]  # fmt: skip
    env = {**_offline_env(), "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads((out / RUN_INFO).read_text())
    assert info["world_size"] == 2
    assert info["distributed_type"] == "DistributedType.MULTI_CPU"
    assert info["global_step"] == 2
    ranks = {json.loads(line)["rank"] for line in (out / PROMPT_LOG).read_text().splitlines()}
    assert ranks == {0, 1}


@pytest.mark.slow
def test_dry_run_with_the_configured_cpu_model_trains_saves_and_reloads(tmp_path: Path) -> None:
    out = tmp_path / "dry"
    command = [sys.executable, str(ROOT / "train_grpo.py"), "--dry-run", "--output-dir", str(out)]
    done = subprocess.run(
        command, cwd=ROOT, env=_offline_env(), capture_output=True, text=True, timeout=2400
    )
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads((out / RUN_INFO).read_text())
    assert info["global_step"] == 2 and info["backend"] == "cpu"
    assert "reloaded with PEFT: {'lora_tensors'" in done.stderr
    assert "would push to" in done.stderr
    for name in ("final/adapter_model.safetensors", "final/README.md", "checkpoint-2"):
        assert (out / name).exists(), name
    header = (out / "log_history.csv").read_text().splitlines()[0]
    assert "rewards/grade_reward/mean" in header
    assert "decision/split_groups" in header and "decision/decided_rate" in header
    assert (out / "reward_curves.png").stat().st_size > 1000


def test_history_plots_decision_shares_under_the_rewards(tmp_path: Path) -> None:
    from PIL import Image

    from pipeline.training.trainer import write_history

    rows = [
        {"step": s, "reward": 0.1 * s, "rewards/grade_reward/mean": -1 + 0.2 * s}
        | {"decision/file_sar_share": 1 - 0.1 * s, "decision/split_groups": 0.5}
        for s in (1, 2, 3)
    ]
    _, png = write_history(rows, tmp_path)
    assert Image.open(png).size[1] == 900  # two 4.5-inch panels at 100 dpi
    csv_header = (tmp_path / "log_history.csv").read_text().splitlines()[0]
    assert "decision/split_groups" in csv_header
    _, png = write_history(
        [{k: v for k, v in r.items() if "decision" not in k} for r in rows], tmp_path
    )
    assert Image.open(png).size[1] == 450


def test_init_adapter_starts_the_run_from_a_saved_adapter(tmp_path: Path) -> None:
    import torch

    import train_grpo
    from pipeline.training.model import load_model_and_tokenizer
    from pipeline.training.trainer import build_trainer

    cfg = load_config(
        ROOT / "configs/cpu.yaml", [*TINY, "training.max_steps=1", f"output_dir={tmp_path / 'run'}"]
    )
    saved, _ = load_model_and_tokenizer(cfg.model, cfg.peft)
    with torch.no_grad():
        for name, param in saved.named_parameters():
            if "lora_B" in name:
                param.fill_(0.01)  # a fresh LoRA starts at B = 0
    saved.save_pretrained(str(tmp_path / "warm"))
    bundle = build_trainer(cfg, init_adapter=tmp_path / "warm")
    lora_b = [p for n, p in bundle.model.named_parameters() if "lora_B" in n]
    assert lora_b and all(torch.all(p == 0.01) for p in lora_b)
    result = train(cfg, init_adapter=tmp_path / "warm")
    assert result.global_step == 1
    info = json.loads((tmp_path / "run" / RUN_INFO).read_text())
    assert info["init_adapter"] == str(tmp_path / "warm")
    missing = train_grpo.main(["--init-adapter", str(tmp_path / "nowhere"), *_sets(TINY)])
    assert missing == 2


def _sets(overrides: list[str]) -> list[str]:
    return [arg for item in overrides for arg in ("--set", item)]
