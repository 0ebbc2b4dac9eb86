"""benchmarks/gpu_smoke.sh --offline: the path a CUDA machine without internet or weights runs.

The shapes are Qwen2.5's published ones (parameter counts checked on the meta device, no memory),
and the whole script runs on CPU with the 2-layer ``tiny`` shape (GPU_SMOKE_DEVICE=cpu): random
weights, train_grpo.py's transformers backend with LoRA and TRL's generation in steps mode, two
GRPO steps, then the printed figures.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_smoke_offline

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("shape", "parameters"),
    [("qwen2.5-1.5b", 1_543_714_304), ("qwen2.5-7b", 7_615_616_512)],
)
def test_shapes_are_qwen2_5_parameter_counts(shape: str, parameters: int) -> None:
    import torch
    from transformers import Qwen2ForCausalLM

    config = gpu_smoke_offline.qwen2_config(shape, gpu_smoke_offline.tokenizer())
    with torch.device("meta"):
        model = Qwen2ForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) == parameters


@pytest.mark.slow
def test_offline_mode_runs_end_to_end_on_cpu(tmp_path: Path) -> None:
    env = {
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHON": sys.executable,
        "GPU_SMOKE_DEVICE": "cpu",
        "OFFLINE_OUT": str(tmp_path / "out"),
        **{k: v for k, v in os.environ.items() if k in ("HF_HOME", "FINCRIME_GRPO_CACHE")},
    }
    proc = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_smoke.sh"), "--offline"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    out = proc.stdout
    assert "built tiny:" in out and "random weights" in out
    figures = [
        json.loads(x[len("FIGURES ") :]) for x in out.splitlines() if x.startswith("FIGURES ")
    ]
    assert len(figures) == 1, out[-2000:]
    fig = figures[0]
    assert fig["run"] == "tiny" and fig["steps"] == 2
    assert fig["median_step_s"] > 0 and fig["tokens_per_s"] > 0
    assert fig["peak_gpu_memory_gb"] is None  # CPU: no GPU figure is invented
    run = tmp_path / "out" / "tiny"
    info = json.loads((run / "run_info.json").read_text())
    assert info["backend"] == "transformers" and info["mode"] == "steps"
    assert (run / "final" / "adapter_config.json").is_file()  # LoRA was trained and saved
    assert not (tmp_path / "out" / "tiny-model").exists()  # random weights removed
    assert "offline GPU smoke test passed" in out
