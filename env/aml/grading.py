"""Terminal grade of an AML case and the effect metrics it shares with the reward functions.

Components, each in [0, 1]:
- decision: SAR on a suspicious case or closure of a clean one.
- entity_f1: F1 of the SAR's entities against the case's (suspicious cases, right decision only).
- typology: the SAR names the right typology (suspicious cases, right decision only).
- key_findings: F-beta (beta 2) of the citations: recall = share of the case's key facts whose evidence ids
  the findings (or the closing reason) cite, precision = share of the cited case ids that are
  evidence of a key fact (citing every id seen does not pay). On a clean case there are no
  entities or typology to name, so their weights move here: the exculpatory evidence is the
  whole case for closing.
- efficiency: steps saved below the limit, only with the right decision (speed to a wrong answer
  is worth nothing).
- os_mechanics: measured from effects (see ``os_mechanics``), only with the right decision (good
  memory habits on the way to a wrong answer are worth nothing).
Without the right decision every component is 0.
Each signal feeds one component only.
"""

from __future__ import annotations

from env.aml.config import AMLConfig
from env.aml.memory import ID_PATTERN, Memory, OSCounters
from env.aml.world import World
from env.base import Grade
from env.common.grading import make_grade, weighted_total


def os_mechanics(memory: Memory, os: OSCounters) -> float:
    """Mean of three effects: faults avoided by the case file, traces retrieved after their ETA,
    and a rule mode that changed a later tool result."""
    refs = memory.avoided + memory.faults
    mem = memory.avoided / refs if refs else 0.0
    asked = len(os.jobs) + os.timeouts
    trace = os.traces_completed / asked if asked else 0.0
    rule = 1.0 if os.rule_effects else 0.0
    return round((mem + trace + rule) / 3, 4)


def evidence_coverage(world: World, revealed: set[str]) -> float:
    """Share of the case's key facts the agent's tool calls revealed."""
    return round(len(revealed & world.facts.keys()) / len(world.facts), 4) if world.facts else 0.0


def _f1(predicted: set[str], truth: set[str]) -> float:
    hit = len(predicted & truth)
    if not hit:
        return 0.0
    precision, recall = hit / len(predicted), hit / len(truth)
    return (1 + CITATION_BETA**2) * precision * recall / (CITATION_BETA**2 * precision + recall)


# F-beta of the citations: beta 2 weighs recall four times precision, so an honest note that also
# names the exculpatory checks it ran (one or two ids beyond the key facts) keeps most of its
# credit, while a dump of every id seen (precision ~0.1) loses about two thirds.
CITATION_BETA = 2.0


def cited_facts(world: World, text: str) -> float:
    """F-beta (``CITATION_BETA``) of the citations in ``text``: recall over the key facts (a fact counts when one of its
    evidence ids is cited), precision over the cited ids (an id that is evidence of no key fact
    lowers it; the alert's subject is the case itself and is neutral)."""
    if not world.facts:
        return 0.0
    cited = set(ID_PATTERN.findall(text or ""))
    recall = sum(1 for ids in world.facts.values() if not ids.isdisjoint(cited)) / len(world.facts)
    if not recall:
        return 0.0
    evidence = set().union(*world.facts.values())
    named = {i for i in cited if i != world.subject} | (cited & evidence)
    precision = len(named & evidence) / len(named) if named else 1.0
    return (1 + CITATION_BETA**2) * precision * recall / (CITATION_BETA**2 * precision + recall)


def grade(
    world: World,
    cfg: AMLConfig,
    decision: str | None,
    sar: dict | None,
    reason: str,
    steps: int,
    os_score: float,
) -> Grade:
    """The terminal grade in [0, 1] with its named components."""
    suspicious = world.verdict == "suspicious"
    right = (decision == "file_sar" and suspicious) or (
        decision == "close_alert" and not suspicious
    )
    parts = dict.fromkeys(("decision", "entity_f1", "typology", "key_findings", "efficiency"), 0.0)
    parts["os_mechanics"] = 0.0
    if right:
        parts["decision"] = 1.0
        parts["os_mechanics"] = os_score
        span = max(1, cfg.max_steps - cfg.efficient_steps)
        parts["efficiency"] = min(1.0, max(0.0, (cfg.max_steps - steps) / span))
        if suspicious and sar is not None:
            entities = {str(e).strip().upper() for e in sar["entities"]}
            parts["entity_f1"] = _f1(entities, world.entities)
            parts["typology"] = float(sar["typology"] == world.family)
            parts["key_findings"] = cited_facts(world, sar["findings"])
        else:
            parts["key_findings"] = cited_facts(world, reason)
    w_findings = cfg.w_findings if suspicious else cfg.w_findings + cfg.w_entities + cfg.w_typology
    weights = {
        "decision": cfg.w_decision,
        "entity_f1": cfg.w_entities if suspicious else 0.0,
        "typology": cfg.w_typology if suspicious else 0.0,
        "key_findings": w_findings,
        "efficiency": cfg.w_efficiency,
        "os_mechanics": cfg.w_os,
    }
    return make_grade(weighted_total(parts, weights), parts, decision)
