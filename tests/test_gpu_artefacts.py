"""Artefacts of the GPU, multi-GPU, Colab and Hub paths, checked on CPU against the libraries' code.

- ``configs/accelerate/fsdp2.yaml``: the environment ``accelerate launch`` derives from it must give
  a plugin whose state-dict type passes the test ``Trainer.save_model`` applies before it writes
  any weights (otherwise ``final/`` stays empty).
- The Colab notebook installs the GPU extras from ``requirements-gpu.txt``, never unpinned names.
"""

from __future__ import annotations

import ast
import inspect
import json
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


# ----- merged 16-bit model --------------------------------------------------------------------


def _saved_tiny_adapter(folder: Path):
    """A tiny model with a non-zero LoRA adapter (as after training), saved to ``folder``."""
    import torch

    from pipeline.training.config import ModelSection, PeftSection
    from pipeline.training.model import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(ModelSection(backend="tiny"), PeftSection(r=4))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.05, generator=torch.Generator().manual_seed(len(name)))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model.eval()


@pytest.mark.parametrize(
    ("backend", "name", "base"),
    [
        ("bnb4bit", "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"),
        ("unsloth", "unsloth/Qwen2.5-7B-Instruct-bnb-4bit", "unsloth/Qwen2.5-7B-Instruct"),
        (
            "unsloth",
            "unsloth/Llama-3.2-1B-Instruct-unsloth-bnb-4bit",
            "unsloth/Llama-3.2-1B-Instruct",
        ),
    ],
)
def test_merge_reloads_a_4bit_run_base_in_16bit_unquantized(
    backend: str, name: str, base: str
) -> None:
    from pipeline.training.config import ModelSection
    from pipeline.training.hub import merge_base_section

    section = merge_base_section(
        ModelSection(backend=backend, name_or_path=name, dtype="bfloat16", load_in_4bit=True),
        "bfloat16",
    )
    assert section.backend == "transformers"  # no BitsAndBytesConfig, no Unsloth 4-bit load
    assert section.name_or_path == base and section.load_in_4bit is False
    assert section.dtype == "bfloat16"


def test_merge_16bit_with_the_tiny_backend_saves_merged_16bit_weights(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from pipeline.training.config import ModelSection
    from pipeline.training.hub import merge_16bit

    trained = _saved_tiny_adapter(tmp_path / "final")
    merge_16bit(
        ModelSection(backend="tiny"), tmp_path / "final", tmp_path / "merged", dtype="float16"
    )
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    assert merged.config.dtype == torch.float16
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    with torch.no_grad():
        want = trained(ids).logits
        got = merged.float()(ids).logits
        base = trained.get_base_model()
        with trained.disable_adapter():
            plain = base(ids).logits
    assert (want - plain).abs().max() > 1e-3  # the adapter changes the output ...
    assert torch.allclose(got, want, atol=5e-3)  # ... and the merged weights carry the change


# ----- the base model named in a saved adapter ------------------------------------------------


def test_cpu_run_names_the_hub_id_of_its_base_and_still_loads_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CPU run of ``smollm2`` (here a tiny model placed in the conversion cache, so the run is
    seconds, through the same loading code) saves an adapter that names the Hub id, not the cache
    folder; this repository's checkpoint backend still loads it offline from the cache."""
    from transformers import AutoTokenizer

    import train_grpo
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings
    from pipeline.training.hub import SMOLLM2_HUB_ID
    from pipeline.training.model import build_tiny_model, resolve_name

    tokenizer = AutoTokenizer.from_pretrained(resolve_name("smollm2"))
    cache = tmp_path / "cache"
    build_tiny_model(tokenizer).save_pretrained(cache / "smollm2-135m-instruct")
    tokenizer.save_pretrained(cache / "smollm2-135m-instruct")
    monkeypatch.setenv("FINCRIME_GRPO_CACHE", str(cache))
    assert resolve_name("smollm2") == str(cache / "smollm2-135m-instruct")

    out = tmp_path / "run"
    sets = [
        "model.backend=cpu", "model.name_or_path=smollm2", "data.envs=[support]",
        "logging.log_completions=false", "logging.plots=false",
    ]  # fmt: skip
    argv = ["--dry-run", "--output-dir", str(out), *[a for s in sets for a in ("--set", s)]]
    assert train_grpo.main(argv) == 0
    config = json.loads((out / "final" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == SMOLLM2_HUB_ID
    assert f"base_model: {SMOLLM2_HUB_ID}" in (out / "final" / "README.md").read_text()
    backend = CheckpointBackend(out / "final", GenerationSettings(max_new_tokens=4))
    assert backend.model.peft_config["default"].base_model_name_or_path == SMOLLM2_HUB_ID
