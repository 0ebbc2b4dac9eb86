"""Rewards and interactive episodes on environment servers (``env.urls``, env/remote.py).

Two real ``python -m env.server`` processes on free loopback ports: plan and steps outcomes
replayed there equal the in-process ones exactly (policy plans of every kind, with and without a
prefix), an interactive adapter sees the same observations and grade, a server killed mid-run
costs a retry on the other, and with every server gone a row scores 0 with its reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from env.registry import make, policies
from env.remote import RemoteError, ReplayClient, Servers
from env.rollout import play
from env.server import free_port
from pipeline.data.prompts import render_observation
from pipeline.training.interactive import environment_factory
from rewards.protocol import render_completion
from rewards.replay import ReplayCache, outcome_from_env
from rewards.score import score_batch

from conftest import wait_for_health

ROOT = Path(__file__).resolve().parents[1]
ENV = "aml"


def spawn(env: str, port: int) -> subprocess.Popen:
    """``python -m env.server --env ENV --port PORT`` (the recipe's command), up and answering."""
    command = [sys.executable, "-m", "env.server", "--env", env, "--port", str(port)]
    command += ["--log-level", "warning"]
    proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return wait_for_health(proc, port)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def two_servers():
    ports = [free_port(), free_port()]
    procs = [spawn(ENV, port) for port in ports]
    try:
        yield procs, [f"http://127.0.0.1:{port}" for port in ports]
    finally:
        for proc in procs:
            stop(proc)


def _rows(n_seeds: int = 3) -> list[dict]:
    """Plans of every policy on every task, and steps rows cutting them after two calls."""
    env = make(ENV)
    rows = []
    for name, policy in sorted(policies(ENV).items()):
        for task in env.tasks:
            for seed in range(n_seeds):
                plan = play(env, policy(seed), task, seed).plan
                row = {"env": ENV, "task": task, "seed": seed, "completion": ""}
                rows.append({**row, "completion": render_completion(plan), "policy": name})
                if len(plan) > 2:
                    rest = render_completion(plan[2:])
                    rows.append({**row, "completion": rest, "prefix": plan[:2], "policy": name})
    return rows


def _outcomes(cache: ReplayCache, rows: list[dict]) -> list:
    return [
        cache.outcome(r["env"], r["task"], r["seed"], r["completion"], r.get("prefix"))
        for r in rows
    ]


def test_replays_on_two_servers_equal_in_process_and_survive_a_killed_server(two_servers):
    procs, urls = two_servers
    rows = _rows()
    local = ReplayCache()
    remote = ReplayCache()
    remote.use_servers(ReplayClient(Servers(urls, retries=3, backoff_s=0.0)))
    half = len(rows) // 2
    expected = _outcomes(local, rows)
    assert _outcomes(remote, rows[:half]) == expected[:half]
    stop(procs[0])  # one server dies mid-run: its rows go to the other
    assert _outcomes(remote, rows[half:]) == expected[half:]
    assert remote.replays == local.replays > 100  # duplicate rows are cache hits in both
    assert {o.problem for o in expected} == {None}
    assert any(o.report.decision_reached for o in expected)
    assert any(o.prefix_steps for o in expected)
    assert len({o.report.grade.total for o in expected}) > 3, "plans of varied quality"

    # score_batch (the trainer's reward functions, TRL's weighted total) gives the same numbers
    from rewards import replay as replay_module

    batch = [{k: v for k, v in r.items() if k != "policy"} for r in rows[:12]]
    replay_module.CACHE.use_servers(None)
    try:
        in_process = score_batch(batch)
        replay_module.CACHE.use_servers(ReplayClient(Servers(urls, backoff_s=0.0)))
        served = score_batch(batch)
    finally:
        replay_module.CACHE.use_servers(None)
    assert served == in_process


def test_a_row_no_server_can_replay_scores_zero_with_its_reason(two_servers, caplog):
    procs, urls = two_servers
    for proc in procs:
        stop(proc)
    from rewards import replay as replay_module

    row = _rows(1)[0]
    replay_module.CACHE.use_servers(ReplayClient(Servers(urls, retries=2, backoff_s=0.0)))
    try:
        [result] = score_batch([{k: v for k, v in row.items() if k != "policy"}])
        outcome = replay_module.CACHE.outcome(ENV, row["task"], row["seed"], row["completion"])
    finally:
        replay_module.CACHE.use_servers(None)
    assert result["total"] == 0.0 and result["grade"] is None
    assert outcome.broken and outcome.problem.startswith("remote replay failed")
    assert "not scored" in caplog.text


def test_a_broken_steps_row_fails_the_same_way_on_a_server(two_servers):
    _, urls = two_servers
    env = make(ENV)
    plan = play(env, policies(ENV)["heuristic"](0), env.tasks[0], 1).plan
    local, remote = ReplayCache(), ReplayCache()
    remote.use_servers(ReplayClient(Servers(urls)))
    args = (ENV, env.tasks[0], 1, render_completion(plan[:1]), plan)  # the prefix ends it
    assert remote.outcome(*args) == local.outcome(*args)
    assert local.outcome(*args).problem == "replay failed: ValueError"
    bad = (ENV, "no-such-task", 1, render_completion(plan))
    assert remote.outcome(*bad) == local.outcome(*bad)


def _play_adapter(adapter, row: dict, plan: list[dict], kill=None) -> tuple[list[str], float]:
    texts = [adapter.reset(**row)]
    for i, call in enumerate(plan):
        if kill is not None and i == len(plan) // 2:
            kill()
        texts.append(getattr(adapter, call["tool"])(**call["arguments"]))
    return texts, adapter.get_reward()


def test_interactive_episodes_on_servers_match_in_process_even_when_one_dies(two_servers):
    procs, urls = two_servers
    env = make(ENV)
    task, seed = env.tasks[0], 3
    plan = play(env, policies(ENV)["heuristic"](0), task, seed).plan
    row = {"env": ENV, "task": task, "seed": seed}
    local = environment_factory(ENV)()
    servers = Servers(urls, retries=3, backoff_s=0.0)
    remote = environment_factory(ENV, servers=servers)()
    expected = _play_adapter(local, row, plan)
    assert _play_adapter(remote, row, plan) == expected
    completion = render_completion(plan)
    assert outcome_from_env(remote.env, completion) == outcome_from_env(local.env, completion)

    # the server holding the session dies mid-episode: the next one replays it and goes on
    again = environment_factory(ENV, servers=servers)()
    holder = {url: proc for url, proc in zip(urls, procs, strict=True)}

    def kill() -> None:
        stop(holder[again.env._url])

    assert _play_adapter(again, row, plan, kill=kill) == expected
    assert outcome_from_env(again.env, completion) == outcome_from_env(local.env, completion)
    assert render_observation(again.env.step({"tool": "x", "arguments": {}})) != ""

    # no server left: the model sees an error, the episode scores 0 with a reason, no crash
    for proc in procs:
        stop(proc)
    lost = environment_factory(ENV, servers=Servers(urls, retries=2, backoff_s=0.0))()
    opening = lost.reset(**row)
    assert "environment servers unavailable" in opening
    assert lost.get_reward() == 0.0
    outcome = outcome_from_env(lost.env, completion)
    assert outcome.broken and "unreadable" in outcome.problem
    with pytest.raises(RemoteError):
        lost.env.report()


def _texts(value) -> set[str]:
    if isinstance(value, str):
        return {value} if len(value) >= 4 and any(c.isdigit() for c in value) else set()
    if isinstance(value, dict):
        return set().union(set(), *(_texts(v) for v in value.values()))
    if isinstance(value, (list, tuple, set)):
        return set().union(set(), *(_texts(v) for v in value))
    return set()


@pytest.mark.parametrize("name", ["aml", "fraud", "gang", "ops", "support"])
def test_replay_answers_show_no_hidden_value_the_calls_did_not(name: str) -> None:
    """``/replay`` gives the report, never ``reveal()``: a hidden episode value (an id, an
    amount, a code) appears in its answer only if the replayed calls' observations showed it."""
    from fastapi.testclient import TestClient

    from env.server import create_env_app

    env = make(name)
    task, seed = env.tasks[-1], 11
    plan = play(env, policies(name)["heuristic"](seed), task, seed).plan
    probes = [{"tool": s.name, "arguments": {"unexpected": 1}} for s in env.tool_specs()]
    with TestClient(create_env_app(name)) as client:
        for calls in (plan[: len(plan) // 2], probes, plan):
            twin = make(name)
            shown = [twin.reset(seed=seed, task=task).model_dump(mode="json")]
            shown += [twin.step(c).model_dump(mode="json") for c in calls if not twin.done]
            hidden = _texts(twin.reveal()) - _texts(shown)
            body = {"env": name, "task": task, "seed": seed, "calls": calls}
            answer = client.post("/replay", json=body)
            assert answer.status_code == 200, answer.text
            leaked = sorted(v for v in hidden if v in answer.text)
            assert not leaked, f"/replay shows hidden values {leaked[:5]}"


def test_a_lone_server_that_restarts_costs_retries_not_the_row(two_servers) -> None:
    import threading

    procs, urls = two_servers
    port = int(urls[0].rsplit(":", 1)[1])
    row = _rows(1)[0]
    local, remote = ReplayCache(), ReplayCache()
    remote.use_servers(ReplayClient(Servers(urls[:1], retries=6)))
    stop(procs[0])
    restarted: list[subprocess.Popen] = []
    restart = threading.Thread(target=lambda: restarted.append(spawn(ENV, port)))
    restart.start()
    try:
        args = (ENV, row["task"], row["seed"], row["completion"])
        assert remote.outcome(*args) == local.outcome(*args)
    finally:
        restart.join(timeout=60)
        for proc in restarted:
            stop(proc)
