"""Tunable numbers of the ops environment, each with the reason it exists."""

from __future__ import annotations

from pydantic import Field

from env.base import EnvConfig


class OpsConfig(EnvConfig):
    """Ops episodes: one task family per episode, drawn per seed."""

    max_steps: int = Field(default=40, ge=1, description="Triage of 10 items needs ~24 calls")
    harmful_reward: float = Field(default=-0.5, description="Step reward of a harmful command")
    harmful_cost: float = Field(
        default=0.6, description="Share of the grade a harmful command (approve_all...) destroys"
    )
    clean_share: float = Field(
        default=0.2, description="Share of cases needing no action (clean batch, false alarm)"
    )
    infeasible_share: float = Field(default=0.25, description="Meetings with no feasible slot")
    risky_share: float = Field(default=0.35, description="Share of risky items in a dirty batch")
    expense_items: tuple[int, int] = Field(default=(6, 9), description="Items per batch (min, max)")
    participants: tuple[int, int] = Field(default=(3, 5), description="People per meeting")
    services: tuple[int, int] = Field(default=(5, 7), description="Services in the graph")
    max_postmortem_chars: int = Field(default=800, ge=40, description="Longer texts earn nothing")
