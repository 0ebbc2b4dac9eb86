"""Dry runs against two environment server processes, one of which crashes mid-run (issue 25).

``python train_grpo.py --dry-run --set env.urls=[URL1,URL2]`` in plan, steps and interactive mode,
with the tiny model: one server is a real ``env.server`` app under uvicorn that exits hard
(``os._exit``) on its second episode request, so the run has to replay that row or episode on the
other server. The run must finish, every completion's rewards must equal those of the same dry run
in-process, and both servers must have served the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from env.server import free_port

from conftest import wait_for_health

ROOT = Path(__file__).resolve().parents[1]
ENV = "support"
REWARDS = [
    "format_reward",
    "investigation_reward",
    "execution_reward",
    "grade_reward",
    "os_mechanics_reward",
    "decision_reward",
]

# An env.server app that counts its episode requests (/replay posts, /ws sessions) in a file and,
# given a limit, dies like a crashed machine on the request after it.
SERVER = """
import os, sys
import uvicorn
from env.server import create_env_app

env, port, limit, counter = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
app = create_env_app(env)
seen = 0

async def served(scope, receive, send):
    global seen
    if scope["type"] in ("http", "websocket") and scope.get("path") in ("/replay", "/ws"):
        seen += 1
        if 0 <= limit < seen:
            os._exit(1)
        with open(counter, "w") as handle:
            handle.write(str(seen))
    await app(scope, receive, send)

uvicorn.run(served, host="127.0.0.1", port=port, log_level="warning")
"""


def _environ() -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "PYTHONPATH": str(ROOT),
    }


def _server(port: int, limit: int, counter: Path) -> subprocess.Popen:
    command = [sys.executable, "-c", SERVER, ENV, str(port), str(limit), str(counter)]
    proc = subprocess.Popen(command, cwd=ROOT, env=_environ())
    try:
        return wait_for_health(proc, port)
    except RuntimeError as exc:
        raise AssertionError(str(exc)) from exc


def _dry_run(mode: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(ROOT / "train_grpo.py"), "--dry-run", "--mode", mode]
    command += ["--output-dir", str(out), "--set", "model.backend=tiny"]
    command += ["--set", f"data.envs=[{ENV}]", "--set", "logging.plots=false", *extra]
    done = subprocess.run(
        command, cwd=ROOT, env=_environ(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _completions(out: Path) -> pd.DataFrame:
    frames = [pd.read_parquet(path) for path in sorted((out / "completions").glob("*.parquet"))]
    table = pd.concat(frames, ignore_index=True)
    return table[["step", "prompt", "completion", *REWARDS]]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["plan", "steps", "interactive"])
def test_dry_run_on_two_servers_survives_a_crash_with_in_process_rewards(
    mode: str, tmp_path: Path
) -> None:
    in_process = _dry_run(mode, tmp_path / "local")
    assert "environments on servers" not in in_process.stderr
    ports = [free_port(), free_port()]
    counters = [tmp_path / "served-0", tmp_path / "served-1"]
    dying = _server(ports[0], 1, counters[0])  # serves one episode request, then crashes
    steady = _server(ports[1], -1, counters[1])
    try:
        urls = ",".join(f"http://127.0.0.1:{port}" for port in ports)
        remote = _dry_run(mode, tmp_path / "remote", "--set", f"env.urls=[{urls}]")
        assert dying.wait(timeout=10) == 1, "the first server crashed during the run"
        assert steady.poll() is None
    finally:
        for proc in (dying, steady):
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    assert "environments on servers" in remote.stderr
    assert "trying another server" in remote.stderr
    assert int(counters[0].read_text()) == 1 and int(counters[1].read_text()) >= 2
    expected, served = _completions(tmp_path / "local"), _completions(tmp_path / "remote")
    assert len(served) == len(expected) == 4
    pd.testing.assert_frame_equal(served, expected)
