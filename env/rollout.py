"""Play policies in environments: the one loop shared by evaluation, datasets and benchmarks."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from env.base import EpisodeReport, ToolCallAction, ToolEnvironment, ToolObservation


class Policy(Protocol):
    """Chooses tool calls from observations.

    ``reset`` receives the environment only so that an oracle can read ``env.reveal()``; honest
    policies must use the observations alone.
    """

    def reset(self, env: ToolEnvironment, observation: ToolObservation) -> None: ...

    def act(self, observation: ToolObservation) -> ToolCallAction: ...


@dataclass
class Episode:
    """A played episode: the calls made, what came back, and the report."""

    env: str
    task: str
    seed: int
    actions: list[ToolCallAction] = field(default_factory=list)
    observations: list[ToolObservation] = field(default_factory=list)
    report: EpisodeReport | None = None
    truth: dict[str, Any] = field(default_factory=dict)

    @property
    def plan(self) -> list[dict[str, Any]]:
        """The calls as plain dicts, ready to render as a completion."""
        return [{"tool": a.tool, "arguments": a.arguments} for a in self.actions]


def play(env: ToolEnvironment, policy: Policy, task: str, seed: int) -> Episode:
    """Run one episode to the end (terminal tool or step limit)."""
    obs = env.reset(seed=seed, task=task)
    episode = Episode(env.name, task, seed, observations=[obs])
    policy.reset(env, obs)
    while not obs.done:
        action = policy.act(obs)
        obs = env.step(action)
        episode.actions.append(action)
        episode.observations.append(obs)
    episode.report = env.report()
    episode.truth = env.reveal()
    return episode


def replay(
    env: ToolEnvironment, task: str, seed: int, calls: list[ToolCallAction | dict[str, Any]]
) -> EpisodeReport:
    """Rebuild the episode and replay fixed calls; calls after the episode ended are ignored."""
    env.reset(seed=seed, task=task)
    for call in calls:
        if env.done:
            break
        env.step(call)
    return env.report()
