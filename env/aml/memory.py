"""The investigator's "operating system": working memory, case file, async jobs, rule modes.

Working memory holds the ids named in the last ``memory_size`` tool results; the alert's own ids
stay pinned. Referencing an id that was seen before, has scrolled out and was never written to the
case file is a page fault. Referencing one that the case file kept is a fault avoided: the case
file's real effect, and the only moment it is paid. Every counter here is an effect, so
``os_mechanics`` can be measured from what happened rather than from which tools were called.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Literal, get_args

ID_PATTERN = re.compile(r"\b[A-Z]{1,3}-\d{3,7}\b")

RuleMode = Literal[
    "standard", "enhanced_due_diligence", "structuring_watch", "trade_scrutiny", "network_expansion"
]
RULE_MODES: tuple[str, ...] = get_args(RuleMode)


@dataclass
class Job:
    """An async wire-trace request."""

    txn: str
    ready_step: int
    done: bool = False


class Memory:
    """Working memory (last N results), the case file and the pinned alert ids."""

    __slots__ = ("slots", "case_file", "pinned", "seen", "faults", "avoided")

    def __init__(self, size: int, pinned: set[str]):
        self.slots: deque[set[str]] = deque(maxlen=size)
        self.case_file: set[str] = set()
        self.pinned = pinned
        self.seen: set[str] = set(pinned)
        self.faults = 0
        self.avoided = 0

    def resident(self, ident: str) -> bool:
        return ident in self.pinned or any(ident in slot for slot in self.slots)

    def reference(self, ids: list[str]) -> tuple[list[str], list[str]]:
        """Classify referenced ids: (page faults, faults the case file avoided)."""
        faults, avoided = [], []
        for ident in ids:
            if ident not in self.seen or self.resident(ident):
                continue
            (avoided if ident in self.case_file else faults).append(ident)
        self.faults += len(faults)
        self.avoided += len(avoided)
        return faults, avoided

    def push(self, ids: set[str]) -> None:
        """A tool result enters working memory; the oldest one scrolls out."""
        self.slots.append(ids)
        self.seen |= ids

    def write(self, text: str, known: set[str]) -> list[str]:
        """Pin the known ids named in a case-file note; returns the newly pinned ones."""
        new = [i for i in dict.fromkeys(ID_PATTERN.findall(text)) if i in known]
        new = [i for i in new if i not in self.case_file]
        self.case_file.update(new)
        return new


@dataclass
class OSCounters:
    """Effects of the OS tools, for shaping rewards and ``os_mechanics``."""

    jobs: dict[str, Job] = field(default_factory=dict)
    traces_completed: int = 0
    timeouts: int = 0
    mode: str = "standard"
    mode_paid: bool = True  # the current injection already had its (first) effect
    rule_effects: int = 0
    rule_pays: int = 0
    case_pays: int = 0
