"""The load benchmark's own checks: it sees no errors on a sound server and does see cross-talk."""

from __future__ import annotations

import asyncio

from test_server_app import VaultEnv

from benchmarks.bench_server import build_script, load

from conftest import serve


def test_concurrent_sessions_match_their_in_process_replays():
    scripts = [build_script(VaultEnv, i, steps=12) for i in range(6)]
    with serve(VaultEnv, max_concurrent_envs=6) as url:
        ws_url = url.replace("http", "ws") + "/ws"
        figures = asyncio.run(load(ws_url, scripts))
        assert figures["steps"] == 6 * 12
        assert figures["errors"] == 0 and figures["mismatches"] == 0
        assert figures["p99_ms"] >= figures["p50_ms"] > 0
        # Hand two sessions each other's expectations: the comparison must notice.
        a, b = next(
            (a, b) for a in scripts for b in scripts if a is not b and len(a.kinds) == len(b.kinds)
        )
        a.expected, b.expected = b.expected, a.expected
        swapped = asyncio.run(load(ws_url, [a, b]))
    assert swapped["mismatches"] > 0
