"""The Colab notebook: its structure, and a headless CPU run with its smoke parameters."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "train_grpo_colab.ipynb"
SECTIONS = (
    "Install",
    "GPU check",
    "dataset",
    "Play one episode",
    "Load the model",
    "rewards",
    "Train",
    "Plot",
    "Evaluate after training",
    "Hub",
)


def _notebook() -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOK, as_version=4)


def test_notebook_has_every_section_and_a_parameters_cell() -> None:
    nb = _notebook()
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for section in SECTIONS:
        assert section in markdown, section
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "SMOKE = True" in tagged[0].source
    for cell in nb.cells:
        if cell.cell_type == "code":
            ast.parse(cell.source)  # every code cell is valid Python


def test_install_cell_keeps_colab_torch_and_gates_gpu_packages() -> None:
    install = next(c.source for c in _notebook().cells if "IN_COLAB =" in c.source)
    assert 'not line.startswith(("#", "torch"))' in install
    gpu_branch = install.split("if torch.cuda.is_available():", 1)[1]
    assert '"-r", "requirements-gpu.txt"' in gpu_branch  # pinned Unsloth, vLLM, bitsandbytes
    assert "requirements-gpu.txt" not in install.split("if torch.cuda.is_available():", 1)[0]


def test_notebook_runs_headless_on_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Smoke parameters: SmolLM2-135M, 1 SFT + 1 GRPO step, 1 eval seed before and after."""
    from nbclient import NotebookClient

    nb = _notebook()
    out_dir = tmp_path / "out"
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            cell.source += f'\nOUTPUT_DIR = "{out_dir}"\n'
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a shared 2-core machine: one thread spins less
    client = NotebookClient(
        nb, timeout=540, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    )
    client.execute()
    text = "\n".join(
        out.get("text", "") for c in nb.cells if c.cell_type == "code" for out in c.outputs
    )
    assert "untrained grade:" in text
    assert "steps: 1 |" in text
    assert "difference" in text and "push skipped" in text
    assert (out_dir / "final" / "adapter_config.json").exists()
    assert (out_dir / "before_after.png").read_bytes()[:4] == b"\x89PNG"
