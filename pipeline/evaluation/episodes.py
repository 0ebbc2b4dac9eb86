"""Evaluate a policy on seeded episodes of any registered environment.

``evaluate`` plays ``episodes`` seeds of each task from a seed split (``env.seeds``), so the same
call always plays the same worlds, and returns a ``summary`` (mean grade, decision accuracy, per
task and per hidden category) and the ``episodes`` with the truth revealed after each one.
Policies are registry names (``heuristic``, ``oracle``, ...) or model specs (``checkpoint:PATH``,
``openai:MODEL``), which ``pipeline.evaluation.model_policy`` builds.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import env as registry
from env.rollout import Policy, play
from env.seeds import split_seeds

logger = logging.getLogger(__name__)
MODEL_PREFIXES = ("checkpoint:", "openai:")
CLEAN_VERDICTS = {"clean", "legitimate", "benign", "none", "no_crime"}


def resolve_policy(
    spec: str, env_name: str, seed: int, mode: str = "interactive", **settings: Any
) -> Policy:
    """A policy from a registry name or a ``checkpoint:``/``openai:`` model spec (``settings``:
    ``pipeline.evaluation.backends.GenerationSettings`` fields for the models, e.g. plan_max_new_tokens)."""
    if spec.startswith(MODEL_PREFIXES):
        from pipeline.evaluation.model_policy import make_model_policy  # lazy: heavy imports

        return make_model_policy(spec, env_name, mode, seed, **settings)
    table = registry.policies(env_name)
    if spec not in table:
        raise KeyError(f"unknown policy {spec!r} for {env_name}; choose from {', '.join(table)}")
    return table[spec](seed)


def parse_tasks(env_name: str, tasks: str | Iterable[str] | None) -> list[str]:
    """``"all"``/None -> every task; a comma list or iterable -> those, checked."""
    known = list(registry.env_class(env_name).tasks)
    if tasks is None or tasks == "all":
        return known
    chosen = [t.strip() for t in tasks.split(",")] if isinstance(tasks, str) else list(tasks)
    unknown = [t for t in chosen if t not in known]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown} for {env_name}; choose from {known}")
    return chosen


def _category(truth: dict[str, Any]) -> str:
    for key in ("category", "typology", "scenario", "family", "label", "verdict"):
        value = truth.get(key)
        if isinstance(value, str) and value:
            return value
    return "unknown"


def _truth_positive(truth: dict[str, Any]) -> bool | None:
    """Whether the hidden case calls for action (suspicious/crime), if the truth says."""
    verdict = truth.get("verdict")
    if isinstance(verdict, str):
        return verdict.lower() not in CLEAN_VERDICTS
    if isinstance(truth.get("clean"), bool):
        return not truth["clean"]
    return None


def _decision_correct(env_obj, episode) -> float:
    """1/0 from the env's own grade component when present, else from verdict vs decision."""
    report = episode.report
    if report.grade.decision is None:
        return 0.0
    comp = report.grade.components.get("decision")
    if comp is not None:
        return 1.0 if comp >= 0.5 else 0.0
    positive = _truth_positive(episode.truth)
    return 0.0 if positive is None else float(positive)


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def summarize(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean grade and decision accuracy overall, per task and per hidden category."""
    groups: dict[str, dict[str, list[dict]]] = {"per_task": defaultdict(list)}
    groups["per_category"] = defaultdict(list)
    for ep in episodes:
        groups["per_task"][ep["task"]].append(ep)
        groups["per_category"][ep["category"]].append(ep)

    def stats(eps: list[dict]) -> dict[str, float]:
        return {
            "episodes": len(eps),
            "mean_grade": _mean([e["grade"] for e in eps]),
            "decision_accuracy": _mean([e["decision_correct"] for e in eps]),
            "decision_rate": _mean([float(e["decision"] is not None) for e in eps]),
            "mean_steps": _mean([e["steps"] for e in eps]),
        }

    summary: dict[str, Any] = stats(episodes)
    for name, table in groups.items():
        summary[name] = {key: stats(eps) for key, eps in sorted(table.items())}
    summary["per_typology"] = summary["per_category"]
    return summary


def episode_row(environment: Any, episode: Any, task: str, seed: int) -> dict[str, Any]:
    """One evaluated episode (``episode.report`` and ``episode.truth``) as a result row."""
    report = episode.report
    return {
        "seed": seed,
        "task": task,
        "grade": report.grade.total,
        "components": report.grade.components,
        "decision": report.grade.decision,
        "decision_correct": _decision_correct(environment, episode),
        "steps": report.steps,
        "n_errors": report.n_errors,
        "total_reward": round(sum(report.step_rewards), 4),
        "metrics": report.metrics,
        "category": _category(episode.truth),
        "truth": episode.truth,
    }


def evaluate(
    env_name: str,
    policy_spec: str,
    tasks: str | Iterable[str] | None = "all",
    episodes: int = 100,
    split: str = "eval",
    seed_offset: int = 0,
    progress: bool = True,
    mode: str = "interactive",
    on_episode: Callable[[dict[str, Any]], None] | None = None,
    settings: dict[str, Any] | None = None,
    lockstep: int = 0,
) -> dict[str, Any]:
    """Play ``episodes`` seeds per task and summarise; see the module docstring.

    ``lockstep`` > 0 (``checkpoint:`` policies, greedy) plays every episode at once and decodes
    each turn's replies in batches of that size (``pipeline.decoding.lockstep``): same episodes, far
    fewer forward passes."""
    task_list = parse_tasks(env_name, tasks)
    jobs = [
        (task, seed) for task in task_list for seed in split_seeds(split, episodes, seed_offset)
    ]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(jobs), desc=f"{env_name}:{policy_spec}", unit="ep")
    errors: list[int] = []
    played = _play_all(env_name, policy_spec, jobs, mode, settings, lockstep, errors)
    rows = []
    for (task, seed), (environment, episode) in zip(jobs, played, strict=True):
        rows.append(episode_row(environment, episode, task, seed))
        if on_episode is not None:
            on_episode(rows[-1])
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    internal_errors = sum(errors)
    if internal_errors:
        logger.warning("%s: %d internal errors", env_name, internal_errors)
    summary = summarize(rows)
    summary.update(
        env=env_name,
        policy=policy_spec,
        split=split,
        tasks=task_list,
        episodes_per_task=episodes,
        internal_errors=internal_errors,
        settings=dict(settings or {}),  # the model's generation settings, for before/after
    )
    return {"summary": summary, "episodes": rows}


def _play_all(
    env_name: str,
    spec: str,
    jobs: list[tuple[str, int]],
    mode: str,
    settings: dict[str, Any] | None,
    lockstep: int,
    internal_errors: list[int],
) -> Iterator[tuple[Any, Any]]:
    """``(environment, episode)`` of every job, in order, each as soon as it is played; the
    envs' internal error count is appended to ``internal_errors`` at the end."""
    settings = settings or {}
    environment = registry.make(env_name)
    if lockstep > 0 and spec.startswith("checkpoint:"):
        from pipeline.decoding.lockstep import play_lockstep
        from pipeline.evaluation.backends import GenerationSettings, load_backend
        from pipeline.evaluation.model_policy import ModelPolicy

        generation = GenerationSettings(**settings)

        def policy(backend: Any, seed: int) -> ModelPolicy:
            return ModelPolicy(backend, env_name, mode, seed, generation)

        backend = load_backend(spec, generation)
        finished = None
        if mode == "steps" and generation.horizon == "receding":
            from pipeline.decoding.trainer_sampling import first_call_reached

            finished = first_call_reached(backend.tokenizer)  # only the first call is played
        episodes, errors = play_lockstep(env_name, backend, policy, jobs, lockstep, finished)
        internal_errors.append(errors)
        yield from ((environment, e) for e in episodes)
        return
    for task, seed in jobs:
        policy = resolve_policy(spec, env_name, seed, mode, **settings)
        yield environment, play(environment, policy, task, seed)
    internal_errors.append(environment.internal_errors)
