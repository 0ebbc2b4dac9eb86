"""Write one benchmark's section of benchmarks/RESULTS.md without touching the others."""

from __future__ import annotations

import fcntl
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")
HEADER = "# Benchmark results\n\nEach section is rewritten by the script named in its heading.\n"


def machine() -> str:
    """A one-line description of where the figures were measured."""
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        rev = "?"
    import os

    return (
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, commit {rev or '?'}, "
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
    )


def write_section(name: str, body: str) -> None:
    """Replace (or append) the section ``name`` of RESULTS.md with ``body`` (markdown)."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body.strip()}\n{end}"
    with open(RESULTS, "a+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read() or HEADER
        if start in text and end in text:
            head, rest = text.split(start, 1)
            text = head + block + rest.split(end, 1)[1]
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
        handle.seek(0)
        handle.truncate()
        handle.write(text)


def publish(name: str, body: str, write: bool = True) -> None:
    """Print a benchmark's section and, unless ``write`` is False, put it in RESULTS.md."""
    print(body)
    if write:
        write_section(name, body)
