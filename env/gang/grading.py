"""Grade a submitted flag set: precision, recall and unused steps, each a named component.

With a gang: precision = flagged gang members / flagged accounts (0 for an empty set), recall =
flagged gang members / gang size. Clean episode (no gang): the right answer is the empty set, so
precision and recall both equal ``1 - false_flags / clean_fp_tolerance`` (floored at 0).
``efficiency`` = share of the step limit left unused, only when the submitted call ("gang" or
"no_gang", below) is right: speed to a wrong answer is worth nothing. No decision (step limit)
=> total 0.
``success`` (reported, not weighted) is the reference's win rule: recall and precision at or above
the task's thresholds. ``decision`` (reported, not weighted) is 1 when the submitted call is right:
"gang" (some flags) naming at least one gang member in a world with a gang, or "no_gang" (none) in a
clean world.
"""

from __future__ import annotations

from env.base import Grade
from env.common.grading import weighted_total
from env.gang.config import GangConfig, TaskSettings


def grade_flags(
    flagged: set[int],
    gang: set[int],
    steps: int,
    decided: bool,
    config: GangConfig,
    task: TaskSettings,
    max_steps: int,
) -> Grade:
    """The grade of one episode from the final flag set."""
    if gang:
        hits = len(flagged & gang)
        precision = hits / len(flagged) if flagged else 0.0
        recall = hits / len(gang)
    else:
        precision = recall = max(0.0, 1.0 - len(flagged) / config.clean_fp_tolerance)
    right_call = bool(flagged & gang) if gang else not flagged
    efficiency = max(0.0, 1.0 - steps / max_steps) if right_call else 0.0
    success = float(recall >= task.recall_to_win and precision >= task.precision_to_win)
    weights = {
        "recall": config.weight_recall,
        "precision": config.weight_precision,
        "efficiency": config.weight_efficiency,
    }
    total = weighted_total(
        {"recall": recall, "precision": precision, "efficiency": efficiency}, weights
    )
    components = {
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "efficiency": round(efficiency, 4),
        "success": success if decided else 0.0,
        "decision": float(decided and right_call),
    }
    return Grade(
        total=round(min(1.0, total), 4) if decided else 0.0,
        components=components,
        decision=("gang" if flagged else "no_gang") if decided else None,
    )
