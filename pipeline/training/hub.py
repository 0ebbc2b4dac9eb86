"""Hugging Face Hub: model card and push of a finished run, never at the cost of the local save.

After training, ``output_dir/final`` holds the LoRA adapter (or full model) and tokenizer. This
module names the base model by its Hub id in the adapter config (a CPU run loads SmolLM2 from a
local conversion, whose path would load nowhere else), writes a model card there (environments,
tasks, mode, base model, reward components and weights, the training config, and the latest
evaluation results when a results file is given), optionally saves the adapter merged into the base
model reloaded in 16-bit under ``output_dir/merged``, and uploads. The token comes from ``HF_TOKEN``. A missing token or an unreachable Hub raises
``HubPushError`` whose message names the saved folder and the command to push it later: the run is
never lost. ``HfApi`` is the only boundary; ``push_folder(api=...)`` accepts a replacement.

Push a saved run later: ``python -m pipeline.training.hub outputs/cpu/final USER/NAME``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path
from typing import Any

import yaml

logger = logging.getLogger(__name__)


class HubPushError(RuntimeError):
    """The push failed; the local save is intact (the message says where)."""


EVAL_COLUMNS = ("episodes", "mean_grade", "decision_accuracy", "decision_rate", "mean_steps")
"""The columns of ``scripts/evaluate.py``'s summary that the card's evaluation table shows."""


def _eval_summary(eval_results: str | None) -> tuple[dict[str, Any] | None, str]:
    """(the JSON summary, or None; the Markdown of the card's evaluation section)."""
    if not eval_results:
        return (
            None,
            "No evaluation results were attached to this run (see `scripts/evaluate.py`).\n",
        )
    path = Path(eval_results)
    if not path.exists():
        return None, f"Evaluation results file `{path}` was not found when this card was written.\n"
    if path.suffix != ".json":
        return None, path.read_text(encoding="utf-8")[:6000] + "\n"
    data = json.loads(path.read_text(encoding="utf-8"))
    summary = data.get("summary", data) if isinstance(data, dict) else data
    if not isinstance(summary, dict):
        return (
            None,
            f"From `{path.name}`:\n\n```json\n{json.dumps(summary, indent=2)[:4000]}\n```\n",
        )
    return summary, f"From `{path.name}`:\n\n{eval_table(summary)}"


def _cell(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def eval_table(summary: dict[str, Any]) -> str:
    """Markdown table of an evaluation summary: one row overall (every numeric field), then one
    per task and per hidden category when ``scripts/evaluate.py`` wrote them."""
    scalars = {k: v for k, v in summary.items() if isinstance(v, (int, float)) and v is not True}
    lines = ["| metric | value |", "|---|---|"]
    lines += [f"| {k} | {_cell(v)} |" for k, v in scalars.items()]
    for key, label in (("per_task", "task"), ("per_category", "category")):
        groups = summary.get(key)
        if not isinstance(groups, dict) or not groups:
            continue
        lines += ["", f"| {label} | " + " | ".join(EVAL_COLUMNS) + " |"]
        lines.append("|---" * (len(EVAL_COLUMNS) + 1) + "|")
        for name, row in groups.items():
            cells = [_cell(row.get(c, "")) for c in EVAL_COLUMNS]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _eval_results(summary: dict[str, Any] | None, envs: list[str]) -> list[Any] | None:
    """The summary's numeric metrics as ``huggingface_hub.EvalResult`` (the card's model-index)."""
    from huggingface_hub import EvalResult

    if not summary:
        return None
    env = str(summary.get("env") or ",".join(envs))
    split = summary.get("split")
    results = [
        EvalResult(
            task_type="text-generation",
            task_name="tool-using agent episodes",
            dataset_type=env,
            dataset_name=f"{env} episodes (procedurally generated, seeded)",
            dataset_split=str(split) if split else None,
            metric_type=name,
            metric_name=name,
            metric_value=value,
        )
        for name, value in summary.items()
        if name in EVAL_COLUMNS[1:] and isinstance(value, (int, float))
    ]
    return results or None


def model_card(
    cfg: Any, base_model: str, extra: dict[str, Any] | None = None, model_name: str | None = None
) -> str:
    """The README.md for the pushed repo: ``huggingface_hub.ModelCard`` with ``ModelCardData``
    metadata (library, base model, tags, and the evaluation metrics as model-index results) and
    what was trained and how, with the evaluation table."""
    from huggingface_hub import ModelCard, ModelCardData

    from rewards import resolve_weights

    data, weights = cfg.data, resolve_weights(cfg.rewards.weights or None)
    summary, eval_text = _eval_summary(cfg.hub.eval_results)
    results = _eval_results(summary, list(data.envs))
    name = model_name or cfg.hub.hub_model_id or f"grpo-{'-'.join(data.envs)}"
    card_data = ModelCardData(
        library_name="peft" if cfg.peft.enabled else "transformers",
        base_model=base_model,
        tags=["grpo", "trl", "tool-use", "agent", *data.envs],
        pipeline_tag="text-generation",
        model_name=name if results else None,
        eval_results=results,
    )
    tasks = ", ".join(data.tasks) if data.tasks else "all tasks of each environment"
    reward_rows = "\n".join(f"| {n} | {w:g} |" for n, w in weights.items())
    config_yaml = yaml.safe_dump(cfg.to_dict(), sort_keys=False)
    facts = "\n".join(f"- {k}: {v}" for k, v in (extra or {}).items())
    seen = {
        "interactive": "the model sees every tool result",
        "steps": "one call at a time from a cut of a reference trajectory, replayed by the rewards",
    }.get(data.mode, "one completion holds the whole tool plan, replayed by the rewards")
    content = (
        f"---\n{card_data.to_yaml()}\n---\n\n"
        f"# Tool-using agent trained with GRPO on {', '.join(data.envs)}\n\n"
        f"A {'LoRA adapter for' if cfg.peft.enabled else 'fine-tune of'} `{base_model}`, trained "
        f"with TRL's GRPOTrainer on procedurally generated, seeded episodes.\n\n"
        f"- Environments: {', '.join(data.envs)}\n- Tasks: {tasks}\n"
        f"- Training mode: {data.mode} ({seen})\n"
        f"- Training prompts: {data.n_train} per environment (train seed split)\n"
        f"{facts}\n\n"
        f"## Reward components\n\n| component | weight |\n|---|---|\n{reward_rows}\n\n"
        f"## Evaluation\n\n{eval_text}\n"
        f"## Training configuration\n\n```yaml\n{config_yaml}```\n"
    )
    return str(ModelCard(content))


def write_model_card(folder: Path, cfg: Any, base_model: str, extra: dict | None = None) -> Path:
    """Write ``folder/README.md`` (``ModelCard.save``)."""
    from huggingface_hub import ModelCard

    path = Path(folder) / "README.md"
    ModelCard(model_card(cfg, base_model, extra)).save(path)
    return path


SMOLLM2_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
"""The Hub model the ``smollm2`` aliases stand for (pipeline/training/model.py loads its GGUF conversion)."""

QUANTIZED_BACKENDS = ("bnb4bit", "unsloth")
PREQUANTIZED_SUFFIXES = ("-unsloth-bnb-4bit", "-bnb-4bit")
"""Name endings of checkpoints stored in 4-bit (Unsloth's); the 16-bit weights drop the suffix."""


def base_model_id(model_cfg: Any) -> str | None:
    """The Hub id of the model a run trained on: what a pushed adapter must name as its base.
    None for the in-process tiny test model, which exists nowhere else."""
    from pipeline.training.model import SMOLLM2_ALIASES

    if model_cfg.backend == "tiny":
        return None
    if model_cfg.name_or_path in SMOLLM2_ALIASES:
        return SMOLLM2_HUB_ID
    return model_cfg.name_or_path


def local_base(name: str) -> str:
    """Where to load an adapter's recorded base from on this machine: the SmolLM2 Hub id maps to
    the local conversion the CPU path trains on (offline, the same weights); others pass through."""
    if name == SMOLLM2_HUB_ID:
        from pipeline.training.model import resolve_name

        return resolve_name("smollm2")
    return name


def record_base_model(folder: Path, base_id: str | None) -> bool:
    """Write ``base_id`` as ``base_model_name_or_path`` in ``folder/adapter_config.json`` (PEFT
    records the path the base was loaded from: on CPU a local cache folder). False when there is
    no adapter config or no id to record."""
    path = Path(folder) / "adapter_config.json"
    if base_id is None or not path.is_file():
        return False
    config = json.loads(path.read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = base_id
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return True


def merge_dtype() -> str:
    """bfloat16 where the GPU has it, float16 elsewhere."""
    import torch

    bf16 = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return "bfloat16" if bf16 else "float16"


def merge_base_section(model_cfg: Any, dtype: str | None = None) -> Any:
    """The ``model`` section to load the base for a merge: the same model in 16-bit, never
    quantized. A 4-bit backend becomes plain transformers (transformers refuses to cast a
    bitsandbytes model with ``.to(dtype)``, and LoRA merged into 4-bit weights is rounded away);
    an Unsloth pre-quantized checkpoint is replaced by its 16-bit twin (the name without
    ``-bnb-4bit``)."""
    import dataclasses

    section = dataclasses.replace(model_cfg, dtype=dtype or merge_dtype(), load_in_4bit=False)
    if section.backend in QUANTIZED_BACKENDS:
        name = section.name_or_path
        for suffix in PREQUANTIZED_SUFFIXES:
            name = name.removesuffix(suffix)
        section = dataclasses.replace(section, backend="transformers", name_or_path=name)
    return section


def merge_16bit(
    model_cfg: Any,
    adapter_dir: Path,
    folder: Path,
    tool_style: str = "full",
    dtype: str | None = None,
) -> Path:
    """Reload the base model in 16-bit (``merge_base_section``), apply the saved LoRA adapter,
    merge it into the weights and save model and tokenizer to ``folder``."""
    import torch
    from peft import PeftModel

    from pipeline.training.model import load_model_and_tokenizer

    section = merge_base_section(model_cfg, dtype)
    base, tokenizer = load_model_and_tokenizer(section, None, tool_style)
    if section.backend == "tiny":  # built in-process in float32, never quantized
        base = base.to(getattr(torch, section.dtype))
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    merged.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return Path(folder)


def merge_adapter(adapter_dir: Path, folder: Path, dtype: str = "float32") -> Any:
    """Merge a saved LoRA adapter into the base its config names (loaded in ``dtype`` on CPU;
    the SmolLM2 Hub id maps to the local conversion) and save the model to ``folder``. Returns
    the tokenizer (the adapter folder's, else the base's), unsaved: the caller finishes it."""
    from pipeline.training.model import load_checkpoint

    model, tokenizer = load_checkpoint(adapter_dir, dtype)
    model.merge_and_unload().save_pretrained(folder, safe_serialization=True)
    return tokenizer


def upload_plan(folder: Path) -> list[tuple[str, int]]:
    """(relative path, bytes) of every file that would be uploaded."""
    folder = Path(folder)
    return sorted(
        (str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*") if p.is_file()
    )


def push_folder(
    folder: Path,
    repo_id: str,
    private: bool = True,
    api: Any | None = None,
    token: str | None = None,
    path_in_repo: str | None = None,
) -> str:
    """Create ``repo_id`` if needed and upload ``folder``; returns the repo URL.

    Raises HubPushError (after nothing was deleted) when the token is missing or the Hub fails.
    """
    folder = Path(folder)
    later = f"push it later with: HF_TOKEN=... python -m pipeline.training.hub {folder} {repo_id}"
    token = token or os.environ.get("HF_TOKEN")
    if api is None:
        if not token:
            raise HubPushError(f"HF_TOKEN is not set; the run is saved in {folder}; {later}")
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    try:
        api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(
            folder_path=str(folder),
            repo_id=repo_id,
            path_in_repo=path_in_repo,
            commit_message="Upload GRPO-trained agent",
        )
    except Exception as exc:  # any Hub/network failure: keep the run, say how to retry
        raise HubPushError(
            f"pushing to {repo_id} failed ({type(exc).__name__}: {exc}); "
            f"the run is saved in {folder}; {later}"
        ) from exc
    logger.info("pushed %s to https://huggingface.co/%s", folder, repo_id)
    return f"https://huggingface.co/{repo_id}"


def main(argv: list[str] | None = None) -> int:
    """CLI: push an already saved folder (e.g. after a failed push at the end of training)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("folder", type=Path)
    parser.add_argument("hub_model_id")
    parser.add_argument("--public", action="store_true", help="create the repo public")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    url = push_folder(args.folder, args.hub_model_id, private=not args.public)
    logger.info("done: %s", url)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
