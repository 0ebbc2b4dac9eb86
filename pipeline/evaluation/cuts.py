"""Evaluation at cut points: one reply per held-out steps prompt, scored by the training rewards.

The full test of a steps-trained model is a receding-horizon episode (``pipeline.evaluation.model_policy``, mode
``steps``), which decodes a reply per turn. At the ``decision`` cut the evidence is already in the
prompt, so one reply per episode shows whether the model reads it: this scores that reply the way
the rewards do (prefix + reply replayed in-process, ``rewards.score``), cheap enough for hundreds of
seeds on a CPU. Decision accuracy counts only the policy's own decision: a reply that never reaches
a terminal call is wrong, exactly as an undecided episode.

Policies: ``checkpoint:PATH`` (batched greedy decoding, ``pipeline.decoding.batch_generation``),
``openai:MODEL`` (one chat request per row), ``reference`` (the rest of the row's own reference
trajectory: the honest ceiling of this prompt) and the env's registered scripted policies, whose
reply is the plan they play from the opening (``always_file`` files whatever the evidence says).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import env as registry
from env.rollout import play
from pipeline.data.steps import reference
from pipeline.evaluation.episodes import _category, _decision_correct, summarize
from rewards.protocol import render_completion
from rewards.replay import CACHE, QUALITY_VALID
from rewards.score import score_batch

logger = logging.getLogger(__name__)
CPU_BATCH = 8
GPU_BATCH = 64
"""Replies decoded together at held-out cuts: 8 on a CPU (as before the GPU path), 64 on a GPU,
where a held-out set of 100 cuts then takes two batches."""


def cut_rows(
    env_name: str,
    tasks: Sequence[str] | None,
    episodes: int,
    split: str = "eval",
    cuts: str = "decision",
    prompt_style: str = "compact",
    result_style: str = "compact",
    detour: float = 0.0,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """The steps prompts of ``episodes`` seeds (per task cycle) of ``split``, from its
    ``offset``-th seed on."""
    from pipeline.data.dataset import build_rows

    return build_rows(
        env_name, tasks, episodes, split, offset, "steps", prompt_style, cuts, detour, result_style
    )


def scripted_replies(rows: list[dict[str, Any]], policy: str) -> list[str]:
    """Replies of a scripted policy: ``reference`` continues the row's own trajectory; a
    registered policy replies with the plan it plays from the opening."""
    replies, envs = [], {}
    for row in rows:
        env = envs.setdefault(row["env"], registry.make(row["env"]))
        if policy == "reference":
            ref = reference(env, row["task"], row["seed"])
            calls = ref.rest(row["cut"])
        else:
            table = registry.policies(row["env"])
            if policy not in table:
                raise KeyError(f"unknown policy {policy!r}; choose reference or {', '.join(table)}")
            calls = play(env, table[policy](row["seed"]), row["task"] or None, row["seed"]).plan
        replies.append(render_completion(calls))
    return replies


def batched_replies(
    path: str,
    rows: list[dict[str, Any]],
    max_new_tokens: int = 96,
    batch_size: int | None = None,
    prompt_style: str = "compact",
    train_template: bool = True,
    no_repeat_ngram: int = 0,
) -> tuple[list[str], list[list[int]]]:
    """Greedy replies (text and token ids) of a local model or adapter to each row's prompt,
    decoded in batches and stopped at the first complete terminal call (the replay ignores
    anything after it). ``train_template`` renders with the training template (qwen2_5,
    ``prompt_style``'s tool list) even for a base model with a template of its own, as steps
    prompts need; plan-mode evaluation keeps a base model's own template. ``no_repeat_ngram``
    > 0 forbids a reply to repeat any of its own n-grams (``batch_generation.no_repeat_ngram``).
    ``batch_size`` None: a GPU decodes a held-out set in a few batches of 64, a CPU in batches of 8."""
    from pipeline.decoding.activation import (
        generation_prompt_tokens,
        reads_context_as_base,
        stored_rows,
    )
    from pipeline.decoding.batch_generation import generate
    from pipeline.decoding.batch_generation import no_repeat_ngram as guard
    from pipeline.decoding.trainer_sampling import decision_reached, terminal_tools
    from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings

    settings = GenerationSettings(prompt_style=prompt_style, train_template=train_template)
    backend = CheckpointBackend(path, settings)
    tok = backend.tokenizer
    texts = [
        tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False)
        for r in rows
    ]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    start = time.perf_counter()
    if batch_size is None:
        batch_size = GPU_BATCH if backend.device == "cuda" else CPU_BATCH
    decode = functools.partial(
        generate,
        backend.model,
        max_new_tokens=max_new_tokens,
        stop_ids=backend.stop_ids,
        pad_id=tok.pad_token_id,
        finished=decision_reached(tok, terminal_tools({r["env"] for r in rows})),
        ban=guard(no_repeat_ngram) if no_repeat_ngram else None,
        decide=backend.decision_rate.decide if backend.decision_rate else None,
    )
    # On a CPU each case's context comes from the process's store: encoded once for every stage
    # of a run whose model reads it as the base model does (pipeline/decoding/activation.py).
    if backend.device == "cpu" and reads_context_as_base(backend.model):
        tokens: list[list[int]] = [[] for _ in ids]
        invocation = generation_prompt_tokens(tok)
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for begin in range(0, len(order), batch_size):
            chosen = order[begin : begin + batch_size]
            prompts = [ids[i] for i in chosen]
            prefix, kept = stored_rows(backend.model, prompts, invocation)
            out = decode(prompts, batch_size=len(chosen), prefix=prefix, resume=kept)
            for i, reply in zip(chosen, out, strict=True):
                tokens[i] = reply
    else:
        tokens = decode(ids, batch_size=batch_size)
    logger.info(
        "%s: %d replies (%d prompt tokens, %d new) in %.0f s",
        path,
        len(rows),
        sum(map(len, ids)),
        sum(map(len, tokens)),
        time.perf_counter() - start,
    )
    return [tok.decode(t, skip_special_tokens=True) for t in tokens], tokens


def checkpoint_replies(
    path: str,
    rows: list[dict[str, Any]],
    max_new_tokens: int = 96,
    batch_size: int | None = None,
    prompt_style: str = "compact",
    no_repeat_ngram: int = 0,
) -> list[str]:
    """Greedy replies to steps prompts (``batched_replies`` with the training template)."""
    return batched_replies(
        path, rows, max_new_tokens, batch_size, prompt_style, no_repeat_ngram=no_repeat_ngram
    )[0]


def openai_replies(model: str, rows: list[dict[str, Any]], max_new_tokens: int = 256) -> list[str]:
    """Replies of an OpenAI-compatible endpoint (``pipeline.evaluation.backends.OpenAIBackend``), one per row."""
    from pipeline.evaluation.backends import GenerationSettings, load_backend
    from pipeline.evaluation.model_policy import text_protocol

    settings = GenerationSettings(max_new_tokens=max_new_tokens, plan_max_new_tokens=max_new_tokens)
    backend = load_backend(f"openai:{model}", settings)
    replies = []
    for i, row in enumerate(rows):
        message = backend.complete(text_protocol(row["prompt"]), None, i) or {}
        text = message.get("content") or ""
        calls = [c.get("function", c) for c in message.get("tool_calls") or []]
        if calls:  # native tool calls become the text protocol the rewards read
            text += "\n" + render_completion(
                [
                    {"tool": c.get("name"), "arguments": _arguments(c.get("arguments"))}
                    for c in calls
                ]
            )
        replies.append(text)
    return replies


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return {"value": raw}
    return raw if isinstance(raw, dict) else {}


def replies_for(policy: str, rows: list[dict[str, Any]], **settings: Any) -> list[str]:
    """The replies of ``policy`` (a model spec or a scripted policy name) to ``rows``."""
    if policy.startswith("checkpoint:"):
        return checkpoint_replies(policy.removeprefix("checkpoint:"), rows, **settings)
    if policy.startswith("openai:"):
        return openai_replies(policy.removeprefix("openai:"), rows, **settings)
    return scripted_replies(rows, policy)


def score_cut_replies(rows: list[dict[str, Any]], replies: list[str]) -> list[dict[str, Any]]:
    """One result row per reply: grade of prefix + reply, the reply's own decision and whether it
    is right, its share of valid calls, and the weighted reward total."""
    scored = score_batch(
        [{**r, "completion": reply} for r, reply in zip(rows, replies, strict=True)]
    )
    envs: dict[str, Any] = {}
    results = []
    for row, reply, score in zip(rows, replies, scored, strict=True):
        outcome = CACHE.outcome(row["env"], row["task"], row["seed"], reply, row["prefix"])
        environment = envs.setdefault(row["env"], registry.make(row["env"]))
        environment.reset(seed=row["seed"], task=row["task"] or None)
        truth = environment.reveal()
        report = outcome.report
        quality = outcome.call_quality
        results.append(
            {
                "seed": row["seed"],
                "task": row["task"],
                "cut": row["cut"],
                "grade": report.grade.total if report.decision_reached else 0.0,
                "components": report.grade.components,
                "decision": report.grade.decision if report.decision_reached else None,
                "decision_correct": _decision_correct(
                    environment, SimpleNamespace(report=report, truth=truth)
                ),
                "valid_calls": (
                    sum(q == QUALITY_VALID for q in quality) / len(quality) if quality else 0.0
                ),
                "n_calls": len(outcome.parse.calls),
                "steps": len(
                    quality
                ),  # the reply's calls (pipeline.evaluation.stats' valid-call rate)
                "n_errors": sum(q != QUALITY_VALID for q in quality),
                "total_reward": score["total"],
                "category": _category(truth),
                "reply": reply,
            }
        )
    return results


def score_policy(policy: str, rows: list[dict[str, Any]], **settings: Any) -> dict[str, Any]:
    """``policy``'s replies to ``rows``, scored: ``{"summary", "episodes"}``. The summary is
    ``pipeline.evaluation.episodes.summarize``'s, plus the valid-call share, the mean weighted reward and
    the seconds it took (replies and scoring)."""
    start = time.perf_counter()
    results = score_cut_replies(rows, replies_for(policy, rows, **settings))
    return scored_cuts(results, time.perf_counter() - start)


def scored_cuts(results: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Scored cut replies with their summary (``score_policy``'s result), also for a table that
    grows by more cuts later (benchmarks/learning_steps_extend.py)."""
    summary = summarize(results)
    n = max(1, len(results))
    summary["valid_calls"] = round(sum(r["valid_calls"] for r in results) / n, 4)
    summary["mean_reward"] = round(sum(r["total_reward"] for r in results) / n, 4)
    summary["seconds"] = round(seconds, 1)
    return {"summary": summary, "episodes": results}


def evaluate_cuts(
    env_name: str,
    policy: str,
    tasks: Sequence[str] | None = None,
    episodes: int = 100,
    split: str = "eval",
    cuts: str = "decision",
    prompt_style: str = "compact",
    result_style: str = "compact",
    **settings: Any,
) -> dict[str, Any]:
    """Score ``policy``'s replies at the cut points of ``episodes`` held-out seeds."""
    rows = cut_rows(env_name, tasks, episodes, split, cuts, prompt_style, result_style)
    result = score_policy(policy, rows, **settings)
    result["summary"].update(
        env=env_name,
        policy=policy,
        split=split,
        mode="steps",
        cuts=cuts,
        prompts=len(rows),
        prompt_style=prompt_style,
        result_style=result_style,
    )
    return result


def before_after(
    cfg: Any, base: str | None, trained: str, episodes: int, reply_tokens: int = 96
) -> dict[str, dict[str, Any]]:
    """The held-out decision-cut table a steps run ends with: the untrained ``base`` model (a
    folder; None leaves it out) and the ``trained`` one, beside the reference and each env's
    ``always_*`` shortcut, on the same ``episodes`` eval seeds of every env and task the run
    trained on."""
    d = cfg.data
    rows = []
    for name in d.envs:
        rows += cut_rows(
            name, d.tasks, episodes, "eval", "decision", d.prompt_style, d.result_style
        )
    shortcuts = sorted(
        {p for name in d.envs for p in registry.policies(name) if p.startswith("always_")}
    )
    table: dict[str, dict[str, Any]] = {}
    stages = [("untrained", f"checkpoint:{base}")] if base else []
    for stage, policy in (
        *stages,
        ("trained", f"checkpoint:{trained}"),
        ("reference", "reference"),
        *((name, name) for name in shortcuts),
    ):
        model = policy.startswith("checkpoint:")
        settings = {"max_new_tokens": reply_tokens, "prompt_style": d.prompt_style} if model else {}
        table[stage] = score_policy(policy, rows, **settings)
    return table


def before_after_lines(table: dict[str, dict[str, Any]]) -> list[str]:
    """The table as aligned text lines (what ``train_grpo.py`` prints)."""
    head = f"{'policy':<14}{'cuts':>6}{'decision acc.':>15}{'decided':>9}{'valid':>8}{'grade':>8}"
    lines = [head + f"{'reward':>9}"]
    for stage, result in table.items():
        s = result["summary"]
        lines.append(
            f"{stage:<14}{s['episodes']:>6}{s['decision_accuracy']:>15.3f}"
            f"{s['decision_rate']:>9.2f}{s['valid_calls']:>8.2f}{s['mean_grade']:>8.3f}"
            f"{s['mean_reward']:>9.3f}"
        )
    return lines
