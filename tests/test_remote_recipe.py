"""The multi-machine recipe of TRAINING.md and docs/SERVING.md, run as written where it can run.

The loopback rehearsal block is run by bash, verbatim except for free ports and the output folder:
two ``python -m env.server`` processes, the health poll, an interactive dry run with ``env.urls``,
``kill %1 %2``. The GPU command's flags and the YAML example build a valid config with those URLs;
the ``docker run`` lines set only variables the Dockerfile's CMD reads (the image itself is
tests/test_docker_image.py's); the ``/replay`` example of SERVING.md is answered by a server.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from env.server import create_env_app, free_port
from pipeline.training.config import build_config, load_config, read_yaml

from conftest import ServerThread

ROOT = Path(__file__).resolve().parents[1]
TRAINING = (ROOT / "TRAINING.md").read_text(encoding="utf-8")
SERVING = (ROOT / "docs/SERVING.md").read_text(encoding="utf-8")
SECTION = TRAINING.split("## Environments on other machines", 1)[1].split("\n## ", 1)[0]
SERVING_SECTION = SERVING.split("## Training against servers", 1)[1].split("\n## ", 1)[0]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_the_recipe_blocks_are_there() -> None:
    assert len(blocks(SECTION, "bash")) == 3 and len(blocks(SECTION, "yaml")) == 1
    assert "docker run" in blocks(SERVING_SECTION, "bash")[0]


def test_yaml_example_and_gpu_command_configure_the_servers() -> None:
    raw = read_yaml(blocks(SECTION, "yaml")[0])
    cfg = build_config({**raw, "model": {"backend": "tiny"}})
    assert cfg.env.urls == ["http://10.0.0.5:8000", "http://10.0.0.6:8000"]
    mapping = re.search(r"# with several data.envs: urls: (\{.*\})", blocks(SECTION, "yaml")[0])
    raw["env"]["urls"] = read_yaml(mapping.group(1))
    build_config({**raw, "data": {"envs": ["aml", "fraud"]}})

    gpu = blocks(SECTION, "bash")[1].replace("\\\n", " ")
    import train_grpo

    args = train_grpo.parse_args(shlex.split(gpu.split("train_grpo.py", 1)[1]))
    cfg = load_config(ROOT / args.config, train_grpo.collect_overrides(args))
    assert cfg.env.urls == ["http://10.0.0.5:8000", "http://10.0.0.6:8000"]


def test_docker_lines_set_what_the_image_reads() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    cmd = dockerfile.split("\nCMD ", 1)[1]
    runs = [
        line
        for text in (blocks(SECTION, "bash")[0], blocks(SERVING_SECTION, "bash")[0])
        for line in text.splitlines()
        if line.startswith("docker run")
    ]
    assert len(runs) == 2
    for line in runs:
        for name in re.findall(r"-e (\w+)=", line):
            assert f"${name}" in cmd, f"{name} is not read by the image's CMD"
        assert "-p 8000:8000" in line


def test_replay_example_is_answered() -> None:
    example = json.loads(blocks(SERVING_SECTION, "json")[0])
    with ServerThread(create_env_app(example["env"])) as url:
        answer = httpx.post(f"{url}/replay", json=example, timeout=30)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["prefix_steps"] == 1 and body["errors"] == [False]
        assert body["report"]["decision_reached"]
        wrong = httpx.post(f"{url}/replay", json={**example, "env": "fraud"}, timeout=30)
        assert wrong.status_code == 422 and wrong.json()["detail"]["kind"] == "ValueError"


@pytest.mark.slow
def test_loopback_rehearsal_runs_as_written(tmp_path: Path) -> None:
    script = blocks(SECTION, "bash")[2]
    ports = {"8001": str(free_port()), "8002": str(free_port())}
    for old, new in ports.items():
        script = script.replace(old, new)
    out = tmp_path / "run"
    script = script.replace("outputs/dry-run-servers", str(out))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    proc = subprocess.Popen(
        ["bash", "-e", "-c", script],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, output[-3000:]
    assert "environments on servers" in output
    info = json.loads((out / "run_info.json").read_text())
    assert info["global_step"] == 2 and info["mode"] == "interactive"
    for port in ports.values():  # `kill %1 %2` stopped both servers
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
