"""Train a tool-using agent with GRPO (TRL) on the seeded environments.

    python train_grpo.py --config configs/cpu.yaml                  # short real CPU training
    python train_grpo.py --dry-run                                  # end to end in minutes
    python train_grpo.py --dry-run --mode interactive
    python train_grpo.py --config configs/cpu.yaml --sft-warmup 30   # format warm start, then GRPO
    python train_grpo.py --config configs/cpu_interactive.yaml --init-adapter outputs/cpu/final
    python train_grpo.py --config configs/cpu.yaml --set training.learning_rate=5e-6 --resume
    accelerate launch --config_file configs/accelerate/single_gpu.yaml train_grpo.py \\
        --config configs/a100.yaml --push-to-hub --hub-model-id USER/NAME

The YAML sections and every key are described in pipeline/training/config.py; ``--set section.key=value``
overrides any of them, and the flags below are shortcuts for the common ones. Every
``trl.GRPOConfig`` field is also accepted by its TRL flag name (``--learning_rate 5e-6
--num_generations 4``; parsed by TRL's own ``TrlParser``, list them with ``--help-grpo``): it sets
``training.<field>``, or the section that owns it (``--output_dir``, ``--report_to``,
``--project``, ``--log_completions``, ``--push_to_hub``, ``--hub_model_id``,
``--hub_private_repo``). Later wins: the YAML, the dry-run defaults, ``--set``, the TRL flags, then
the shortcuts. The config is validated before anything is loaded. The run saves checkpoints every ``training.save_steps``, the
final adapter in ``OUTPUT_DIR/final`` (with a model card), ``log_history.csv`` and
``reward_curves.png``; Ctrl-C saves a checkpoint first; ``--resume`` continues from the newest one.
``--dry-run`` trains 2 steps on a handful of prompts, saves, reloads the adapter with PEFT and shows
what would be pushed, without pushing.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import Any

DEFAULT_CONFIG = "configs/cpu.yaml"
STEPS_CONFIG = "configs/cpu_steps.yaml"
ADAPTER_FILE = "adapter_model.safetensors"
DRY_RUN_OVERRIDES = [
    "output_dir=outputs/dry-run",
    "data.n_train=4",
    "data.n_eval=0",
    "training.max_steps=2",
    "training.save_steps=2",
    "training.logging_steps=1",
    "training.num_generations=2",
    "training.per_device_train_batch_size=2",
    "training.gradient_accumulation_steps=1",
    "training.generation_batch_size=null",
    "training.steps_per_generation=null",
    "training.max_completion_length=32",
    "logging.report_to=none",
]


GRPO_FLAG_SECTIONS = {
    "output_dir": "output_dir",
    "report_to": "logging.report_to",
    "project": "logging.project",
    "log_completions": "logging.log_completions",
    "push_to_hub": "hub.push",
    "hub_model_id": "hub.hub_model_id",
    "hub_private_repo": "hub.private",
}
"""GRPOConfig fields that a section of our config owns: their TRL flags set that key instead."""

GRPO_FLAGS_REFUSED = {
    "reward_weights": "the rewards section sets them per component: --set rewards.weights.grade=2",
}
"""GRPOConfig fields the pipeline computes itself: their flags would be silently overwritten."""

BATCH_KEYS = ("per_device_train_batch_size", "generation_batch_size", "steps_per_generation")


class FlagError(ValueError):
    """A command-line flag that is neither ours nor a GRPOConfig field, or has a bad value."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line flags (each a shortcut for a ``--set``). Flags this parser does not know are
    kept in ``grpo_flags`` for ``grpo_overrides``: TRL is not imported here, since Unsloth must
    be imported before it."""
    parser = argparse.ArgumentParser(
        description="GRPO training of tool-using agents.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Any trl.GRPOConfig field is accepted by its TRL flag name, e.g. "
        "--learning_rate 5e-6 --num_generations 4 (see --help-grpo).",
        allow_abbrev=False,
    )
    parser.add_argument(
        "--config",
        help=f"YAML config (configs/*.yaml); default {DEFAULT_CONFIG}, {STEPS_CONFIG} with --mode steps",
    )
    parser.add_argument("--dry-run", action="store_true", help="2 steps, save, reload, no push")
    parser.add_argument(
        "--eval-cuts",
        type=int,
        default=0,
        metavar="N",
        help="steps mode: at the end, score the untrained and the trained model on N held-out "
        "decision cuts per task (beside the reference and the always_* shortcuts) and print it",
    )
    parser.add_argument("--mode", choices=["plan", "interactive", "steps"], help="sets data.mode")
    parser.add_argument("--max-steps", type=int, help="sets training.max_steps")
    parser.add_argument("--output-dir", help="sets output_dir")
    parser.add_argument("--resume", action="store_true", help="continue from newest checkpoint")
    parser.add_argument("--push-to-hub", action="store_true", help="sets hub.push=true")
    parser.add_argument("--hub-model-id", help="sets hub.hub_model_id (USER/NAME)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override any config key (repeatable; value parsed as YAML)",
    )
    parser.add_argument(
        "--sft-warmup",
        type=int,
        default=0,
        metavar="N",
        help="first N SFT steps on the heuristic policy's episodes (train seeds), in the run's mode",
    )
    parser.add_argument(
        "--init-adapter",
        metavar="DIR",
        help="start from a saved LoRA adapter (e.g. a plan-mode run's final/ for interactive GRPO)",
    )
    parser.add_argument(
        "--help-grpo", action="store_true", help="list the trl.GRPOConfig flags and exit"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args, args.grpo_flags = parser.parse_known_args(argv)
    if args.config is None:
        args.config = STEPS_CONFIG if args.mode == "steps" else DEFAULT_CONFIG
    return args


def _grpo_parser() -> argparse.ArgumentParser:
    """TRL's own parser for GRPOConfig, with every default suppressed: the namespace it returns
    holds only the fields given on the command line (the YAML keeps the rest)."""
    from trl import GRPOConfig, TrlParser

    parser = TrlParser((GRPOConfig,), add_help=False, exit_on_error=False, allow_abbrev=False)
    parser.prog = "train_grpo.py"
    for action in parser._actions:
        action.default = argparse.SUPPRESS
        action.required = False
    return parser


def _yaml_value(value: Any) -> str:
    """A parsed flag value written so ``--set``'s YAML reading gives it back unchanged."""
    if hasattr(value, "value") and not isinstance(value, (str, int, float)):  # an Enum member
        value = value.value
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return json.dumps(value)


def grpo_overrides(flags: list[str]) -> list[str]:
    """``--field value`` flags of trl.GRPOConfig -> ``section.key=value`` overrides.

    Values are typed by TRL's parser (``--learning_rate 5e-6`` is a float, ``--bf16 true`` a
    bool, ``--reward_weights 1 0.5`` a list). Raises FlagError for an unknown flag or bad value."""
    if not flags:
        return []
    parser = _grpo_parser()
    try:
        namespace, unknown = parser.parse_known_args(flags)
    except argparse.ArgumentError as exc:
        raise FlagError(str(exc)) from exc
    if unknown:
        options = [o for a in parser._actions for o in a.option_strings]
        first = next((u for u in unknown if u.startswith("-")), unknown[0])
        close = difflib.get_close_matches(first.split("=", 1)[0], options, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise FlagError(
            f"unrecognized arguments: {' '.join(unknown)}{hint}; not a train_grpo.py flag nor a "
            "trl.GRPOConfig field (python train_grpo.py --help / --help-grpo)"
        )
    overrides = []
    for name, value in vars(namespace).items():
        if name in GRPO_FLAGS_REFUSED:
            raise FlagError(f"--{name}: {GRPO_FLAGS_REFUSED[name]}")
        if name == "report_to" and isinstance(value, list):
            if len(value) != 1:
                raise FlagError(f"--report_to {value}: one tracker (none, trackio, wandb, ...)")
            value = value[0]
        key = GRPO_FLAG_SECTIONS.get(name, f"training.{name}")
        overrides.append(f"{key}={_yaml_value(value)}")
    return overrides


def _user_training_keys(overrides: list[str]) -> dict[str, Any]:
    """``training.*`` keys the user set (``--set`` or TRL flags), with their last values."""
    from pipeline.training.config import parse_override

    keys: dict[str, Any] = {}
    for text in overrides:
        path, value = parse_override(text)
        if len(path) == 2 and path[0] == "training":
            keys[path[1]] = value
    return keys


def collect_overrides(args: argparse.Namespace, grpo: list[str] | None = None) -> list[str]:
    """Dry-run defaults, then ``--set``, then the TRL flags (``grpo``), then the shortcut flags:
    later ones win. A dry run asked for another ``num_generations`` G generates one group of G
    and trains it in micro-batches of 2 (1 for an odd G): the default dry run's memory."""
    user = args.overrides + list(grpo or [])
    overrides = list(DRY_RUN_OVERRIDES) if args.dry_run else []
    if args.dry_run:
        chosen = _user_training_keys(user)
        groups = chosen.get("num_generations")
        if isinstance(groups, int) and groups > 0 and not any(k in chosen for k in BATCH_KEYS):
            micro = 2 if groups % 2 == 0 else 1
            overrides.append(f"training.per_device_train_batch_size={micro}")
            overrides.append(f"training.steps_per_generation={groups // micro}")
    overrides += user
    if args.mode:
        overrides.append(f"data.mode={args.mode}")
    if args.max_steps is not None:
        overrides.append(f"training.max_steps={args.max_steps}")
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    if args.push_to_hub:
        overrides.append("hub.push=true")
    if args.hub_model_id:
        overrides.append(f"hub.hub_model_id={args.hub_model_id}")
    return overrides


def base_model_name(cfg: Any) -> str:
    """The base model's public name for the model card (its Hub id; pipeline.training.hub.base_model_id)."""
    from pipeline.training.hub import base_model_id

    return base_model_id(cfg.model) or "tiny-llama-2-layer (in-process test model)"


def reload_check(cfg: Any, folder: Path) -> dict[str, Any]:
    """Load the saved adapter back onto a fresh base model with PEFT and run one forward pass."""
    import torch

    from pipeline.training.model import load_model_and_tokenizer

    base, tokenizer = load_model_and_tokenizer(cfg.model, None, cfg.data.prompt_style)
    if cfg.peft.enabled:
        from peft import PeftModel

        model = PeftModel.from_pretrained(base, str(folder))
        adapters = sum(1 for name, _ in model.named_parameters() if "lora_" in name)
    else:
        model, adapters = base, 0
    batch = tokenizer("Open the case.", return_tensors="pt")
    with torch.no_grad():
        logits = model(**batch).logits
    return {"lora_tensors": adapters, "forward_ok": bool(torch.isfinite(logits).all())}


def finish(cfg: Any, result: Any, dry_run: bool, console: Any) -> int:
    """Model card, optional merged save, reload check (dry run) and push (rank 0 only)."""
    from pipeline.training.hub import (
        HubPushError,
        base_model_id,
        push_folder,
        record_base_model,
        upload_plan,
        write_model_card,
    )

    record_base_model(result.final_dir, base_model_id(cfg.model))
    extra = {
        "GRPO steps": result.global_step,
        "processes": result.world_size,
        "training time (s)": round(result.seconds, 1),
    }
    write_model_card(result.final_dir, cfg, base_model_name(cfg), extra)
    console.print(
        f"[bold]saved[/] {result.final_dir} after {result.global_step} steps "
        f"({result.seconds:.0f} s, world size {result.world_size}"
        f"{', interrupted' if result.interrupted else ''})"
    )
    if result.curves_png:
        console.print(f"curves: {result.curves_png}  history: {result.history_csv}")
    if cfg.hub.merge_16bit and cfg.peft.enabled and not dry_run:
        from pipeline.training.hub import merge_16bit

        merged_dir = result.output_dir / "merged"
        merge_16bit(cfg.model, result.final_dir, merged_dir, cfg.data.prompt_style)
        console.print(f"merged 16-bit model: {merged_dir}")
    if dry_run:
        check = reload_check(cfg, result.final_dir)
        console.print(f"reloaded with PEFT: {check}")
        repo = cfg.hub.hub_model_id or "<hub.hub_model_id not set>"
        console.print(f"[bold]would push[/] to {repo}:")
        for name, size in upload_plan(result.final_dir):
            console.print(f"  {name}  {size / 1e6:.2f} MB")
        return 0 if check["forward_ok"] else 1
    if cfg.hub.push:
        try:
            url = push_folder(result.final_dir, cfg.hub.hub_model_id, private=cfg.hub.private)
            if cfg.hub.merge_16bit:
                push_folder(
                    result.output_dir / "merged", cfg.hub.hub_model_id, path_in_repo="merged"
                )
            console.print(f"[bold]pushed[/] {url}")
        except HubPushError as exc:
            console.print(f"[bold red]push failed:[/] {exc}")
            return 2
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse, validate, train, finish."""
    args = parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    from rich.console import Console

    from pipeline.training.config import ConfigError, load_config, peek_backend

    console = Console(stderr=True)
    if peek_backend(args.config, collect_overrides(args)) == "unsloth":
        import unsloth  # noqa: F401  - must come before trl/transformers so its patches apply
    if args.help_grpo:
        print(_grpo_parser().format_help())
        return 0
    try:
        overrides = collect_overrides(args, grpo_overrides(args.grpo_flags))
        cfg = load_config(args.config, overrides)
        if args.init_adapter and not (Path(args.init_adapter) / ADAPTER_FILE).is_file():
            raise ConfigError(f"--init-adapter {args.init_adapter}: no {ADAPTER_FILE} there")
    except (ConfigError, FlagError, FileNotFoundError) as exc:
        console.print(f"[bold red]config error:[/] {exc}")
        return 2
    from pipeline.training.remote import use_env_servers
    from pipeline.training.trainer import train

    use_env_servers(cfg)  # env.urls: environments on servers; none: in-process
    result = train(
        cfg, resume=args.resume, sft_steps=args.sft_warmup, init_adapter=args.init_adapter
    )
    if int(os.environ.get("RANK", "0")) != 0:
        return 0
    status = finish(cfg, result, args.dry_run, console)
    if args.eval_cuts > 0 and status == 0:
        report_before_after(cfg, result, args.eval_cuts, console)
    return status


def report_before_after(cfg: Any, result: Any, episodes: int, console: Any) -> None:
    """What the run taught: held-out decision cuts before and after (steps mode)."""
    from pipeline.evaluation.cuts import before_after, before_after_lines
    from pipeline.training.model import resolve_name

    if cfg.data.mode != "steps":
        console.print("[yellow]--eval-cuts scores steps-mode runs only; skipped[/]")
        return
    # The tiny test model exists only in-process: no untrained folder to score.
    base = None if cfg.model.backend == "tiny" else resolve_name(cfg.model.name_or_path)
    tokens = int(cfg.training.get("max_completion_length", 96))
    table = before_after(cfg, base, str(result.final_dir), episodes, tokens)
    path = result.output_dir / "before_after.json"
    path.write_text(json.dumps(table, indent=1, default=str))
    console.print(f"[bold]held-out decision cuts[/] ({episodes} eval seeds per task; {path}):")
    for line in before_after_lines(table):
        console.print(line, markup=False)


if __name__ == "__main__":
    sys.exit(main())
