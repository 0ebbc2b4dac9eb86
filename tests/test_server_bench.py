"""The load benchmark's own checks: it sees no errors on a sound server and does see cross-talk."""

from __future__ import annotations

import asyncio

from test_server_app import VaultEnv

from benchmarks.bench_server import bench_rounds, build_script, echo_script, load
from benchmarks.trivial_env import EPISODE_STEPS, create_app

from conftest import ServerThread, serve


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


def test_bare_baseline_echoes_every_session_without_cross_talk():
    scripts = [echo_script(i, steps=EPISODE_STEPS + 3) for i in range(5)]
    assert scripts[0].kinds.count("reset") == 2  # its episodes end, so the load resets too
    with ServerThread(create_app(max_concurrent_envs=5)) as url:
        figures = asyncio.run(load(url.replace("http", "ws") + "/ws", scripts))
    assert figures["steps"] == 5 * (EPISODE_STEPS + 3)
    assert figures["errors"] == 0 and figures["mismatches"] == 0


def test_rounds_report_medians_and_ratios_to_the_bare_server():
    runs = bench_rounds(["bare"], sessions=3, steps=4, rounds=2)
    assert [r["env"] for r in runs] == ["bare"]
    (bare,) = runs
    assert bare["rounds"] == 2 and bare["steps"] == 2 * 3 * 4
    assert len(bare["all_steps_per_s"]) == 2 and bare["errors"] == bare["mismatches"] == 0
    assert bare["speed_vs_bare"] == 1.0 and bare["p99_vs_bare"] == 1.0
