"""Steps mode: prompts cut along reference trajectories, so the prompt carries the evidence.

A plan prompt holds only the opening observation, which says nothing about the verdict: the best
blind plan is the majority decision (shared/DESIGN.md, "Step prompts"). Here each seeded episode
is played by a reference policy and cut at one or more points; a row's prompt is the conversation
up to the cut -- system prompt, opening, then each earlier call as an assistant tool call and its
result as a tool message, exactly as interactive mode renders them -- and the completion plans from
there to a decision. The row's ``prefix`` column holds the earlier calls as JSON, so the rewards
replay prefix + reply in-process (``rewards.replay``) and grade the whole episode.

References: the environment's steps reference (``env.registry.references``: the honest heuristic,
or where the heuristic's choice of calls depends on what it found -- AML's stops at the first
suspicious family -- a variant whose calls depend only on the case's surface), and a perturbed copy in which each non-terminal call is
replaced, with probability ``detour``, by a random call of the same environment that runs without
an error (drawn from the env's own ``random`` policy), so prefixes also hold detours and missing
evidence. Cut points (``cuts``): ``decision`` (just before the reference's first call that commits
the outcome: its terminal call, or a call of the env's ``decision_kinds`` such as a refund),
``all`` (before every call) or ``random:N`` (N distinct cuts drawn per episode). An episode whose
reference never decides gives no ``decision`` row. Every choice comes from a ``random.Random``
seeded by the row's (env, task, seed), so a dataset is the same in every process.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from env.base import ToolCallAction, ToolEnvironment, ToolObservation
from env.registry import policies, references
from env.rollout import play
from pipeline.data.prompts import render_observation

CUT_KINDS = ("decision", "all", "random:N")
DETOUR_TRIES = 12
"""Random calls drawn before a detour is given up (the reference's own call is kept)."""


@dataclass(frozen=True)
class Reference:
    """A played reference trajectory: its calls and the observations (opening first)."""

    calls: list[dict[str, Any]]
    observations: list[ToolObservation]
    decision_at: int | None
    """Index of the first call that commits the outcome (a terminal call, or one of the env's
    ``decision_kinds``), or None when the reference never decided."""

    def rest(self, cut: int) -> list[dict[str, Any]]:
        """The reference's calls from ``cut`` to the end of its episode: the reply it would give
        at that cut (past a refund or flag, on to the terminal call)."""
        return self.calls[cut:]


def parse_cuts(spec: str) -> tuple[str, int]:
    """``decision`` | ``all`` | ``random:N`` -> (kind, N); N is 0 unless the kind is random."""
    text = str(spec).strip()
    if text in ("decision", "all"):
        return text, 0
    match = re.fullmatch(r"random:(\d+)", text)
    if match and int(match[1]) > 0:
        return "random", int(match[1])
    raise ValueError(f"unknown cuts {spec!r}; choose from {', '.join(CUT_KINDS)} (N >= 1)")


def episode_rng(env_name: str, task: str, seed: int, salt: str = "steps") -> random.Random:
    """The row's own generator: the same (env, task, seed) draws the same detours and cuts."""
    return random.Random(f"{salt}/{env_name}/{task}/{seed}")


def reference(
    env: ToolEnvironment, task: str, seed: int, detour: float = 0.0, policy: str = "reference"
) -> Reference:
    """Play the env's steps ``policy`` (``env.registry.references``) on (task, seed); with
    ``detour`` > 0, replace its non-terminal calls by random error-free calls with that
    probability (see the module docstring)."""
    name = env.name
    episode = play(env, references(name)[policy](seed), task or None, seed)
    calls, observations = episode.plan, episode.observations
    if detour > 0:
        rng = episode_rng(name, task, seed)
        calls, observations = _with_detours(env, task, seed, calls, detour, rng)
    specs = type(env).tool_specs_by_name()
    kinds = type(env).decision_kinds
    decision_at = next(
        (
            i
            for i, c in enumerate(calls)
            if c["tool"] in specs and (specs[c["tool"]].terminal or specs[c["tool"]].kind in kinds)
        ),
        None,
    )
    return Reference(calls, observations, decision_at)


def _with_detours(
    env: ToolEnvironment,
    task: str,
    seed: int,
    calls: list[dict[str, Any]],
    detour: float,
    rng: random.Random,
) -> tuple[list[dict[str, Any]], list[ToolObservation]]:
    """The calls with detours and the observations they got (opening first), up to the end."""
    specs = type(env).tool_specs_by_name()
    wanderer = policies(env.name)["random"](rng.randrange(2**31))
    obs = env.reset(seed=seed, task=task or None)
    wanderer.reset(env, obs)
    out, observations = [], [obs]
    for call in calls:
        chosen = call
        spec = specs.get(call["tool"])
        if spec is not None and not spec.terminal and rng.random() < detour:
            chosen = _random_call(env, wanderer, obs, specs) or call
        out.append(chosen)
        obs = env.step(chosen)
        observations.append(obs)
        if env.done:
            break
    return out, observations


def _random_call(
    env: ToolEnvironment, wanderer: Any, obs: ToolObservation, specs: dict[str, Any]
) -> dict[str, Any] | None:
    """A random non-terminal call that runs without an error from the current state, or None."""
    for _ in range(DETOUR_TRIES):
        action = wanderer.act(obs)
        spec = specs.get(action.tool)
        if spec is None or spec.terminal:
            continue
        trial = copy.deepcopy(env)
        if trial.step(action).error is None:
            return {"tool": action.tool, "arguments": dict(action.arguments)}
    return None


def cut_points(ref: Reference, cuts: str, rng: random.Random) -> list[int]:
    """Where to cut ``ref``: the number of reference calls each prompt shows. Every cut leaves
    the episode open (at most the decision cut, before the first terminal call)."""
    kind, n = parse_cuts(cuts)
    if kind == "decision":
        return [] if ref.decision_at is None else [ref.decision_at]
    end = ref.decision_at + 1 if ref.decision_at is not None else len(ref.calls)
    points = list(range(end))
    if kind == "random":
        return sorted(rng.sample(points, min(n, len(points))))
    return points


def tool_turns(
    calls: Sequence[ToolCallAction | dict[str, Any]],
    observations: Sequence[ToolObservation],
    result_style: str = "full",
) -> list[dict[str, Any]]:
    """Each call as an assistant tool call and its result as a tool message: the messages TRL's
    ``environment_factory`` loop appends, which the interactive warm start and steps prompts
    both use."""
    messages: list[dict[str, Any]] = []
    for call, observation in zip(calls, observations, strict=True):
        tool, arguments = (
            (call["tool"], call["arguments"])
            if isinstance(call, dict)
            else (call.tool, call.arguments)
        )
        function = {"name": tool, "arguments": dict(arguments)}
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": function}],
            }
        )
        messages.append(
            {"role": "tool", "name": tool, "content": render_observation(observation, result_style)}
        )
    return messages


def prefix_json(calls: Sequence[dict[str, Any]]) -> str:
    """The ``prefix`` column: the earlier calls as JSON text (Arrow keeps each call's own keys)."""
    return json.dumps(
        [{"tool": c["tool"], "arguments": c["arguments"]} for c in calls], ensure_ascii=False
    )
