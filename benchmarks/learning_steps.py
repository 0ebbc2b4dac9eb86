"""Steps mode of the CPU learning benchmark (``benchmarks/learning_cpu.py --modes steps``).

Does GRPO teach SmolLM2-135M to read the evidence? AML easy, prompts cut just before the
reference's decision (``configs/cpu_steps.yaml``):

1. evaluate the untrained model on held-out decision cuts (one greedy reply per cut, scored by the
   training rewards: ``pipeline.evaluation.cuts``) and in full receding-horizon episodes (each turn a
   plan, its first call runs: ``pipeline.evaluation.model_policy``, mode ``steps``);
2. a decision-blind warm start: SFT on the ``blind_decision`` reference's replies, whose decision
   is a seeded coin flip independent of the evidence (it teaches what a decision looks like, not
   which one to make; its evaluation must sit near chance);
3. GRPO on train-seed decision cuts; evaluate warm and GRPO stages the same way;
4. beside them on the same seeds: ``always_file`` (the best blind policy) and the reference.

Decision accuracy counts only the policy's own decision: a reply without a terminal call is wrong.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from pipeline.evaluation.stats import fmt, interval_table, paired_difference

logger = logging.getLogger("learning_cpu.steps")
CONFIG = "configs/cpu_steps.yaml"
SCRIPTED = ("always_file", "reference")
HORIZON_SCRIPTED = ("always_file", "heuristic")
TARGET_GAIN = 0.10
"""Decision accuracy at held-out decision cuts must beat the better of always_file and the warm
start by this much, with a paired 95% interval that excludes 0 (issue 26)."""
AIM = 0.80
TIME_LIMIT_S = 3600


def cut_rows(episodes: int, offset: int = 0) -> list[dict[str, Any]]:
    from pipeline.evaluation.cuts import cut_rows as build

    return build("aml", ["easy"], episodes, "eval", "decision", "compact", "compact", offset=offset)


def evaluate_cuts(policy: str, rows: list[dict[str, Any]], reply_tokens: int) -> dict[str, Any]:
    """One reply per held-out decision cut, scored like the rewards score it."""
    from pipeline.evaluation.cuts import score_policy

    settings = {"max_new_tokens": reply_tokens} if policy.startswith("checkpoint:") else {}
    return score_policy(policy, rows, **settings)


def evaluate_horizon(policy: str, episodes: int, reply_tokens: int, lockstep: int) -> dict:
    """Full AML-easy episodes on held-out seeds, receding horizon for a model."""
    from pipeline.evaluation.episodes import evaluate

    settings = {
        "prompt_style": "compact",
        "result_style": "compact",
        "plan_max_new_tokens": reply_tokens,
        "horizon": "receding",
        "train_template": True,
        "max_idle_turns": 2,
        "max_context_tokens": 6144,
    }
    start = time.perf_counter()
    is_model = policy.startswith("checkpoint:")
    result = evaluate(
        "aml",
        policy,
        tasks="easy",
        episodes=episodes,
        mode="steps",
        progress=False,
        settings=settings if is_model else None,
        lockstep=lockstep if is_model else 0,
    )
    result["summary"]["seconds"] = round(time.perf_counter() - start, 1)
    return result


def context_dtype(overrides: list[str]) -> None:
    """Every stage's context store encodes in the run's ``peft.context_dtype`` (the untrained
    evaluation runs before the training config builds its store)."""
    import torch

    from pipeline.decoding.activation import encode_contexts_in

    for override in overrides:
        key, _, value = override.partition("=")
        if key.strip() == "peft.context_dtype" and value.strip() not in ("", "null", "None"):
            encode_contexts_in(getattr(torch, value.strip()))


def saved_evaluation(out: Path, stage: str, n_cuts: int) -> tuple[Any, Any] | None:
    """A stage's saved cut and horizon evaluations in ``out``, if both are there and the cuts
    are the ``n_cuts`` this run scores (``--reuse-evals``: an interrupted run resumes after its
    finished evaluations; their seconds stay those of the run that made them)."""
    paths = [out / f"{kind}_{stage}.json" for kind in ("cuts", "horizon")]
    if not all(p.is_file() for p in paths):
        return None
    cuts, horizon = (json.loads(p.read_text()) for p in paths)
    return (cuts, horizon) if len(cuts["episodes"]) == n_cuts else None


def run_steps(base: Path, args: Any) -> dict[str, Any]:
    """Evaluate untrained, warm-start, GRPO, evaluate each stage; baselines on the same seeds."""
    from benchmarks.results import machine
    from pipeline.training.config import load_config
    from pipeline.training.memory import release_free_memory
    from pipeline.training.trainer import build_trainer, write_history

    out = args.output_dir / "steps"
    out.mkdir(parents=True, exist_ok=True)
    ran_on, start = machine(), time.perf_counter()
    rows = cut_rows(args.episodes)
    cuts: dict[str, Any] = {}
    horizon: dict[str, Any] = {}

    def evaluate_stage(stage: str, policy: str) -> None:
        reuse = stage != "grpo" and getattr(args, "reuse_evals", False)
        saved = saved_evaluation(out, stage, len(rows)) if reuse else None
        if saved is not None:
            cuts[stage], horizon[stage] = saved
            logger.info("steps %s: evaluations reused from %s", stage, out)
            return
        cuts[stage] = evaluate_cuts(policy, rows, args.reply_tokens)
        lockstep = getattr(args, "lockstep", 32)
        horizon[stage] = evaluate_horizon(
            policy, args.horizon_episodes, args.reply_tokens, lockstep
        )
        for kind, table in (("cuts", cuts), ("horizon", horizon)):
            (out / f"{kind}_{stage}.json").write_text(json.dumps(table[stage], default=str))
        release_free_memory()  # the stage's conversations and model, before the next stage
        c, h = cuts[stage]["summary"], horizon[stage]["summary"]
        logger.info(
            "steps %s: cuts acc %.3f (decided %.2f) in %.0f s; episodes grade %.3f in %.0f s "
            "(%.0f s so far)",
            stage,
            c["decision_accuracy"],
            c["decision_rate"],
            c["seconds"],
            h["mean_grade"],
            h["seconds"],
            time.perf_counter() - start,
        )

    cuts.update(scripted_cuts(rows, out))
    horizon.update(scripted_horizon(args.horizon_episodes, out))
    context_dtype(args.steps_set or [])
    evaluate_stage("untrained", f"checkpoint:{base}")
    overrides = [
        f"output_dir={out / 'run'}",
        f"data.n_train={args.n_train}",
        f"training.max_steps={args.grpo_steps}",
        f"training.max_completion_length={args.reply_tokens}",
        "training.save_strategy=no",
        "logging.log_completions=false",
        *(args.steps_set or []),
    ]
    cfg = load_config(CONFIG, overrides)
    t0 = time.perf_counter()
    reused = getattr(args, "steps_warm", None)
    if reused:
        bundle = build_trainer(cfg, init_adapter=reused)
    else:
        bundle = build_trainer(cfg, sft_steps=args.steps_sft)
    warm_seconds = time.perf_counter() - t0
    bundle.model.save_pretrained(str(out / "warm"))
    bundle.tokenizer.save_pretrained(str(out / "warm"))
    warm_start = (
        warm_record(reused)
        if reused
        else {
            "sft_steps": args.steps_sft,
            "seconds": round(warm_seconds, 1),
            "overrides": overrides,
        }
    )
    (out / "warm" / WARM_RECORD).write_text(json.dumps(warm_start))
    release_free_memory()
    evaluate_stage("warm", f"checkpoint:{out / 'warm'}")
    t0 = time.perf_counter()
    bundle.trainer.train()
    grpo_seconds = time.perf_counter() - t0
    bundle.trainer.save_model(str(out / "grpo"))
    bundle.tokenizer.save_pretrained(str(out / "grpo"))
    evaluate_stage("grpo", f"checkpoint:{out / 'grpo'}")
    history = bundle.trainer.state.log_history
    _, curves = write_history(history, out)
    zero_std = [r["frac_reward_zero_std"] for r in history if "frac_reward_zero_std" in r]
    run = {
        "decisions": decision_curves(history),
        "seconds": round(time.perf_counter() - start, 1),
        "machine": ran_on,
        "warm_seconds": round(warm_seconds, 1),
        "grpo_seconds": round(grpo_seconds, 1),
        "warm_from": str(reused) if reused else None,
        "warm_start": warm_start,
        "frac_reward_zero_std": [round(z, 3) for z in zero_std],
        "curves": str(curves),
        "overrides": overrides,
        "args": {k: str(v) for k, v in vars(args).items()},
    }
    (out / "run.json").write_text(json.dumps(run, indent=1, default=str))
    return {**run, "cuts": cuts, "horizon": horizon}


def decision_curves(history: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each ``decision/`` metric the rewards logged (``rewards.components.decision_metrics``),
    per GRPO step, rounded: what the sampled replies decided while GRPO trained."""
    names = sorted({k for row in history for k in row if k.startswith("decision/")})
    return {
        name.removeprefix("decision/"): [round(r[name], 3) for r in history if name in r]
        for name in names
    }


def decision_lines(run: dict[str, Any]) -> list[str]:
    """The training batches' decisions per sampling, when the run logged them. A step that
    trains again on earlier samples (``training.num_iterations`` > 1) logs none."""
    curves = run.get("decisions") or {}
    if not curves:
        return []
    lines = [
        "Sampled replies per sampling of the GRPO steps (training batches, each decision's "
        "share of them):",
        "",
    ]
    lines += [f"- `{name}`: {values}" for name, values in curves.items()]
    return [*lines, ""]


WARM_RECORD = "warm_start.json"
"""Written beside a warm adapter: its SFT steps, seconds and config overrides, so a run that
reuses the adapter (``--steps-warm``) still counts the warm start's time against the hour and
its report says how to train the adapter again."""


def warm_record(folder: Path) -> dict[str, Any]:
    """How a reused warm adapter was trained, from its record; ``seconds`` is None when the
    adapter came without one (then the run's time target cannot be shown)."""
    path = Path(folder) / WARM_RECORD
    if path.is_file():
        return {**json.loads(path.read_text()), "from": str(folder)}
    return {"sft_steps": None, "seconds": None, "from": str(folder)}


def scripted_cuts(rows: list[dict[str, Any]], out: Path) -> dict[str, Any]:
    """The scripted baselines on the held-out cuts, saved beside the stages'."""
    results = {name: evaluate_cuts(name, rows, 0) for name in SCRIPTED}
    for name, result in results.items():
        (out / f"cuts_{name}.json").write_text(json.dumps(result, default=str))
    return results


def scripted_horizon(episodes: int, out: Path) -> dict[str, Any]:
    """The scripted baselines in the held-out episodes, saved beside the stages'."""
    results = {name: evaluate_horizon(name, episodes, 0, 0) for name in HORIZON_SCRIPTED}
    for name, result in results.items():
        (out / f"horizon_{name}.json").write_text(json.dumps(result, default=str))
    return results


STAGES = ("untrained", "warm", "grpo")


def load_steps(out: Path) -> dict[str, Any]:
    """A finished steps run from its folder, baselines first, then the stages in order. A run
    saved before the baselines were (they are deterministic and take seconds) gets them
    evaluated again on its own seeds, so a report never compares GRPO with the warm start
    alone for want of ``always_file``."""
    run = json.loads((out / "run.json").read_text())
    saved = {
        kind: {
            p.stem.removeprefix(f"{kind}_"): json.loads(p.read_text())
            for p in out.glob(f"{kind}_*.json")
        }
        for kind in ("cuts", "horizon")
    }
    if any(name not in saved["cuts"] for name in SCRIPTED):
        saved["cuts"].update(scripted_cuts(cut_rows(int(run["args"]["episodes"])), out))
    if any(name not in saved["horizon"] for name in HORIZON_SCRIPTED):
        saved["horizon"].update(scripted_horizon(int(run["args"]["horizon_episodes"]), out))
    for kind, order in (("cuts", SCRIPTED + STAGES), ("horizon", HORIZON_SCRIPTED + STAGES)):
        run[kind] = {name: saved[kind][name] for name in order if name in saved[kind]}
    if "decisions" not in run and (out / "log_history.csv").is_file():
        from pipeline.training.trainer import read_history

        run["decisions"] = decision_curves(read_history(out / "log_history.csv"))
    return run


def steps_markdown(run: dict[str, Any], command: str) -> list[str]:
    """Tables of a steps run: decision cuts, episodes, paired gains, and the targets checked."""
    cuts, horizon = run["cuts"], run["horizon"]
    lines = [
        f"Command: `{command}` (run on {run.get('machine', '?')}); {run['seconds']:.0f} s in all "
        f"({warm_phrase(run)}, GRPO {run['grpo_seconds']:.0f} s); "
        f"frac_reward_zero_std per GRPO step {run['frac_reward_zero_std']}; config "
        f"`{CONFIG}` with `{' '.join(run['overrides'][1:])}`. Reward curves: `{run['curves']}`.",
        "",
        "Held-out AML-easy decision cuts (one greedy reply each, scored by the training rewards):",
        "",
        *stage_table(
            cuts, "cuts", ("decision_accuracy", "decision_rate", "valid_call_rate", "grade")
        ),
        "",
        "Held-out AML-easy episodes, receding horizon (each turn a plan; its first call runs):",
        "",
        *stage_table(horizon, "episodes", ("grade", "decision_rate", "decision_accuracy")),
    ]
    lines += ["", "| comparison | paired difference [95% CI] |", "|---|---|"]
    gains = {}
    for before in ("always_file", "warm", "untrained"):
        if before in cuts and "grpo" in cuts:
            gains[before] = paired_difference(
                cuts[before]["episodes"], cuts["grpo"]["episodes"], "decision_accuracy"
            )
            lines.append(f"| cuts: grpo - {before}, decision accuracy | {fmt(gains[before])} |")
    if "warm" in horizon and "grpo" in horizon:
        diff = paired_difference(horizon["warm"]["episodes"], horizon["grpo"]["episodes"])
        lines.append(f"| episodes: grpo - warm, grade | {fmt(diff)} |")
    lines += ["", *decision_lines(run), *extension_lines(run), *steps_targets(run, gains)]
    return lines


def extension_lines(run: dict[str, Any]) -> list[str]:
    """Where the cut table holds cuts scored after the run (``--extend-cuts``), say which."""
    lines = []
    for ext in run.get("extended", []):
        first, last = ext["offset"] + 1, ext["offset"] + ext["cuts"]
        spent = ", ".join(f"{stage} {sec:.0f} s" for stage, sec in ext["seconds"].items())
        lines.append(
            f"Cuts {first}-{last} were scored after the run (`--extend-cuts {ext['cuts']}`: "
            f"{spent}; not in the run's time) for {', '.join(ext['stages'])}; a stage not named "
            "keeps its own count, and its comparisons are unpaired."
        )
    for ext in run.get("extended_horizon", []):
        spent = ", ".join(f"{stage} {sec:.0f} s" for stage, sec in ext["seconds"].items())
        lines.append(
            f"The receding-horizon episodes of {', '.join(ext['stages'])} were played after the "
            f"run on the first {ext['episodes']} held-out seeds (`--extend-horizon "
            f"{ext['episodes']}`, {ext['lockstep']} at a time: {spent}; not in the run's time)."
        )
    return [*lines, ""] if lines else []


LABELS = {
    "decision_accuracy": "decision acc.",
    "decision_rate": "decided",
    "valid_call_rate": "valid calls",
    "grade": "grade",
}


def stage_table(results: dict[str, Any], unit: str, metrics: tuple[str, ...]) -> list[str]:
    """One markdown row per stage: its count and each metric with its 95% interval."""
    head = " | ".join(LABELS[m] + (" [95% CI]" if i == 0 else "") for i, m in enumerate(metrics))
    lines = [f"| policy / stage | {unit} | {head} |", "|---|---|" + "---|" * len(metrics)]
    for stage, result in results.items():
        t = interval_table(result["episodes"])["all"]
        cells = " | ".join(fmt(t[m]) for m in metrics)
        lines.append(f"| {stage} | {t['grade']['n']} | {cells} |")
    return lines


def steps_targets(run: dict[str, Any], gains: dict[str, Any]) -> list[str]:
    """Each target of issue 26 with "met" only where its own condition holds."""
    cuts = run["cuts"]
    acc = {s: interval_table(r["episodes"])["all"]["decision_accuracy"] for s, r in cuts.items()}
    # Both rivals must be there: without always_file the best one cannot be chosen.
    rival = max(("always_file", "warm"), key=lambda s: acc[s]["mean"] if s in acc else 2)
    gain = gains.get(rival)
    shown = gain is not None and gain["mean"] >= TARGET_GAIN and gain["low"] > 0
    first_zero_std = (run["frac_reward_zero_std"] or [1.0])[0]
    checks = [
        (
            f"decision accuracy >= {rival} + {TARGET_GAIN:.2f}, paired interval above 0",
            shown,
            f"grpo - {rival} = {fmt(gain) if gain else 'n/a'}",
        ),
        (f"aim: decision accuracy >= {AIM}", acc["grpo"]["mean"] >= AIM, fmt(acc["grpo"])),
        ("first GRPO step frac_reward_zero_std <= 0.5", first_zero_std <= 0.5, str(first_zero_std)),
    ]
    seconds = total_seconds(run)
    name = f"run under {TIME_LIMIT_S // 60} min"
    if seconds is None:
        timing = (
            f"{name}: not shown (warm start reused from `{run['warm_from']}`, its time unknown)"
        )
    else:
        timing = f"{name}: {'met' if seconds < TIME_LIMIT_S else 'NOT met'} ({seconds:.0f} s)"
    return [
        "Targets: "
        + "; ".join([*(f"{n}: {'met' if ok else 'NOT met'} ({v})" for n, ok, v in checks), timing])
    ]


def reused_seconds(run: dict[str, Any]) -> float | None:
    """The SFT seconds of the warm adapter a run reused, from its record (None if unrecorded)."""
    return (run.get("warm_start") or {}).get("seconds")


def total_seconds(run: dict[str, Any]) -> float | None:
    """The run's own seconds plus, when it reused a warm adapter, that adapter's SFT seconds."""
    if not run.get("warm_from"):
        return run["seconds"]
    reused = reused_seconds(run)
    return None if reused is None else run["seconds"] + reused


def warm_phrase(run: dict[str, Any]) -> str:
    """How the run got its warm start, for the report's command line."""
    if not run.get("warm_from"):
        return f"warm start + model load {run['warm_seconds']:.0f} s"
    reused = reused_seconds(run)
    trained = "its training time not recorded" if reused is None else f"trained in {reused:.0f} s"
    settings = (run.get("warm_start") or {}).get("overrides")
    if settings:  # the adapter's own config, so the warm start can be trained again
        trained += f" with `{' '.join(settings)}`"
    return (
        f"warm start reused from `{run['warm_from']}` ({trained}, counted in the time target), "
        f"model load {run['warm_seconds']:.0f} s"
    )
