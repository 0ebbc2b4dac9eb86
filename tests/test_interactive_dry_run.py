"""``python train_grpo.py --dry-run --mode interactive`` with the CPU default model (SmolLM2-135M).

The run goes through TRL's ``environment_factory`` with the generated adapters: the log must carry
TRL's tool metrics (only logged when the trainer has tools) next to the decomposed reward columns,
and the adapter must be saved and reload with PEFT like a plan-mode run.
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
def test_interactive_dry_run_trains_two_steps_with_tools_and_reloads(tmp_path: Path) -> None:
    out = tmp_path / "dry-interactive"
    command = [
        sys.executable,
        str(ROOT / "train_grpo.py"),
        "--dry-run",
        "--mode",
        "interactive",
        "--output-dir",
        str(out),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    info = json.loads((out / "run_info.json").read_text())
    assert info["global_step"] == 2 and info["backend"] == "cpu"
    assert "reloaded with PEFT: {'lora_tensors'" in done.stderr
    assert (out / "final/adapter_model.safetensors").exists()
    with open(out / "log_history.csv") as handle:
        rows = [row for row in csv.DictReader(handle) if row.get("tools/call_frequency")]
    assert len(rows) == 2, "TRL logs tools/* only when the environment's tools are in play"
    for row in rows:
        assert 0.0 <= float(row["tools/failure_frequency"]) <= 1.0
        assert row["rewards/grade_reward/mean"] != ""
