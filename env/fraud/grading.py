"""Grades for both roles, from what happened in the world (never from what the agent claimed).

Defender: the verdict (``close_case`` or stopping every route), precision and recall of the
restrictions (freezes and merchant blocks) against the ring entities that actually carried money,
the share of the stolen total kept from being withdrawn, how early the first correct hit came
(scaled by precision, so blind freezing is not fast), and customer friction (legitimate customers
frozen, blocked, held or challenged). A clean world asks for a "clean" verdict and no friction;
its precision, recall and prevented loss are earned by closing the case, not by idling.

Fraudster: laundered share (of the fraud threshold), stealth (ring entities untouched, counted only
as far as money actually moved, so idling is not stealthy), and the getaway (``exit_scheme`` or
reaching the threshold before the window closes). No decision means no decision credit.
"""

from __future__ import annotations

from env.base import Grade
from env.common.grading import clamp, weighted_total
from env.fraud.dynamics import Engine


def _weighted(parts: dict[str, float], weights: dict[str, float], decision: str | None) -> Grade:
    parts = {k: round(min(1.0, max(0.0, v)), 4) for k, v in parts.items()}
    total = weighted_total(parts, weights, normalize=False)
    return Grade(total=clamp(total), components=parts, decision=decision)


def ring_entities(engine: Engine) -> set[str]:
    """Ring entities that carried money (sources, mules paid, colluding merchant used)."""
    return set(engine.w.exposed)


def defender_grade(engine: Engine, decision: str | None, max_steps: int) -> Grade:
    w, ledger = engine.w, engine.ledger
    ring = ring_entities(engine)
    restricted = [e for e, _ in ledger.restricted]

    def legit(entity: str) -> bool:
        acc = w.accounts.get(entity)
        return not acc.ring_role if acc else not w.merchants[entity].colluding

    wrong = [e for e in restricted if legit(e)]
    friction = 1.0 - 0.25 * len(wrong)
    friction -= 0.12 * sum(1 for _, ring_txn in ledger.holds if not ring_txn)
    friction -= 0.06 * sum(1 for acc, _ in ledger.challenges if not w.accounts[acc].ring_role)
    if w.ring:
        correct_verdict = decision in ("fraud", "routes_blocked")
        precision = (len(restricted) - len(wrong)) / len(restricted) if restricted else 0.0
        recall = len(ring & set(restricted)) / len(ring) if ring else 0.0
        prevented = 1.0 - w.laundered / w.total
        hits = [t for e, t in ledger.restricted if not legit(e)]
        hits += [t.tick for t in w.txns if t.status == "held" and t.route]
        speed = (1.0 - min(hits) / max_steps) * precision if hits else 0.0
    else:
        # nothing to find or stop: these parts are earned by closing the case, not by idling
        correct_verdict = decision == "clean"
        closed = float(decision is not None)
        precision = 0.0 if restricted else closed
        recall = closed
        prevented = closed
        close = ledger.close_tick if ledger.close_tick is not None else max_steps
        speed = (1.0 - close / max_steps) if correct_verdict else 0.0
    parts = {
        "decision": float(correct_verdict),
        "precision": precision,
        "recall": recall,
        "prevented_loss": prevented,
        "speed": speed,
        "friction": friction,
    }
    return _weighted(parts, engine.cfg.defender_weights, decision)


def fraudster_grade(engine: Engine, decision: str | None) -> Grade:
    w, ledger = engine.w, engine.ledger
    ring = ring_entities(engine)
    laundered = min(1.0, w.laundered / (engine.cfg.fraud_threshold * w.total))
    touched = len(ring & {e for e, _ in ledger.restricted})
    touched += 0.5 * sum(1 for _, ring_txn in ledger.holds if ring_txn)
    stealth = max(0.0, 1.0 - touched / max(1, len(ring))) * min(1.0, 2.0 * laundered)
    getaway = float(decision in ("exit", "threshold_reached"))
    parts = {"laundered": laundered, "stealth": stealth, "decision": getaway}
    return _weighted(parts, engine.cfg.fraudster_weights, decision)


def evidence_coverage(engine: Engine, role: str) -> float:
    """Defender: share of the ring's money-carrying entities it looked at or acted on.

    Fraudster: share of its routes it actually used.
    """
    ring = ring_entities(engine)
    if not ring:
        return 1.0 if role == "defender" and engine.ledger.looked else 0.0
    if role == "fraudster":
        used = {t.route for t in engine.w.txns if t.route}
        return len(used) / max(1, len(engine.w.routes))
    seen = engine.ledger.looked | {e for e, _ in engine.ledger.restricted}
    return len(ring & seen) / len(ring)
