"""Every tunable number of the fraud environment, one line of reason each."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from env.base import EnvConfig

Family = Literal["refund_abuse", "mule_cashout", "merchant_collusion", "account_takeover", "random"]
FAMILIES: tuple[str, ...] = (
    "refund_abuse",
    "mule_cashout",
    "merchant_collusion",
    "account_takeover",
)


class FraudConfig(EnvConfig):
    """World size, fraud mechanics, detector noise, the scripted defender and grade weights."""

    max_steps: int = Field(default=20, ge=4, description="World ticks; the reference used 20")
    family: Family = Field(default="random", description="Scheme family; random mixes all four")
    clean_share: float = Field(
        default=0.2, ge=0.0, le=1.0, description="Defender episodes with no ring at all"
    )
    min_users: int = Field(default=12, ge=8, description="Fewest accounts in a world")
    max_users: int = Field(default=20, ge=8, description="Most accounts in a world")
    min_merchants: int = Field(default=3, ge=2, description="Fewest merchants")
    max_merchants: int = Field(default=8, ge=2, description="Most merchants")
    reserve_mules: int = Field(default=2, ge=0, description="Spare mules a ring can rotate to")
    fresh_devices: int = Field(default=3, ge=0, description="Device rotations the ring can afford")
    transfer_cap: float = Field(
        default=0.15, gt=0, le=1, description="Most of the stolen total one transfer may move"
    )
    cashout_cap: float = Field(
        default=0.15, gt=0, le=1, description="Most of the total one mule may withdraw per tick"
    )
    fraud_threshold: float = Field(
        default=0.8, gt=0, le=1, description="Laundered share that ends the episode (ring wins)"
    )
    feature_shift: float = Field(
        default=0.75, ge=0, description="Mean shift of ring accounts' features in noise sd units"
    )
    legit_activity: float = Field(
        default=0.35, ge=0, le=1, description="Chance a legit account transacts in a tick"
    )
    false_alert_rate: float = Field(
        default=0.06, ge=0, le=1, description="Chance a legit transaction raises an alert"
    )
    challenge_fail_ring: float = Field(
        default=0.75, ge=0, le=1, description="Chance a ring account fails step-up auth"
    )
    challenge_fail_legit: float = Field(
        default=0.12, ge=0, le=1, description="Chance a legit customer fails step-up auth"
    )
    suspicion_decay: float = Field(
        default=0.9, gt=0, le=1, description="Scripted defender's suspicion kept per tick"
    )
    freeze_threshold: tuple[float, float] = Field(
        default=(0.45, 0.8), description="Range of the scripted defender's hidden freeze bar"
    )
    alert_bias: float = Field(
        default=0.12, ge=0, description="Most hidden bias in the alert levels a ring sees"
    )
    defender_weights: dict[str, float] = Field(
        default={
            "decision": 0.15,
            "precision": 0.2,
            "recall": 0.15,
            "prevented_loss": 0.25,
            "speed": 0.1,
            "friction": 0.15,
        },
        description="Defender grade weights (sum 1)",
    )
    fraudster_weights: dict[str, float] = Field(
        default={"laundered": 0.6, "stealth": 0.25, "decision": 0.15},
        description="Fraudster grade weights (sum 1)",
    )
