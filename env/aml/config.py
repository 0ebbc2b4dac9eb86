"""Every tunable number of the AML investigation environment, in one typed config.

Per-step rewards follow the reference system (action -0.02, repeat -0.03, page fault -0.05, async
timeout -0.10, case-file write +0.10 at most 3 times, rule injection +0.15 at most 2 times), with
one change: the two positive OS rewards are paid only when the mechanic has a real effect (a case
file entry that later serves an evicted id, a rule mode that changes a later tool result), so
calling OS tools for their own sake earns nothing.
"""

from __future__ import annotations

from pydantic import Field

from env.base import EnvConfig

TASKS = ("easy", "medium", "hard")


class AMLConfig(EnvConfig):
    """Tunable numbers of ``AMLEnvironment`` (per-difficulty values are keyed by task name)."""

    max_steps: int = Field(
        default=30, ge=1, description="Step limit; reaching it means no decision"
    )
    page_fault_penalty: float = Field(
        default=-0.05, description="Referencing an evicted id that is not in the case file"
    )
    async_timeout_penalty: float = Field(
        default=-0.10, description="Retrieving a wire trace before its ETA"
    )
    case_file_reward: float = Field(
        default=0.10, description="Paid when the case file serves an id that left working memory"
    )
    case_file_reward_max: int = Field(
        default=3, ge=0, description="At most this many case-file pays"
    )
    rule_reward: float = Field(
        default=0.15, description="Paid when an injected rule mode first changes a tool result"
    )
    rule_reward_max: int = Field(default=2, ge=0, description="At most this many rule-mode pays")
    memory_size: int = Field(default=2, ge=1, description="Tool results held in working memory")
    eta_min: int = Field(default=2, ge=1, description="Fewest steps before a wire trace is ready")
    eta_max: int = Field(default=4, ge=1, description="Most steps before a wire trace is ready")
    cash_threshold: float = Field(default=10_000.0, gt=0, description="Cash reporting threshold")
    home_alert_share: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Chance a case opens with its family's usual alert rule (else any rule): "
        "an alert hints at a family but never decides it",
    )
    clean_share: dict[str, float] = Field(
        default={"easy": 0.33, "medium": 0.33, "hard": 0.33},
        description="Share of clean look-alike cases per difficulty (25-40% in every one)",
    )
    decoy_customers: dict[str, int] = Field(
        default={"easy": 2, "medium": 5, "hard": 8},
        description="Unrelated customers transacting with the subject",
    )
    decoy_transactions: dict[str, int] = Field(
        default={"easy": 4, "medium": 10, "hard": 18},
        description="Ordinary transactions mixed into the subject's history",
    )
    noise: dict[str, float] = Field(
        default={"easy": 0.0, "medium": 0.25, "hard": 0.5},
        description="Chance a clean case carries one misleading indicator",
    )
    evasion: dict[str, float] = Field(
        default={"easy": 0.0, "medium": 0.4, "hard": 0.8},
        description="Chance a suspicious case hides its evidence (deeper chains, forged papers)",
    )
    camouflage: dict[str, float] = Field(
        default={"easy": 0.0, "medium": 0.25, "hard": 0.5},
        description="Chance a case also carries a benign surface of another family (an invoice, "
        "cash deposits, a family tablet), so routing by the first anomaly is not enough",
    )
    efficient_steps: int = Field(
        default=14, ge=1, description="Steps a thorough investigation needs; more costs efficiency"
    )
    w_decision: float = Field(default=0.30, ge=0, description="Grade weight: right verdict")
    w_entities: float = Field(default=0.20, ge=0, description="Grade weight: entity F1 (SARs)")
    w_typology: float = Field(default=0.15, ge=0, description="Grade weight: right typology (SARs)")
    w_findings: float = Field(
        default=0.20,
        ge=0,
        description="Grade weight: key evidence ids cited (clean cases also take the entity and "
        "typology weights here: the exculpatory evidence is their whole case)",
    )
    w_efficiency: float = Field(default=0.05, ge=0, description="Grade weight: steps, if right")
    w_os: float = Field(default=0.10, ge=0, description="Grade weight: OS mechanics by effect")
