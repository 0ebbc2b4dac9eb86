"""A trained LoRA adapter served by ``transformers serve`` on CPU, played by scripts/inference.py.

Nothing is replaced: a tiny Llama-shaped base (SmolLM2's tokenizer, random weights) is saved, a
non-zero LoRA adapter is saved on top of it, ``scripts/serve_openai.py`` merges it and execs
``transformers serve`` on 127.0.0.1, and ``scripts/inference.py`` plays a support episode through
``pipeline.evaluation.backends.OpenAIBackend`` until the environment's own step limit ends it. The merged
folder computes the adapter's logits (not the base's), and its tokenizer turns ``<tool_call>``
blocks into OpenAI tool calls.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from env.support.environment import SupportEnvironment
from scripts.serve_openai import prepare

from conftest import tiny_model

ROOT = Path(__file__).resolve().parents[1]

STEP = re.compile(r"^\[STEP\] step=(\d+) action=(\w+)\((\{.*\})\) reward=(-?\d+\.\d\d) done=(\w+) ")


class ShortSupport(SupportEnvironment):
    """The support environment with a 3-step limit, so an untrained model's episode ends soon."""

    name = "support_short"

    def __init__(self, config=None, **overrides):
        super().__init__(config, **{"max_steps": 3, **overrides})


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("serve")
    base, tokenizer = tiny_model(seed=3, style="full")
    base.save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(root / "base"), lora)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.fill_(0.05)  # a trained adapter changes the outputs
    model.save_pretrained(root / "adapter")
    tokenizer.save_pretrained(root / "adapter")
    return root / "adapter"


def test_prepare_merges_the_adapter_and_parses_tool_calls(adapter: Path, tmp_path: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = prepare(str(adapter), tmp_path / "merged")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in folder.iterdir()
    }
    base_dir = adapter.parent / "base"
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        merged = AutoModelForCausalLM.from_pretrained(folder)(ids).logits
        peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_dir), adapter)
        expected = peft(ids).logits
        base = AutoModelForCausalLM.from_pretrained(base_dir)(ids).logits
    assert torch.allclose(merged, expected, atol=1e-4)
    assert not torch.allclose(merged, base, atol=1e-3)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    reply = (
        'ok\n<tool_call>\n{"name": "check_policy", "arguments": {"topic": "refund"}}\n</tool_call>'
    )
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    parsed = tokenizer.parse_response(reply + "<|im_end|>", prefix=prompt)
    assert parsed["tool_calls"][0]["function"]["name"] == "check_policy"
    assert json.loads(json.dumps(parsed["tool_calls"][0]["function"]["arguments"])) == {
        "topic": "refund"
    }
    assert parsed["content"].strip() == "ok"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}",
        "HF_HUB_OFFLINE": "1",
        **{k: v for k, v in os.environ.items() if k in ("HF_HOME", "FINCRIME_GRPO_CACHE")},
    }


@contextmanager
def transformers_serve(model: str, folder: Path, ready_s: float = 180) -> Iterator[str]:
    """``scripts/serve_openai.py MODEL --out FOLDER`` (``transformers serve``) in a subprocess on
    a free loopback port; yields its URL once ``/health`` answers, stops it afterwards."""
    import httpx

    port, log_path = _free_port(), folder.with_suffix(".log")
    log = open(log_path, "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "serve_openai.py"), model]
        + ["--out", str(folder), "--port", str(port)],
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            if proc.poll() is not None:
                pytest.fail(f"server exited: {log_path.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve was not ready within {ready_s:.0f} s")
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()


@pytest.fixture(scope="module")
def served(adapter: Path):
    """The merged adapter behind ``transformers serve``."""
    folder = adapter.parent / "merged"
    with transformers_serve(str(adapter), folder) as url:
        yield url, folder


def test_inference_plays_an_episode_against_transformers_serve(served) -> None:
    url, folder = served
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "inference.py")],
        env={
            **_env(),
            "API_BASE_URL": f"{url}/v1",
            "MODEL_NAME": str(folder),
            "ENV_NAME": "test_transformers_serve:ShortSupport",
            "TASK": "easy",
            "SEED": "2",
            "MAX_STEPS": "10",
            "MAX_TOKENS": "8",
            "TIMEOUT_S": "120",
        },
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == f"[START] task=easy env=support_short model={folder}"
    steps = [STEP.match(line) for line in lines[1:-1]]
    assert len(steps) == 3 and all(steps), lines
    assert [m.group(5) for m in steps] == ["false", "false", "true"]  # the env's limit ended it
    assert lines[-1].startswith("[END] success=false steps=3 ")
