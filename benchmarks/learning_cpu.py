"""Learning benchmark on CPU: does GRPO make SmolLM2-135M better on AML cases it never saw?

    OMP_NUM_THREADS=2 python benchmarks/learning_cpu.py   # full run (plan mode: ~50 min on 2 cores)
    python benchmarks/learning_cpu.py --quick         # smoke run: a few minutes, figures meaningless

Steps mode (``--modes steps``, ``benchmarks/learning_steps.py``) asks the question plan mode cannot:
does GRPO teach the model to decide from the evidence in its prompt?

The story, per mode (plan, then interactive):
1. evaluate the untrained model on held-out eval seeds (``env.seeds`` "eval" split) of AML easy;
2. plan mode: run the format warm start (SFT on the honest heuristic's plans, train seeds only)
   inside ``pipeline.training.trainer.build_trainer`` and save that adapter as the "warm" stage; the
   interactive mode starts from that same adapter (``--interactive-warm plan``, the default: run
   the plan mode first), from its own warm start (``sft``: ``--sft-steps`` SFT steps on the
   heuristic's tool conversations; the plan adapter does not carry over to the interactive
   prompt, but these conversations are ~3-6k tokens, slow on a CPU) or from scratch (``none``:
   untrained SmolLM2 never calls a tool, so every GRPO reward is 0 and nothing is learned);
3. GRPO for the configured steps on train seeds, save the adapter as the "grpo" stage;
4. evaluate each stage on the same eval seeds, greedy decoding, and compare them with paired 95%
   bootstrap intervals (``pipeline.evaluation.stats``).

It writes ``<out>/<mode>/eval_<stage>.json`` (scripts/compare_results.py reads them), the GRPO
reward curves (``reward_curves.png``), a bar chart of every stage with intervals
(``<out>/learning_cpu_<mode>.png``) and, in benchmarks/RESULTS.md, the "learning_cpu" section and
one "learning_cpu_<mode>" section per mode with the targets of issue 9 checked.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.results import machine

logger = logging.getLogger("learning_cpu")
CONFIGS = {
    "plan": "configs/cpu.yaml",
    "interactive": "configs/cpu_interactive.yaml",
    "steps": "configs/cpu_steps.yaml",
}
MAX_CONTEXT = 6144
"""Interactive evaluation stops an episode's conversation at this many tokens
(``GenerationSettings.max_context_tokens``; ``--max-context``), and the episode ends undecided. The
honest heuristic's AML-easy conversations take 2.7-6.0k tokens (median 3.5k; 40 train seeds, compact
template), so the cap cuts only a policy that wanders, which would otherwise run to the 30-step
limit or SmolLM2's 8k positions with every turn re-reading the whole conversation."""
FULL = {
    "episodes": 100,
    "sft_steps": 40,
    "grpo_steps": 10,
    "n_train": 64,
    "plan_tokens": 448,
    "turn_tokens": 128,
    "max_context": MAX_CONTEXT,
    "interactive_warm": "plan",
}
QUICK = {
    "episodes": 2,
    "sft_steps": 2,
    "grpo_steps": 1,
    "n_train": 4,
    "plan_tokens": 48,
    "turn_tokens": 32,
    "max_context": MAX_CONTEXT,
    "interactive_warm": "plan",
}
QUICK_OVERRIDES = [
    "training.per_device_train_batch_size=2",
    "training.num_generations=2",
    "training.max_completion_length=48",
]
QUICK_INTERACTIVE = ["training.max_completion_length=256", "training.max_tool_calling_iterations=1"]
FULL_PLAN = ["training.learning_rate=1e-4", "training.temperature=0.7"]
"""10 GRPO steps at the CPU default rate (2e-5) barely move a LoRA adapter. Sampling at 0.7: from
the warm start at 1.0, 31% of sampled plans were unreadable (invented tools, broken JSON) and a
group's reward spread was mostly "junk or not" (mean reward 0.33, greedy plans ~0.9); at 0.7 8%
were, the mean was 0.97 and groups differed by content: rule modes with an effect, the typology
(3 train prompts x 8 samples each, 2026-12-01). The completion budget is
``--plan-tokens`` (448): the warm start's blind plans of AML easy take 250-380 SmolLM2 tokens
(median ~310), and cpu.yaml's 128 would cut every one off before its decision. Sampling ends a
completion at its decision (``pipeline.decoding.trainer_sampling``), so GRPO cannot drift into calls after it."""
FULL_INTERACTIVE = [
    "training.max_completion_length=1024",
    "training.learning_rate=1e-4",
    "training.temperature=0.7",
]
"""TRL gives every turn of a rollout the whole completion budget before truncating it; at
cpu_interactive.yaml's 3072 one rambling first turn of a group costs ~9 minutes on 2 cores. Rate
and temperature as in plan mode: GRPO starts from the same warm adapter."""
PROMPT_STYLE = "compact"
"""Signature-only tool list (plan prompts ~0.9k tokens instead of ~1.6k; in interactive prompts the
chat template's list, ~0.5k instead of ~2.0k): decoding on this CPU is bound by reading weights and
KV cache, so the shorter context makes every stage about twice as fast."""
LOCKSTEP_BATCH = 32
"""Interactive evaluation plays every episode at once and decodes each turn's replies in batches
of 32 (``pipeline.decoding.lockstep``): one by one, untrained SmolLM2 took ~51 s an episode (its three
silent 128-token turns), ~85 min for 100 seeds."""
IDLE_TURNS = 2
"""Interactive evaluation: an episode ends after two replies without a readable tool call (the
agents' default is 3). Untrained SmolLM2 never calls a tool and writes every turn to its cap, so
its evaluation is 2 instead of 3 capped turns; it scores 0 either way."""
TARGETS = {"valid_call_rate": 0.9, "decision_rate": 0.8, "grade_gain": 0.10}
"""Issue 9's plan-mode targets: valid calls, decisions reached, grade gain over the untrained."""
TIME_LIMIT_S = 3600
"""Each mode's run (evaluations included) must finish within an hour on the 2-core machine."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="Smoke parameters (minutes)")
    parser.add_argument("--modes", default="plan,interactive", help="Comma list of modes")
    parser.add_argument("--episodes", type=int, default=None, help="Eval seeds per stage")
    parser.add_argument("--sft-steps", type=int, default=None, help="Warm-start SFT steps")
    parser.add_argument("--grpo-steps", type=int, default=None, help="GRPO steps")
    parser.add_argument("--n-train", type=int, default=None, help="Training prompts (train seeds)")
    parser.add_argument("--plan-tokens", type=int, default=None, help="Tokens of a plan reply")
    parser.add_argument("--turn-tokens", type=int, default=None, help="Tokens of a turn reply")
    parser.add_argument(
        "--max-context",
        type=int,
        default=None,
        help="Interactive eval: tokens a conversation holds",
    )
    parser.add_argument(
        "--interactive-warm",
        choices=("plan", "sft", "none"),
        default=None,
        help="Interactive GRPO starts from the plan mode's warm adapter (<output-dir>/plan/warm), "
        "from --sft-steps SFT steps on the heuristic's conversations, or from the untrained model",
    )
    parser.add_argument(
        "--horizon-episodes", type=int, default=30, help="Steps: receding-horizon eval episodes"
    )
    parser.add_argument(
        "--lockstep",
        type=int,
        default=32,
        help="Steps: receding-horizon episodes decoded together (each holds its conversation's "
        "keys and values: ~0.3 GB at 6k tokens)",
    )
    parser.add_argument("--reply-tokens", type=int, default=96, help="Steps: tokens of a reply")
    parser.add_argument("--steps-sft", type=int, default=12, help="Steps: blind warm-start steps")
    parser.add_argument(
        "--steps-warm",
        type=Path,
        default=None,
        help="Steps: start GRPO from this saved warm-start adapter (an earlier run's "
        "<output-dir>/steps/warm) instead of training --steps-sft blind SFT steps again",
    )
    parser.add_argument(
        "--steps-set", action="append", help="Steps: extra config override (section.key=value)"
    )
    parser.add_argument(
        "--reuse-evals",
        action="store_true",
        help="Steps: keep the untrained and warm evaluations an interrupted run of the same "
        "command already saved in --output-dir instead of evaluating those stages again",
    )
    parser.add_argument(
        "--extend-cuts",
        type=int,
        default=0,
        help="Steps: score the saved run's stages on N more held-out cuts, then report "
        "(benchmarks/learning_steps_extend.py; no training)",
    )
    parser.add_argument(
        "--extend-horizon",
        type=int,
        default=0,
        help="Steps: play the saved run's stages in N receding-horizon episodes (the first N "
        "held-out seeds), replacing their horizon evaluations, then report (no training)",
    )
    parser.add_argument(
        "--extend-stages",
        default="always_file,reference,warm,grpo",
        help="Steps: the stages --extend-cuts / --extend-horizon score (untrained too if named; "
        "reference plays as the heuristic in episodes)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--output-dir", type=Path, default=Path("outputs/learning_cpu"))
    parser.add_argument("--no-results", action="store_true", help="Do not write RESULTS.md")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="Write the report from the saved runs under --output-dir (no training)",
    )
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def evaluate_checkpoint(
    path: Path, mode: str, episodes: int, settings: dict[str, Any]
) -> dict[str, Any]:
    """Play ``episodes`` AML easy eval seeds with a checkpoint, all at once (``pipeline.evaluation.episodes``
    with ``lockstep``)."""
    from pipeline.evaluation.episodes import evaluate

    result = evaluate(
        "aml",
        f"checkpoint:{path}",
        tasks="easy",
        episodes=episodes,
        mode=mode,
        progress=False,
        settings=settings,
        lockstep=LOCKSTEP_BATCH,
    )
    logger.info("%s %s: mean grade %.3f", path.name, mode, result["summary"]["mean_grade"])
    return result


def evaluate_plans_batched(
    path: Path, episodes: int, max_new_tokens: int, batch_size: int = 50
) -> dict[str, Any]:
    """Plan mode, batched: greedy plans for the eval prompts, replayed like the rewards do.

    Same prompts (``pipeline.data.dataset.build_rows`` on the eval split), parser and replay as the
    reward functions; ``pipeline.decoding.batch_generation`` decodes them together with the shared system
    prompt encoded once (same tokens as one-by-one greedy decoding, several times faster)."""
    from types import SimpleNamespace

    import env as registry
    from env.rollout import replay
    from pipeline.data.dataset import build_rows
    from pipeline.evaluation.cuts import batched_replies
    from pipeline.evaluation.episodes import episode_row, summarize
    from rewards import parse_tool_calls

    environment = registry.make("aml")
    prompts = build_rows("aml", ["easy"], episodes, "eval", 0, "plan", PROMPT_STYLE)
    replies, tokens = batched_replies(
        str(path), prompts, max_new_tokens, batch_size, "full", train_template=False
    )
    rows = []
    for prompt, reply in zip(prompts, replies, strict=True):
        calls = parse_tool_calls(reply).calls
        report = replay(environment, prompt["task"], prompt["seed"], calls)
        episode = SimpleNamespace(report=report, truth=environment.reveal())
        row = episode_row(environment, episode, prompt["task"], prompt["seed"])
        rows.append({**row, "reply_chars": len(reply), "reply_tokens": len(tokens[len(rows)])})
    summary = summarize(rows)
    summary.update(env="aml", policy=str(path), split="eval", mode="plan", tasks=["easy"])
    return {"summary": summary, "episodes": rows}


def evaluate_stage(path: Path, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    """Plan mode: batched plans; interactive mode: ``pipeline.evaluation.model_policy`` turn by turn."""
    if mode == "plan":
        return evaluate_plans_batched(path, args.episodes, args.plan_tokens)
    settings = {
        "plan_max_new_tokens": args.plan_tokens,
        "max_new_tokens": args.turn_tokens,
        "max_context_tokens": args.max_context,
        "max_idle_turns": IDLE_TURNS,
        "prompt_style": PROMPT_STYLE,  # the tool list the training run's template renders
    }
    return evaluate_checkpoint(path, mode, args.episodes, settings)


def train_stages(
    mode: str,
    args: argparse.Namespace,
    out: Path,
    on_stage: Callable[[str, Path], None],
    warm_from: Path | None = None,
) -> dict[str, Any]:
    """Warm start (plan: SFT; interactive: ``warm_from``, the plan run's adapter) and GRPO; saves
    ``warm`` and ``grpo`` adapters; returns timings.

    ``on_stage(name, path)`` runs as soon as a stage is saved, so the warm start's figures are
    in the log before GRPO starts (a bad warm start shows in minutes, not after the whole run)."""
    from pipeline.training.config import load_config
    from pipeline.training.trainer import build_trainer, write_history

    overrides = [
        f"output_dir={out / 'run'}",
        "data.tasks=[easy]",
        f"data.n_train={args.n_train}",
        f"training.max_steps={args.grpo_steps}",
        "training.save_strategy=no",
        "logging.log_completions=false",
        f"data.prompt_style={PROMPT_STYLE}",
    ]
    if args.quick:
        tuned = QUICK_OVERRIDES + (QUICK_INTERACTIVE if mode == "interactive" else [])
    elif mode == "plan":
        tuned = [*FULL_PLAN, f"training.max_completion_length={args.plan_tokens}"]
    else:
        tuned = FULL_INTERACTIVE
    cfg = load_config(CONFIGS[mode], overrides + tuned)
    sft_steps = args.sft_steps if own_warm_start(mode, args.interactive_warm) else 0
    start = time.perf_counter()
    bundle = build_trainer(cfg, sft_steps=sft_steps, init_adapter=warm_from)
    warm_seconds = time.perf_counter() - start
    stages = {}
    if sft_steps:
        bundle.model.save_pretrained(str(out / "warm"))
        bundle.tokenizer.save_pretrained(str(out / "warm"))
        stages["warm"] = out / "warm"
        on_stage("warm", out / "warm")
    elif warm_from is not None:
        stages["warm"] = warm_from
        on_stage("warm", warm_from)
    start = time.perf_counter()
    bundle.trainer.train()
    grpo_seconds = time.perf_counter() - start
    bundle.trainer.save_model(str(out / "grpo"))
    bundle.tokenizer.save_pretrained(str(out / "grpo"))
    stages["grpo"] = out / "grpo"
    on_stage("grpo", out / "grpo")
    history = bundle.trainer.state.log_history
    _, curves = write_history(history, out)
    zero_std = [r["frac_reward_zero_std"] for r in history if "frac_reward_zero_std" in r]
    return {
        "stages": stages,
        "overrides": tuned,
        "curves": curves,
        "warm_seconds": round(warm_seconds, 1),
        "grpo_seconds": round(grpo_seconds, 1),
        "frac_reward_zero_std": round(sum(zero_std) / len(zero_std), 3) if zero_std else None,
    }


def own_warm_start(mode: str, interactive_warm: str | None) -> bool:
    """Whether a mode's run trains its own SFT warm start (plan always; interactive with ``sft``)."""
    return mode == "plan" or interactive_warm == "sft"


def plan_warm_adapter(args: argparse.Namespace) -> Path | None:
    """The plan mode's saved warm start that interactive GRPO starts from (None: from scratch)."""
    if args.interactive_warm != "plan":
        return None
    path = args.output_dir / "plan" / "warm"
    if not (path / "adapter_model.safetensors").is_file():
        raise SystemExit(
            f"--interactive-warm plan needs the plan mode's warm adapter at {path}: run "
            "--modes plan first (or --modes plan,interactive), or pass --interactive-warm none"
        )
    return path


def run_mode(mode: str, base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Evaluate untrained, train, evaluate each stage; results and figures of one mode."""
    out = args.output_dir / mode
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    ran_on = machine()  # the commit that runs, not the one checked out when it ends
    start = time.perf_counter()

    def evaluate_and_save(stage: str, path: Path) -> None:
        results[stage] = evaluate_stage(path, mode, args)
        (out / f"eval_{stage}.json").write_text(json.dumps(results[stage], indent=1, default=str))
        summary = results[stage]["summary"]
        logger.info(
            "%s %s: grade %.3f, decisions %.2f (%.0f s so far)",
            mode,
            stage,
            summary["mean_grade"],
            summary.get("decision_rate", float("nan")),
            time.perf_counter() - start,
        )

    # interactive GRPO's starting adapter; a missing one fails before the first evaluation
    warm_from = plan_warm_adapter(args) if mode == "interactive" else None
    evaluate_and_save("untrained", base)
    training = train_stages(mode, args, out, evaluate_and_save, warm_from)
    run = {"seconds": round(time.perf_counter() - start, 1), "machine": ran_on, **training}
    meta = {**run, "args": {k: str(v) for k, v in vars(args).items()}}
    (out / "run.json").write_text(json.dumps(meta, indent=1, default=str))
    return {"results": results, **meta}


def load_run(out: Path) -> dict[str, Any]:
    """A finished mode's run from its folder (``run.json`` and each ``eval_<stage>.json``)."""
    run = json.loads((out / "run.json").read_text())
    stages = ["untrained", *run["stages"]]
    run["results"] = {s: json.loads((out / f"eval_{s}.json").read_text()) for s in stages}
    return run


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.extend_cuts or args.extend_horizon:
        from benchmarks.learning_steps_extend import extend_cuts, extend_horizon
        from pipeline.training.model import smollm2_path

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        stages = tuple(s.strip() for s in args.extend_stages.split(",") if s.strip())
        out = args.output_dir / "steps"
        if args.extend_cuts:
            extend_cuts(out, smollm2_path(), args.extend_cuts, args.reply_tokens, stages)
        if args.extend_horizon:
            extend_horizon(
                out, smollm2_path(), args.extend_horizon, args.reply_tokens, stages, args.lockstep
            )
        modes, args.report_only = ["steps"], True
    from benchmarks.learning_report import report

    if args.report_only:
        from benchmarks.learning_steps import load_steps

        loaders = {"steps": load_steps}
        return report({m: loaders.get(m, load_run)(args.output_dir / m) for m in modes}, args)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    import torch

    from pipeline.training.model import smollm2_path

    torch.manual_seed(0)
    if args.threads:
        torch.set_num_threads(args.threads)  # a shared machine: fewer threads spin less
    base = smollm2_path()
    runs = {}
    for mode in modes:
        if mode not in CONFIGS:
            raise SystemExit(f"unknown mode {mode!r}; choose from {', '.join(CONFIGS)}")
        logger.info("mode %s: untrained eval, training, stage evals", mode)
        if mode == "steps":
            from benchmarks.learning_steps import run_steps

            runs[mode] = run_steps(base, args)
        else:
            runs[mode] = run_mode(mode, base, args)
    return report(runs, args)


if __name__ == "__main__":
    raise SystemExit(main())
