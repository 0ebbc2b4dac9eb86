"""GangEnvironment: find the fake-account gang in a follower graph before the steps run out.

The agent opens on a short alert list (some gang members, some honest decoys; the alert reasons
are drawn the same way for both) and a sample of recently active accounts -- never the whole graph.
It reads accounts with inspect (noisy profile numbers), investigate_network (mutual follows),
reverse_image_search, analyze_bio and check_ip (each lists the other accounts that share the
photo, bio template or IP), marks suspects with flag / unflag, and ends with submit. Flagging marks
exactly one account: nothing ever cascades through the hidden truth. On medium and hard the gang
evades at a fixed step (drops in-gang follows, renames members, rotates proxy IPs), so later calls
see a thinner, quieter gang. Grade: precision, recall and unused steps (see grading.py); ~35% of
episodes have no gang, where the right answer is submitting an empty set.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from env.base import EnvConfig, Grade, ToolEnvironment, ToolError
from env.gang.config import GangConfig, TaskSettings
from env.gang.generate import build_world
from env.gang.grading import grade_flags
from env.gang.tools import GangTools
from env.gang.world import World, evade

ALERT_REASONS = (
    "burst of new follows",
    "reported by another user",
    "login from a new device",
    "many likes in a short time",
    "profile edited recently",
)
INVESTIGATIONS = (
    "inspect",
    "investigate_network",
    "reverse_image_search",
    "analyze_bio",
    "check_ip",
)


class GangEnvironment(GangTools, ToolEnvironment):
    """Fake-gang detection on a social graph (tasks easy / medium / hard)."""

    name = "gang"
    decision_kinds = ("action",)  # these calls commit the outcome (steps mode's decision cut)
    tasks = ("easy", "medium", "hard")
    config_class = GangConfig
    instructions = (
        "You investigate a social network for a coordinated gang of fake accounts. Start from the "
        "alerts, read accounts with the investigation tools, flag every account you believe is in "
        "the gang (flag marks one account; unflag undoes it) and call submit. Some episodes have "
        "no gang: then submit without flags. Honest families, offices and fan clubs also share "
        "IPs, photos or bios, so weigh several signals. On medium and hard the gang reacts to "
        "the investigation part-way through."
    )

    def __init__(self, config: EnvConfig | dict[str, Any] | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        self._explicit_steps = "max_steps" in self.config.model_fields_set
        self._base_config = self.config
        self.world: World | None = None
        self._bits = np.random.PCG64(0)  # the numpy bit generator of this env, reseeded per reset
        self.flagged: set[int] = set()
        self.touched: set[int] = set()

    # ----- episode ------------------------------------------------------------------------------

    @property
    def settings(self) -> TaskSettings:
        cfg: GangConfig = self._base_config  # type: ignore[assignment]
        return cfg.tasks[self.task]

    def _build(self, task: str, rng: random.Random) -> None:
        if not self._explicit_steps:
            self.config = self._base_config.model_copy(update={"max_steps": self.settings.steps})
        self._rng = rng
        self.world = build_world(task, rng, self.config, self._bits)  # type: ignore[arg-type]
        self.flagged = set()
        self.touched = set()
        self.evasion: dict[str, int] | None = None

    def _opening(self) -> tuple[Any, str]:
        w = self.world
        assert w is not None
        alerts = [
            {"account_id": w.id_of(i), "reason": self._rng.choice(ALERT_REASONS)} for i in w.alerts
        ]
        result = {
            "accounts_total": w.n,
            "alerts": alerts,
            "recently_active": [w.id_of(i) for i in w.sample],
            "step_limit": self.config.max_steps,
        }
        return result, (
            f"{w.n} accounts, {len(alerts)} alerts. Find the gang (if any), flag its "
            "members, then submit."
        )

    def _before_call(self, spec, kwargs: dict[str, Any]) -> None:
        at = self.settings.evade_at
        if at and self.evasion is None and self.step_count >= at and self.world is not None:
            self.evasion = evade(self.world, self._rng, self.config)

    def _account(self, account_id: str) -> int:
        assert self.world is not None
        idx = self.world.index_of(account_id)
        if idx is None:
            raise ToolError(f"unknown account {account_id!r}; ids look like 'u12345'")
        return idx

    def _ids(self, indices: set[int] | list[int], exclude: int) -> list[str]:
        """The ids a result lists (at most ``list_cap``, by id) and are from then on seen."""
        w = self.world
        assert w is not None
        listed = sorted(i for i in indices if i != exclude)[: self.config.list_cap]  # type: ignore[attr-defined]
        self.touched.update(listed)  # ids ascend with the account number: same order
        return [w.id_of(i) for i in listed]

    def _seen(self, i: int) -> None:
        self.touched.add(i)

    # ----- grade and truth ----------------------------------------------------------------------

    def _grade(self) -> Grade:
        assert self.world is not None
        return grade_flags(
            self.flagged,
            set(self.world.gang),
            self.step_count,
            self.decision is not None,
            self._base_config,  # type: ignore[arg-type]
            self.settings,
            self.config.max_steps,
        )

    def _metrics(self) -> dict[str, float]:
        w = self.world
        if w is None:
            return {"evidence_coverage": 0.0}
        relevant = set(w.gang) or set(w.alerts)
        covered = len(relevant & self.touched) / len(relevant) if relevant else 0.0
        return {
            "evidence_coverage": round(covered, 4),
            "flagged": float(min(1.0, len(self.flagged) / max(1, len(w.gang) or 1))),
        }

    def reveal(self) -> dict[str, Any]:
        w = self.world
        if w is None:
            return {}
        return {
            "gang": [w.id_of(i) for i in w.gang],
            "clean": not w.gang,
            "category": "gang_present" if w.gang else "gang_absent",
            "lookalikes": [[kind, [w.id_of(i) for i in m]] for kind, m in w.lookalikes],
            "evasion": dict(self.evasion or {}),
        }
