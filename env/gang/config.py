"""Every tunable number of the fake-gang environment, with the reason it has its value."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from env.base import EnvConfig


class TaskSettings(BaseModel):
    """Size and difficulty of one task (easy / medium / hard)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    accounts: int = Field(ge=20, description="Accounts in the follower graph")
    steps: int = Field(ge=5, description="Step limit of the task")
    gang_min: int = Field(ge=2, description="Smallest gang")
    gang_max: int = Field(ge=2, description="Largest gang")
    gang_alerts: int = Field(ge=1, description="Gang members among the opening alerts")
    decoy_alerts: int = Field(ge=1, description="Honest accounts among the opening alerts")
    lookalikes: int = Field(ge=0, description="Honest clusters that look gang-like")
    sample: int = Field(ge=0, description="Recently active accounts listed in the opening")
    evade_at: int = Field(ge=0, description="Step at which the gang evades; 0 = never")
    recall_to_win: float = Field(ge=0, le=1, description="Recall needed for success")
    precision_to_win: float = Field(ge=0, le=1, description="Precision needed for success")


DEFAULT_TASKS: dict[str, TaskSettings] = {
    "easy": TaskSettings(
        accounts=50, steps=30, gang_min=6, gang_max=9, gang_alerts=2, decoy_alerts=2,
        lookalikes=1, sample=8, evade_at=0, recall_to_win=0.8, precision_to_win=0.7,
    ),
    "medium": TaskSettings(
        accounts=200, steps=50, gang_min=8, gang_max=12, gang_alerts=2, decoy_alerts=3,
        lookalikes=3, sample=10, evade_at=25, recall_to_win=0.8, precision_to_win=0.7,
    ),
    "hard": TaskSettings(
        accounts=1000, steps=80, gang_min=8, gang_max=13, gang_alerts=1, decoy_alerts=4,
        lookalikes=6, sample=12, evade_at=40, recall_to_win=0.9, precision_to_win=0.8,
    ),
}  # fmt: skip


class GangConfig(EnvConfig):
    """Gang-detection settings; ``max_steps`` set explicitly overrides the per-task limit."""

    tasks: dict[str, TaskSettings] = Field(
        default_factory=lambda: dict(DEFAULT_TASKS), description="Per-task graph and limits"
    )
    clean_share: float = Field(
        default=0.35,
        ge=0,
        le=1,
        description="Episodes with no gang: the answer is an empty set. About AML's clean share "
        "(0.25-0.40): at 0.15 always answering 'gang' was right on 85% of episodes, so no reward "
        "could separate reading the graph from guessing (rewards/README.md)",
    )
    weight_recall: float = Field(default=0.45, ge=0, description="Grade weight of recall")
    weight_precision: float = Field(default=0.40, ge=0, description="Grade weight of precision")
    weight_efficiency: float = Field(default=0.15, ge=0, description="Grade weight of unused steps")
    clean_fp_tolerance: int = Field(
        default=3, ge=1, description="False flags that zero a clean episode's precision and recall"
    )
    gang_follow_p: float = Field(
        default=0.75, ge=0, le=1, description="Chance a gang member follows another member"
    )
    evade_drop_follow: float = Field(
        default=0.5, ge=0, le=1, description="Share of in-gang follows dropped when evading"
    )
    evade_rename: float = Field(
        default=0.5, ge=0, le=1, description="Share of members renamed when evading"
    )
    evade_rotate_ip: float = Field(
        default=0.6, ge=0, le=1, description="Share of proxy users moved to fresh IPs when evading"
    )
    list_cap: int = Field(default=15, ge=3, description="Most ids any tool result lists")
