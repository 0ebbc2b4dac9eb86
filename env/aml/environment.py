"""AMLEnvironment: one alert, eighteen tools, a limited memory, then a SAR or a closure.

The episode: the agent opens an alert on a customer (rule, subject id, date; nothing that names
the typology or verdict), investigates with eleven tools, manages its context with five OS tools
(case file, async wire traces, compliance manual, rule modes) and ends by filing a SAR (typology,
entities, findings citing evidence ids) or closing the alert (a reason citing the exculpatory
evidence). A quarter to two fifths of the cases are clean look-alikes. Each call costs -0.02;
repeats, page faults and early trace retrievals cost more; the case file and rule modes pay only
when they have an effect. The terminal grade is in ``env.aml.grading``.
"""

from __future__ import annotations

import random
from typing import Any

from env.aml.config import TASKS, AMLConfig
from env.aml.grading import evidence_coverage, grade, os_mechanics
from env.aml.memory import ID_PATTERN, Memory, OSCounters
from env.aml.os_tools import OSTools
from env.aml.tools import AMLDecisions, AMLTools
from env.aml.world import build_world
from env.base import Grade, ToolEnvironment, ToolSpec

INSTRUCTIONS = """You are an anti-money-laundering investigator working one alert.
Investigate the subject with the tools, then either file a SAR (file_sar: typology, every entity
involved, findings citing evidence ids) if the activity is suspicious, or close the alert
(close_alert: a reason citing the evidence ids that explain it) if it is a clean false positive.
Alerts often look suspicious at first sight; only the evidence decides. Your working memory holds
only the last two tool results: write ids you will need later to the case file, or referencing
them again is a page fault. Wire traces are asynchronous: retrieve them after their ETA. Rule modes
(update_system_prompt) change what later tool results show. Every call costs a little."""


class AMLEnvironment(AMLDecisions, OSTools, AMLTools, ToolEnvironment):
    """The AML alert investigation (see the module docstring for the episode)."""

    name = "aml"
    tasks = TASKS
    config_class = AMLConfig
    instructions = INSTRUCTIONS

    def _build(self, task: str, rng: random.Random) -> None:
        self.world = build_world(task, rng, self.config)
        self._rng = random.Random(rng.getrandbits(32))
        self.memory = Memory(self.config.memory_size, {self.world.subject})
        self.memory.pinned.add(self.world.alert["alert_id"])
        self.os = OSCounters()
        self._revealed: set[str] = set()
        self._shown: set[str] = set()
        self._sar: dict[str, Any] | None = None
        self._close_reason = ""

    def _opening(self) -> tuple[dict[str, Any], str]:
        alert = dict(self.world.alert)
        return alert, f"Alert {alert['alert_id']} ({alert['rule']}) on {alert['subject_id']}."

    def _before_call(self, spec: ToolSpec, kwargs: dict[str, Any]) -> None:
        refs = []
        for value in kwargs.values():
            for item in value if isinstance(value, list) else (value,):
                if isinstance(item, str) and item in self.world.ids and ID_PATTERN.fullmatch(item):
                    refs.append(item)
        self._shown = set(refs)
        self._faults, self._avoided = self.memory.reference(refs)
        if self._faults:
            self.add_reward(self.config.page_fault_penalty * len(self._faults))
        for _ in self._avoided:
            if self.os.case_pays < self.config.case_file_reward_max:
                self.os.case_pays += 1
                self.add_reward(self.config.case_file_reward)

    def _after_call(self, spec: ToolSpec, kwargs: dict[str, Any], result: Any) -> None:
        if not spec.terminal:
            self.memory.push(self._shown)
        if (self._faults or self._avoided) and isinstance(result, dict):
            result["memory"] = {
                "page_faults": self._faults,
                "served_from_case_file": self._avoided,
            }

    def _grade(self) -> Grade:
        return grade(
            self.world,
            self.config,
            self.decision,
            self._sar,
            self._close_reason,
            self.step_count,
            os_mechanics(self.memory, self.os),
        )

    def _metrics(self) -> dict[str, float]:
        return {
            "evidence_coverage": evidence_coverage(self.world, self._revealed),
            "os_mechanics": os_mechanics(self.memory, self.os),
            "page_faults": float(self.memory.faults),
            "faults_avoided": float(self.memory.avoided),
            "async_timeouts": float(self.os.timeouts),
            "traces_completed": float(self.os.traces_completed),
            "rule_effects": float(self.os.rule_effects),
        }

    def reveal(self) -> dict[str, Any]:
        w = self.world
        return {
            "verdict": w.verdict,
            "clean": w.verdict == "clean",
            "typology": w.typology,
            "category": w.category,
            "variant": w.variant or None,
            "subject": w.subject,
            "entities": sorted(w.entities),
            "key_evidence": {fact: sorted(ids) for fact, ids in w.facts.items()},
        }
