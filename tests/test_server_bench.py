"""The load benchmark's own checks: it sees no errors on a sound server and does see cross-talk,
times the environments' own work, and compares servers run with the same uvicorn settings."""

from __future__ import annotations

import asyncio

import pytest
from test_server_app import VaultEnv

from benchmarks.bench_server import (
    bench_rounds,
    budget_note,
    build_parser,
    build_script,
    echo_script,
    env_budget_us,
    load,
    markdown,
    start_server,
)
from benchmarks.trivial_env import EPISODE_STEPS, create_app
from env.server import free_port

from conftest import ServerThread, serve, wait_for_health


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


@pytest.mark.parametrize("bare_gc_freeze", [False, True])
def test_rounds_report_medians_and_ratios_to_the_bare_server(bare_gc_freeze: bool):
    runs = bench_rounds(
        ["bare"],
        sessions=3,
        steps=4,
        rounds=2,
        loads=2,
        bare_gc_freeze=bare_gc_freeze,
        like_ours=False,
    )
    assert [r["env"] for r in runs] == ["bare"]
    (bare,) = runs
    assert bare["rounds"] == 2 and bare["loads"] == 2 and bare["steps"] == 2 * 2 * 3 * 4
    assert len(bare["all_steps_per_s"]) == 2 and bare["errors"] == bare["mismatches"] == 0
    assert bare["speed_vs_bare"] == 1.0 and bare["p99_vs_bare"] == 1.0
    assert bare["speed_vs_like_ours"] is None  # no like-ours baseline in this run
    assert bare["env_us_per_step"] > 0  # the echo env's own time, played in-process
    # both processes' CPU over the load, per step: some, and far less than a second
    assert 0 < bare["server_cpu_us_per_step"] < 1e6
    assert 0 < bare["client_cpu_us_per_step"] < 1e6


def test_the_bare_server_freezes_like_ours_unless_asked_and_the_table_says_which():
    assert build_parser().parse_args([]).bare_gc_freeze
    assert not build_parser().parse_args(["--no-bare-gc-freeze"]).bare_gc_freeze
    runs = [
        {"env": "bare", "sessions": 1, "steps_per_session": 1, "loads": 1, "rounds": 1,
         "errors": 0, "mismatches": 0, "steps_per_s": 100.0, "all_steps_per_s": [100],
         "p50_ms": 1.0, "p99_ms": 2.0, "speed_vs_bare": 1.0, "p99_vs_bare": 1.0,
         "meets_target": True, "env_us_per_step": 1.0, "server_cpu_us_per_step": 300.0,
         "client_cpu_us_per_step": 150.0}
    ]  # fmt: skip
    assert "so does the bare server in this run (like for like" in markdown(runs, "cmd")
    assert "keeps OpenEnv's default in this run" in markdown(runs, "cmd", bare_gc_freeze=False)
    assert "| 1.0 | 300 | 150 |" in markdown(runs, "cmd")


def test_the_like_ours_baseline_serves_echo_as_ours_do_and_every_server_gets_its_ratio():
    """``bare_like_ours`` is the echo environment on the serving path of ``env.server`` (one
    shared worker, reset and step on the loop, frozen heap); each server's ratio to it is the
    environment's own cost, beside the ratio to OpenEnv's default that the target reads."""
    from openenv.core.env_server._utils import overrides_method
    from openenv.core.env_server.interfaces import Environment

    from benchmarks.trivial_env import EchoEnvironment, EchoServedLikeOurs

    like = EchoServedLikeOurs()
    assert EchoServedLikeOurs.REQUIRES_SINGLE_THREAD_EXECUTOR
    assert not getattr(EchoEnvironment, "REQUIRES_SINGLE_THREAD_EXECUTOR", False)
    assert overrides_method(like.step_async, Environment.step_async)
    assert overrides_method(like.reset_async, Environment.reset_async)
    assert not overrides_method(EchoEnvironment().step_async, Environment.step_async)

    runs = bench_rounds([], sessions=2, steps=3, rounds=1)
    bare, like_ours = runs
    assert (bare["env"], like_ours["env"]) == ("bare", "bare_like_ours")
    assert like_ours["errors"] == like_ours["mismatches"] == 0 and like_ours["steps"] == 6
    assert like_ours["speed_vs_like_ours"] == 1.0
    assert bare["speed_vs_like_ours"] == bare["steps_per_s"] / like_ours["steps_per_s"]
    text = markdown(runs, "cmd")
    assert "`bare_like_ours`: the same echo environment" in text
    row = next(line for line in text.splitlines() if line.startswith("| bare_like_ours |"))
    assert "| baseline |" in row and row.endswith("| 1.00x |")


def test_scripts_time_only_the_environment_and_the_budget_follows_the_bare_speed():
    script = build_script(VaultEnv, 0, steps=5)
    assert 0 < script.env_s < 1.0
    # 0.9x of a 5,000 steps/s server: 222 µs per step, 22 µs of it for the environment.
    assert round(env_budget_us({"steps_per_s": 5000.0}), 1) == 22.2
    note = budget_note({"steps_per_s": 5000.0})
    assert "200 µs of wall time per step" in note and "about 22 µs" in note


@pytest.mark.parametrize("server", ["aml", "bare"])
def test_servers_decline_per_message_compression_alike(server):
    """Both servers of the comparison run uvicorn with ``UVICORN_SETTINGS``: a client that offers
    permessage-deflate (websockets does by default) gets plain frames."""
    from websockets.sync.client import connect

    port = free_port()
    proc = start_server(server, port, sessions=2)  # the bench's own command for each server
    try:
        wait_for_health(proc, port)
        with connect(f"ws://127.0.0.1:{port}/ws") as ws:
            assert "permessage-deflate" in ws.request.headers["Sec-WebSocket-Extensions"]
            assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_gc_pause_bench_counts_what_the_freeze_takes_out_of_a_full_collection():
    from benchmarks.bench_gc_pause import markdown, measure

    row = measure("support", repeats=1)  # a fresh process: the freeze lasts for the process
    assert row["env"] == "support" and row["frozen"] > 50_000
    assert row["walked_before"] > 50_000 and row["walked_after"] < row["walked_before"] // 20
    assert row["ms_before"] > 0 and row["ms_after"] >= 0
    assert "| support |" in markdown([row], "python benchmarks/bench_gc_pause.py")
