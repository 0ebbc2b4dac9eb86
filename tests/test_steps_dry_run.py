"""``python train_grpo.py --dry-run --mode steps --eval-cuts N``: configs/cpu_steps.yaml (AML easy,
compact styles, fixed context) with the dry run's sizes.

The steps-mode run goes through the decision-blind warm start and TRL's GRPOTrainer on decision-cut
prompts (assistant tool calls and tool results in the prompt), saves an adapter that reloads, and
ends with the held-out before/after table the README's main command prints.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_steps_dry_run_trains_and_prints_the_before_after_table(tmp_path: Path) -> None:
    out = tmp_path / "dry-steps"
    command = [
        sys.executable,
        str(ROOT / "train_grpo.py"),
        "--dry-run",
        "--mode",
        "steps",
        "--sft-warmup",
        "1",
        "--eval-cuts",
        "2",
        "--output-dir",
        str(out),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "COLUMNS": "200"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads((out / "run_info.json").read_text())
    assert info["global_step"] == 2 and info["mode"] == "steps"
    assert (out / "final/adapter_model.safetensors").exists()
    with open(out / "log_history.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("rewards/grade_reward/mean")]
    assert len(rows) == 2
    table = json.loads((out / "before_after.json").read_text())
    assert list(table) == ["untrained", "trained", "reference", "always_close", "always_file"]
    for stage, result in table.items():
        assert result["summary"]["episodes"] == 2, stage
    assert table["reference"]["summary"]["decision_accuracy"] == 1.0
    printed = done.stdout + done.stderr
    assert "held-out decision cuts" in printed and "always_file" in printed
