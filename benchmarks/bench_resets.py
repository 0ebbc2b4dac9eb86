"""Milliseconds per ``reset`` (world generation + opening observation), every env and task.

A reset is what every reward replay, every evaluation episode and every server session starts
with; on a server it blocks the event loop of every other session while it runs. Each figure is
the median over ``--seeds`` eval seeds, best of ``--rounds`` rounds, on one process. Writes the
section "bench_resets" of benchmarks/RESULTS.md.

    python benchmarks/bench_resets.py [--seeds 50] [--rounds 3] [--no-write]
"""

from __future__ import annotations

import argparse
import statistics
import time

import env
from benchmarks.results import machine, write_section
from env.seeds import split_seeds


def reset_ms(name: str, task: str, seeds: list[int], rounds: int) -> float:
    """Best-of-rounds median milliseconds of one reset of ``name``/``task``."""
    e = env.make(name)
    e.reset(seed=seeds[0], task=task or None)  # imports and caches warm
    best = float("inf")
    for _ in range(rounds):
        times = []
        for seed in seeds:
            start = time.perf_counter()
            e.reset(seed=seed, task=task or None)
            times.append(time.perf_counter() - start)
        best = min(best, statistics.median(times))
    return best * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=50, help="eval seeds per task")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    seeds = split_seeds("eval", args.seeds)
    lines = [
        "## bench_resets: milliseconds per reset",
        "",
        f"`python benchmarks/bench_resets.py --seeds {args.seeds} --rounds {args.rounds}` -- "
        f"{machine()}. Median over the seeds, best of the rounds, one process.",
        "",
        "| env | task | ms per reset |",
        "|---|---|---:|",
    ]
    for name in env.names():
        for task in env.env_class(name).tasks or ("",):
            ms = reset_ms(name, task, seeds, args.rounds)
            lines.append(f"| {name} | {task or '-'} | {ms:.2f} |")
            print(lines[-1], flush=True)
    if not args.no_write:
        write_section("bench_resets", "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
