"""Milliseconds of one full garbage collection in a server process, before and after the freeze.

Each environment's app is built in a fresh process exactly as ``python -m env.server`` builds it
(and the bare OpenEnv echo app of ``benchmarks/trivial_env.py`` beside them); then a full
``gc.collect()`` is timed, ``env.server.freeze_startup_heap`` runs, and a full collection is timed
again. The objects a full collection walks are counted both times (``gc.get_objects()``): what
the freeze takes out of every collection a serving process makes. Each figure is the median of
``--repeats`` collections. Writes the section "bench_gc_pause" of benchmarks/RESULTS.md.

    python benchmarks/bench_gc_pause.py [--env aml] [--repeats 5] [--no-write]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BARE = "bare"


def full_collect_ms(repeats: int) -> float:
    """Median milliseconds of a full collection of this process."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        gc.collect()
        times.append(1e3 * (time.perf_counter() - started))
    return statistics.median(times)


def measure_here(name: str, repeats: int) -> dict[str, Any]:
    """Build ``name``'s app in this process and time full collections around the freeze."""
    from env.server import create_env_app, freeze_startup_heap

    if name == BARE:
        from benchmarks.trivial_env import create_app

        create_app()
    else:
        create_env_app(name)
    before_objects, before_ms = len(gc.get_objects()), full_collect_ms(repeats)
    frozen = freeze_startup_heap()
    return {
        "env": name,
        "walked_before": before_objects,
        "ms_before": before_ms,
        "frozen": frozen,
        "walked_after": len(gc.get_objects()),
        "ms_after": full_collect_ms(repeats),
    }


def measure(name: str, repeats: int) -> dict[str, Any]:
    """``measure_here`` in a fresh interpreter: a freeze lasts for the whole process."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_gc_pause",
            "--one",
            name,
            "--repeats",
            str(repeats),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown(rows: list[dict[str, Any]], command: str) -> str:
    from benchmarks.results import machine

    lines = [
        "## bench_gc_pause: one full collection in a server process, before and after the freeze",
        "",
        f"`{command}` — each app built in a fresh process as `python -m env.server` builds it "
        "(bare: OpenEnv's echo app), then a full `gc.collect()` timed (median), "
        "`env.server.freeze_startup_heap()` run, and a full collection timed again; objects "
        "walked = `len(gc.get_objects())`.",
        "",
        "| app | objects walked before | full collection ms before | objects frozen | "
        "objects walked after | full collection ms after |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['env']} | {r['walked_before']:,} | {r['ms_before']:.1f} | {r['frozen']:,} | "
            f"{r['walked_after']:,} | {r['ms_after']:.3f} |"
        )
    lines += ["", f"Measured on {machine()}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", help="environment(s); default: all + bare")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one app, JSON out
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure_here(args.one, args.repeats)))
        return 0
    from benchmarks.results import publish
    from env.registry import names

    rows = [measure(name, args.repeats) for name in args.env or [BARE, *names()]]
    command = "python benchmarks/bench_gc_pause.py " + " ".join(argv or sys.argv[1:])
    text = markdown(rows, command.strip())
    publish("bench_gc_pause", text, write=not args.no_write)
    return 0


if __name__ == "__main__":
    sys.exit(main())
