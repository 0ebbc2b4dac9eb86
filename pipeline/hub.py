"""Hugging Face Hub: model card and push of a finished run, never at the cost of the local save.

After training, ``output_dir/final`` holds the LoRA adapter (or full model) and tokenizer. This
module writes a model card there (environments, tasks, mode, base model, reward components and
weights, the training config, and the latest evaluation results when a results file is given),
optionally saves the adapter merged into the base model in 16-bit under ``output_dir/merged``, and
uploads. The token comes from ``HF_TOKEN``. A missing token or an unreachable Hub raises
``HubPushError`` whose message names the saved folder and the command to push it later: the run is
never lost. ``HfApi`` is the only boundary; ``push_folder(api=...)`` accepts a replacement.

Push a saved run later: ``python -m pipeline.hub outputs/cpu/final USER/NAME``.
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


def _eval_section(eval_results: str | None) -> str:
    """Markdown of the latest evaluation results (a JSON summary or a Markdown file)."""
    if not eval_results:
        return "No evaluation results were attached to this run (see `scripts/evaluate.py`).\n"
    path = Path(eval_results)
    if not path.exists():
        return f"Evaluation results file `{path}` was not found when this card was written.\n"
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        summary = data.get("summary", data) if isinstance(data, dict) else data
        body = json.dumps(summary, indent=2)[:4000]
        return f"From `{path.name}`:\n\n```json\n{body}\n```\n"
    return path.read_text(encoding="utf-8")[:6000] + "\n"


def model_card(cfg: Any, base_model: str, extra: dict[str, Any] | None = None) -> str:
    """The README.md for the pushed repo (YAML metadata + what was trained and how)."""
    from rewards import resolve_weights

    data, weights = cfg.data, resolve_weights(cfg.rewards.weights or None)
    meta = {
        "library_name": "peft" if cfg.peft.enabled else "transformers",
        "base_model": base_model,
        "tags": ["grpo", "trl", "tool-use", "agent", *data.envs],
        "pipeline_tag": "text-generation",
    }
    tasks = ", ".join(data.tasks) if data.tasks else "all tasks of each environment"
    reward_rows = "\n".join(f"| {name} | {w:g} |" for name, w in weights.items())
    config_yaml = yaml.safe_dump(cfg.to_dict(), sort_keys=False)
    facts = "\n".join(f"- {k}: {v}" for k, v in (extra or {}).items())
    return (
        f"---\n{yaml.safe_dump(meta, sort_keys=False)}---\n\n"
        f"# Tool-using agent trained with GRPO on {', '.join(data.envs)}\n\n"
        f"A {'LoRA adapter for' if cfg.peft.enabled else 'fine-tune of'} `{base_model}`, trained "
        f"with TRL's GRPOTrainer on procedurally generated, seeded episodes.\n\n"
        f"- Environments: {', '.join(data.envs)}\n- Tasks: {tasks}\n"
        f"- Training mode: {data.mode} "
        f"({'the model sees every tool result' if data.mode == 'interactive' else 'one completion holds the whole tool plan, replayed by the rewards'})\n"
        f"- Training prompts: {data.n_train} per environment (train seed split)\n"
        f"{facts}\n\n"
        f"## Reward components\n\n| component | weight |\n|---|---|\n{reward_rows}\n\n"
        f"## Evaluation\n\n{_eval_section(cfg.hub.eval_results)}\n"
        f"## Training configuration\n\n```yaml\n{config_yaml}```\n"
    )


def write_model_card(folder: Path, cfg: Any, base_model: str, extra: dict | None = None) -> Path:
    """Write ``folder/README.md``."""
    path = Path(folder) / "README.md"
    path.write_text(model_card(cfg, base_model, extra), encoding="utf-8")
    return path


def save_merged(model: Any, tokenizer: Any, folder: Path) -> Path:
    """Merge the LoRA adapter into the base weights and save them in 16-bit."""
    import torch

    merged = model.merge_and_unload() if hasattr(model, "merge_and_unload") else model
    dtype = torch.bfloat16 if torch.cuda.is_available() else torch.float16
    merged = merged.to(dtype)
    merged.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


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
    later = f"push it later with: HF_TOKEN=... python -m pipeline.hub {folder} {repo_id}"
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
