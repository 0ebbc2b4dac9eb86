"""Artefacts of the GPU, multi-GPU, Colab and Hub paths, checked on CPU against the libraries' code.

- ``configs/accelerate/fsdp2.yaml``: the environment ``accelerate launch`` derives from it must give
  a plugin whose state-dict type passes the test ``Trainer.save_model`` applies before it writes
  any weights (otherwise ``final/`` stays empty).
- The Colab notebook installs the GPU extras from ``requirements-gpu.txt``, never unpinned names.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
FSDP_FILES = sorted((ROOT / "configs" / "accelerate").glob("fsdp*.yaml"))


def _launch_environment(config_file: Path) -> dict[str, str]:
    """The variables ``accelerate launch --config_file FILE`` sets for its processes."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    args = launch_command_parser().parse_args(
        ["--config_file", str(config_file), str(ROOT / "train_grpo.py")]
    )
    args, _, _ = _validate_launch_command(args)
    return prepare_multi_gpu_env(args)


def test_save_model_still_writes_fsdp_weights_only_for_a_full_state_dict() -> None:
    """The condition the test below relies on, read from the installed transformers."""
    from transformers import Trainer

    source = inspect.getsource(Trainer.save_model)
    assert re.search(
        r'if "FULL_STATE_DICT" in str\(self\.accelerator\.state\.fsdp_plugin\.state_dict_type\)',
        source,
    ), "Trainer.save_model changed how it decides to save FSDP weights: revisit fsdp2.yaml"


@pytest.mark.parametrize("config_file", FSDP_FILES, ids=lambda p: p.name)
def test_fsdp_config_makes_save_model_write_full_weights(
    config_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from accelerate.utils import FullyShardedDataParallelPlugin

    env = _launch_environment(config_file)
    assert env["ACCELERATE_USE_FSDP"] == "true"
    for key, value in env.items():
        if key.startswith("FSDP_"):
            monkeypatch.setenv(key, value)
    plugin = FullyShardedDataParallelPlugin()  # reads the FSDP_* variables, as in each process
    # Trainer.save_model: `if "FULL_STATE_DICT" in str(fsdp_plugin.state_dict_type)`, else no save.
    assert "FULL_STATE_DICT" in str(plugin.state_dict_type), (
        f"{config_file.name}: {plugin.state_dict_type} makes Trainer.save_model write no weights"
    )


def test_fsdp_files_exist() -> None:
    assert FSDP_FILES, "configs/accelerate/fsdp*.yaml not found"


# ----- the notebook's install cell ------------------------------------------------------------


def _install_cell() -> str:
    nb = nbformat.read(ROOT / "notebooks" / "train_grpo_colab.ipynb", as_version=4)
    return next(c.source for c in nb.cells if "IN_COLAB =" in c.source)


def _pip_installs(source: str) -> list[list[str]]:
    """The argument lists (string constants and starred names) of every ``pip install`` call."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.List)):
            continue
        parts = []
        for element in node.args[0].elts:
            if isinstance(element, ast.Constant) and isinstance(element.value, str):
                parts.append(element.value)
            elif isinstance(element, ast.Starred) and isinstance(element.value, ast.Name):
                parts.append(f"*{element.value.id}")
        if "pip" in parts and "install" in parts:
            calls.append(parts[parts.index("install") + 1 :])
    return calls


def _requirement_names(path: Path) -> dict[str, str]:
    """Package name (lower case, ``_`` as ``-``) -> the requirement line of a requirements file."""
    names = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name = re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0]
            names[name.lower().replace("_", "-")] = line
    return names


def test_notebook_installs_gpu_extras_from_the_pinned_requirements_file() -> None:
    installs = _pip_installs(_install_cell())
    gpu = [args for args in installs if "requirements-gpu.txt" in args]
    assert gpu, f"no pip install of requirements-gpu.txt in the install cell: {installs}"
    assert all(args[args.index("requirements-gpu.txt") - 1] == "-r" for args in gpu)
    pinned = _requirement_names(ROOT / "requirements-gpu.txt")
    for name in ("unsloth", "vllm"):
        assert pinned[name].startswith(f"{name}=="), pinned[name]
    for args in installs:
        for arg in args:  # nothing is installed by bare name: only files, flags or pinned lines
            if arg.startswith(("-", "*")) or arg.endswith(".txt"):
                continue
            name = re.split(r"[=<>!~\[; ]", arg, maxsplit=1)[0].lower().replace("_", "-")
            assert "==" in arg or name in pinned, f"unpinned install of {arg!r}"


def test_every_gpu_requirement_is_pinned() -> None:
    for name, line in _requirement_names(ROOT / "requirements-gpu.txt").items():
        assert re.fullmatch(rf"{re.escape(name)}==[\w.]+", line.lower().replace("_", "-")), line
