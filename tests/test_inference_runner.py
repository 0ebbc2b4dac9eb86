"""scripts/inference.py for real: SmolLM2 behind ``transformers serve`` (scripts/serve_openai.py),
the env behind env.server.

The model is tiny and untrained, so the test asserts the protocol, not the play: the exact
[START]/[STEP]/[END] lines, that the printed actions replayed in-process give the printed rewards
(the remote episode is the seeded one), and that a dead endpoint is retried, then reported.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi import FastAPI
from test_server_app import VaultEnv

from env.base import ToolCallAction

from conftest import ServerThread, serve

ROOT = Path(__file__).resolve().parents[1]
START = re.compile(r"^\[START\] task=(\S+) env=(\S+) model=(\S+)$")
STEP = re.compile(
    r"^\[STEP\] step=(\d+) action=(\w+)\((\{.*\})\) reward=(-?\d+\.\d\d) "
    r"done=(true|false) error=(.+)$"
)
END = re.compile(r"^\[END\] success=(true|false) steps=(\d+) score=(\d\.\d\d) rewards=(.*)$")


def run_runner(env_vars: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}",
        "HF_HUB_OFFLINE": "1",
        "ENV_NAME": "test_server_app:VaultEnv",
        **env_vars,
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "inference.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


@pytest.mark.slow
def test_runner_plays_smollm2_against_a_served_environment(tmp_path: Path):
    from test_transformers_serve import transformers_serve

    folder = tmp_path / "smollm2"
    with (
        transformers_serve("smollm2", folder) as llm_url,
        serve(VaultEnv) as env_url,
    ):
        proc = run_runner(
            {
                "API_BASE_URL": f"{llm_url}/v1",
                "MODEL_NAME": str(folder),
                "ENV_URL": env_url,
                "TASK": "small",
                "SEED": "4",
                "MAX_STEPS": "2",
                "MAX_TOKENS": "16",
            }
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert START.match(lines[0]).groups() == ("small", "vault", str(folder))
    steps = [STEP.match(line) for line in lines[1:-1]]
    assert steps and all(steps), lines
    end = END.match(lines[-1])
    assert end, lines[-1]
    assert int(end.group(2)) == len(steps) <= 2
    printed = [float(m.group(4)) for m in steps]
    assert end.group(4) == ",".join(f"{r:.2f}" for r in printed)
    local = VaultEnv()
    local.reset(seed=4, task="small")
    for match in steps:
        call = ToolCallAction(tool=match.group(2), arguments=json.loads(match.group(3)))
        assert f"{local.step(call).reward:.2f}" == match.group(4)


def test_runner_retries_a_slow_endpoint_then_reports_failure():
    hits: list[float] = []
    slow = FastAPI()

    @slow.post("/v1/chat/completions")
    async def _slow() -> dict:
        hits.append(time.monotonic())
        await asyncio.sleep(3)
        return {}

    with ServerThread(slow) as url:
        started = time.monotonic()
        proc = run_runner(
            {
                "API_BASE_URL": f"{url}/v1",
                "MODEL_NAME": "any",
                "TIMEOUT_S": "0.5",
                "RETRIES": "1",
                "TASK": "large",
            },
            timeout=120,
        )
        elapsed = time.monotonic() - started
    lines = proc.stdout.strip().splitlines()
    assert lines == [
        "[START] task=large env=vault model=any",
        "[END] success=false steps=0 score=0.00 rewards=",
    ]
    assert proc.returncode == 1
    assert len(hits) == 2 and "episode stopped: APITimeoutError" in proc.stderr
    assert elapsed < 60


def test_runner_needs_a_model_name():
    proc = run_runner({}, timeout=120)
    assert proc.returncode == 2 and "MODEL_NAME" in proc.stderr
