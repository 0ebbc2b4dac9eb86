"""Tunable numbers of the support environment, each with the reason it exists."""

from __future__ import annotations

from pydantic import Field

from env.base import EnvConfig


class SupportConfig(EnvConfig):
    """Support episodes: one ticket, a customer record, a policy book drawn per seed."""

    max_steps: int = Field(default=14, ge=1, description="A ticket needs ~6 calls; room to spare")
    refund_weight: float = Field(default=0.30, description="Right refund amount (or none)")
    escalation_weight: float = Field(default=0.15, description="Right queue (or no escalation)")
    reply_weight: float = Field(default=0.15, description="Reply states the case's facts")
    resolution_weight: float = Field(default=0.10, description="Ticket closed with the right code")
    process_weight: float = Field(default=0.30, description="Checks done before actions")
    violation_cost: float = Field(
        default=0.5,
        description="Each action taken before its required check costs this much process",
    )
    max_reply_chars: int = Field(default=600, ge=40, description="Longer replies earn nothing")
    refund_windows: tuple[int, ...] = Field(
        default=(14, 30, 45), description="Refund windows (days) a policy book may state"
    )
    agent_limits: tuple[int, ...] = Field(
        default=(150, 250, 400), description="Largest refund an agent may issue (else tier 2)"
    )
    abuse_thresholds: tuple[int, ...] = Field(
        default=(3, 4), description="Refunds in 90 days that mark a customer for fraud review"
    )
    lost_after_days: tuple[int, ...] = Field(
        default=(10, 14), description="Days in transit after which a parcel counts as lost"
    )
    restocking_fees: tuple[int, ...] = Field(
        default=(10, 15, 20), description="Percent kept from refunds of opened items"
    )
    misleading_share: float = Field(
        default=0.35, description="Share of tickets whose claim the records contradict"
    )
