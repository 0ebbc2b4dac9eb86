"""The hidden world of one ops episode: one of three task families, drawn per seed.

``build_world(task, rng, config)`` returns the family's case object (expenses.ExpenseCase,
scheduling.ScheduleCase or incidents.IncidentCase); the case holds both the hidden truth and what
the agent has done to it, and knows how to grade itself.
"""

from __future__ import annotations

import random

from env.ops import expenses, incidents, scheduling
from env.ops.config import OpsConfig

Case = expenses.ExpenseCase | scheduling.ScheduleCase | incidents.IncidentCase
FAMILIES = {"expenses": expenses, "scheduling": scheduling, "incident": incidents}


def build_world(task: str, rng: random.Random, config: OpsConfig) -> Case:
    """The case of family ``task`` for this seed."""
    return FAMILIES[task].build(rng, config)
