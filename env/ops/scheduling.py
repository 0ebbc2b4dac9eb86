"""Meeting scheduling: people in several time zones, calendars in local time, required attendees.

The agent lists the participants (time zone, required or optional), reads their calendars (busy
blocks in each person's local time) and books a start time in UTC on a 30-minute grid, inside every
required person's 09:00-17:00 local working hours and free time; more optional attendees is better.
About a quarter of the meetings have no feasible slot: the right move is then ``report_no_slot``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from env.base import ToolError
from env.ops.config import OpsConfig

START = datetime(2026, 3, 2)  # a Monday; the meeting falls in the next three days
DAYS = 3
GRID = 30
OFFSETS = (-8, -5, -3, 0, 1, 2, 3, 5, 8, 9)
PEOPLE = ("amara", "bo", "carlos", "dina", "emil", "farah", "gus", "hana")


def fmt(minute: int) -> str:
    """Minutes since START as 'YYYY-MM-DD HH:MM'."""
    return (START + timedelta(minutes=minute)).strftime("%Y-%m-%d %H:%M")


def parse(text: str) -> int:
    """'YYYY-MM-DD HH:MM' -> minutes since START (raises ToolError on bad input)."""
    try:
        moment = datetime.strptime(text.strip().replace("T", " ")[:16], "%Y-%m-%d %H:%M")
    except ValueError:
        raise ToolError(f"start must look like 2026-03-02 14:30 (UTC), not {text!r}") from None
    minute = int((moment - START).total_seconds() // 60)
    if minute % GRID or not 0 <= minute < DAYS * 1440:
        raise ToolError("start must be on a 30-minute grid within the three meeting days")
    return minute


@dataclass
class Person:
    name: str
    offset: int
    required: bool
    busy: list[tuple[int, int]]  # local minutes since START (local clock)

    def in_hours(self, utc: int, duration: int, offset: int | None = None) -> bool:
        """Inside 09:00-17:00 local on one of the meeting days (busy or not)."""
        local = utc + (self.offset if offset is None else offset) * 60
        day, start = divmod(local, 1440)
        return 0 <= day < DAYS and start >= 9 * 60 and start + duration <= 17 * 60

    def free(self, utc: int, duration: int) -> bool:
        if not self.in_hours(utc, duration):
            return False
        local = utc + self.offset * 60
        return all(local + duration <= b0 or local >= b1 for b0, b1 in self.busy)

    def calendar(self) -> dict:
        return {
            "person": self.name,
            "timezone": f"UTC{self.offset:+d}",
            "busy_local": [{"from": fmt(b0), "to": fmt(b1)} for b0, b1 in self.busy],
        }


@dataclass
class ScheduleCase:
    people: list[Person]
    duration: int
    listed: bool = False
    fetched: set[str] = field(default_factory=set)
    booked: int | None = None
    said_no_slot: bool = False
    informed: float = 0.0
    table: dict[int, int] = field(default_factory=dict)  # slots(), fixed once built

    def person(self, name: str) -> Person:
        found = next((p for p in self.people if p.name == name), None)
        if found is None:
            raise ToolError(f"no participant {name!r}")
        return found

    def attendance(self, utc: int) -> int | None:
        """Optional attendees free at ``utc``; None if a required person is not."""
        if not all(p.free(utc, self.duration) for p in self.people if p.required):
            return None
        return sum(p.free(utc, self.duration) for p in self.people if not p.required)

    def slots(self) -> dict[int, int]:
        out = {}
        for utc in range(0, DAYS * 1440, GRID):
            got = self.attendance(utc)
            if got is not None:
                out[utc] = got
        return out

    def close(self) -> None:
        required = [p.name for p in self.people if p.required]
        self.informed = sum(n in self.fetched for n in required) / len(required)

    @property
    def clean(self) -> bool:
        """No feasible slot: the right move is to say so and book nothing."""
        return not self.table

    def truth(self) -> str:
        slots = self.table
        if not slots:
            return "case: no feasible slot"
        best = max(slots.values())
        return "best " + ", ".join(fmt(u) for u, a in slots.items() if a == best)


def _busy(rng: random.Random) -> list[tuple[int, int]]:
    blocks = []
    for day in range(DAYS):
        for _ in range(rng.randint(1, 4)):
            start = day * 1440 + rng.randrange(8 * 60, 17 * 60, GRID)
            blocks.append((start, start + rng.choice([30, 60, 90, 120])))
    return _merge(blocks)


def _merge(blocks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted blocks with overlapping or touching ones joined (a calendar shows one block)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(blocks):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def build(rng: random.Random, cfg: OpsConfig) -> ScheduleCase:
    """Draw participants and calendars; force the feasibility this seed asked for."""
    want_slot = rng.random() >= cfg.infeasible_share
    n = rng.randint(*cfg.participants)
    names = rng.sample(PEOPLE, n)
    offsets = rng.sample(OFFSETS, n)
    n_required = rng.randint(2, min(3, n))
    people = [
        Person(nm, off, i < n_required, _busy(rng))
        for i, (nm, off) in enumerate(zip(names, offsets, strict=True))
    ]
    rng.shuffle(people)
    case = ScheduleCase(people, rng.choice([30, 60]))
    required = [p for p in people if p.required]
    if want_slot and not case.slots():  # open one slot: align time zones, clear calendars
        grid = range(0, DAYS * 1440, GRID)
        target = rng.choice([u for u in grid if required[0].in_hours(u, case.duration)])
        for person in required:
            if not person.in_hours(target, case.duration):
                fits = [o for o in OFFSETS if person.in_hours(target, case.duration, o)]
                person.offset = rng.choice(fits)
            local = target + person.offset * 60
            person.busy = [b for b in person.busy if local + case.duration <= b[0] or local >= b[1]]
    elif not want_slot:
        for utc in case.slots():
            person = rng.choice(required)
            local = utc + person.offset * 60
            person.busy.append((local, local + case.duration))
        for person in required:
            person.busy = _merge(person.busy)
    case.table = case.slots()
    return case


def grade(case: ScheduleCase) -> dict[str, float]:
    """A valid booking (0.7) with the most optional attendees (0.3); or the right 'no slot'."""
    slots = case.table
    if not slots:
        outcome = float(case.said_no_slot)
    elif case.booked is None or case.booked not in slots:
        outcome = 0.0
    else:
        best = max(slots.values())
        outcome = 0.7 + 0.3 * (slots[case.booked] / best if best else 1.0)
    return {"outcome": outcome, "process": case.informed}


WEIGHTS = {"outcome": 0.75, "process": 0.25}


def coverage(case: ScheduleCase) -> float:
    """Share of the relevant facts seen: the participant list and every calendar."""
    return (case.listed + len(case.fetched)) / (1 + len(case.people))
