"""trackio, the documented tracker: a 2-step dry run (tiny model, SFT warm start first) logs both
the warm start and GRPO to a local trackio project, offline, and the metrics read back."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "fincrime-test"
READ_BACK = """
import json, sys
from trackio.sqlite_storage import SQLiteStorage
project = sys.argv[1]
runs = {run: SQLiteStorage.get_logs(project, run) for run in SQLiteStorage.get_runs(project)}
print(json.dumps(runs, default=str))
"""


def _run(command: list[str], trackio_dir: Path) -> subprocess.CompletedProcess[str]:
    """TRACKIO_DIR is read when trackio is imported: each side runs in its own process."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "TRACKIO_DIR": str(trackio_dir),
    }
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def test_dry_run_logs_warm_start_and_grpo_to_a_local_trackio_project(tmp_path: Path) -> None:
    out, store = tmp_path / "run", tmp_path / "trackio"
    sets = ["model.backend=tiny", "data.envs=[support]", "logging.log_completions=false"]
    done = _run(
        [
            sys.executable, str(ROOT / "train_grpo.py"), "--dry-run", "--sft-warmup", "2",
            "--output-dir", str(out), *[a for s in sets for a in ("--set", s)],
            "--report_to", "trackio", "--project", PROJECT,
        ],
        store,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert (store / f"{PROJECT}.db").is_file()  # local SQLite, nothing uploaded

    read = _run([sys.executable, "-c", READ_BACK, PROJECT], store)
    assert read.returncode == 0, read.stderr[-2000:]
    runs = json.loads(read.stdout)
    sft = [name for name in runs if name.startswith("run-sft-warmup-")]
    assert len(sft) == 1 and len(runs) == 2, list(runs)
    grpo = next(name for name in runs if name not in sft)

    sft_losses = {
        r["train/global_step"]: r["train/loss"] for r in runs[sft[0]] if "train/loss" in r
    }
    assert sorted(sft_losses) == [1, 2] and all(math.isfinite(v) for v in sft_losses.values())

    logged = {r["train/global_step"]: r for r in runs[grpo] if "train/reward" in r}
    assert sorted(logged) == [1, 2]
    with open(out / "log_history.csv", newline="") as handle:
        history = {int(r["step"]): r for r in csv.DictReader(handle) if r.get("reward")}
    for step, row in logged.items():  # the same numbers as the trainer's own log history
        for key in ("reward", "learning_rate", "rewards/format_reward/mean", "loss"):
            assert math.isclose(row[f"train/{key}"], float(history[step][key]), abs_tol=1e-9), key
