"""Episode replays per second of the heuristic's plans on AML easy, on one core.

A replay is what a reward function does per completion: ``reset`` (build the seeded world),
every call of the plan through ``step``, then ``report``. Plans are the honest heuristic's on
eval seeds; the headline figure uses the plans of exactly 9 calls (the issue's "9-call plan"),
and the mean over all plans is reported beside it. Writes the section "bench_env" of
benchmarks/RESULTS.md.

    python benchmarks/bench_env.py [--seconds 3] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import time

import env
from benchmarks.results import machine, write_section
from env.rollout import play, replay
from env.seeds import split_seeds

TARGET = 2000.0


def plans(task: str = "easy", n: int = 200) -> list[tuple[int, list[dict]]]:
    """The heuristic's plans on ``n`` eval seeds."""
    environment = env.make("aml")
    factory = env.policies("aml")["heuristic"]
    return [(s, play(environment, factory(s), task, s).plan) for s in split_seeds("eval", n)]


def replays_per_second(
    cases: list[tuple[int, list[dict]]], seconds: float, task: str
) -> tuple[float, float]:
    """(per CPU second, per wall second), best of three rounds.

    CPU time (``time.process_time``) is the process's own time on its one core, so it measures
    the code even when other jobs share the machine; wall time is reported beside it.
    """
    environment = env.make("aml")
    best_cpu = best_wall = 0.0
    for _ in range(3):
        count, cpu0, wall0 = 0, time.process_time(), time.perf_counter()
        while time.process_time() - cpu0 < seconds / 3:
            for seed, plan in cases:
                replay(environment, task, seed, plan)
            count += len(cases)
        best_cpu = max(best_cpu, count / (time.process_time() - cpu0))
        best_wall = max(best_wall, count / (time.perf_counter() - wall0))
    return best_cpu, best_wall


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="Timing budget per figure")
    parser.add_argument("--no-write", action="store_true", help="Do not update RESULTS.md")
    args = parser.parse_args(argv)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core
    cases = plans()
    nine = [c for c in cases if len(c[1]) == 9] or cases
    nine_cpu, nine_wall = replays_per_second(nine, args.seconds, "easy")
    all_cpu, all_wall = replays_per_second(cases, args.seconds, "easy")
    figures = {
        "replays_per_s_9_calls": nine_cpu,
        "replays_per_wall_s_9_calls": nine_wall,
        "replays_per_s_all_plans": all_cpu,
        "replays_per_wall_s_all_plans": all_wall,
        "mean_plan_calls": sum(len(p) for _, p in cases) / len(cases),
        "load_average_1m": os.getloadavg()[0],
    }
    ok = "meets" if figures["replays_per_s_9_calls"] >= TARGET else "below"
    body = f"""## bench_env: AML episode replays per second (one core)

`python benchmarks/bench_env.py` -- {machine()}

| plans | replays per CPU second | replays per wall second |
|---|---:|---:|
| heuristic 9-call plans, easy ({len(nine)} seeds) | {nine_cpu:,.0f} | {nine_wall:,.0f} |
| all heuristic plans, easy (200 seeds, {figures["mean_plan_calls"]:.1f} calls) \
| {all_cpu:,.0f} | {all_wall:,.0f} |

Target >= {TARGET:,.0f}/s for a 9-call plan on one core: {ok}. A replay = reset (world
generation) + steps + report, pinned to one core. CPU seconds are the process's own time on that
core; wall seconds also count the time other jobs held it (1-minute load average during the run:
{figures["load_average_1m"]:.1f} on {os.cpu_count()} cores). Best of three rounds.
"""
    print(body)  # noqa: T201 (CLI output)
    if not args.no_write:
        write_section("bench_env", body)
    return figures


if __name__ == "__main__":
    main()
