"""Load test of the OpenEnv server: many concurrent WebSocket sessions, no cross-talk.

A server process (``python -m env.server``) is started on a loopback port. Each of ``--sessions``
clients opens its own ``/ws`` session and plays ``--steps`` tool calls on its own (task, seed)
episodes, resetting to the next seed when an episode ends. The calls come from a seeded
schema-driven random player (valid tools, ids taken from what the session has seen), played
first in-process to record the expected observations; every remote observation must equal its
in-process twin byte for byte, so one session receiving another's result (cross-talk) or any
error shows up. Per-step latency (send to receive) gives p50/p99; steps per second is the total
over the wall time of the stepping phase. The CPU time of the server process and of the client
process over the load, per step, says which of the two sets the pace on a shared machine.

The same load also goes to a bare OpenEnv server (``benchmarks/trivial_env.py``: an echo
environment on OpenEnv's own app), in the same run, so each environment's figures read as a
ratio to the fastest server OpenEnv can be (target: >= 0.9x its steps/s, p99 <= 1.5x its p99).
The servers take turns for ``--rounds`` rounds, each playing the load ``--loads`` times in a row
per start, and each figure is the median over the rounds: on a shared 2-core machine one
sub-second load is noisy (the same server moves 20-40% from one load to the next).

    python benchmarks/bench_server.py --env aml --sessions 64 --steps 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from env.base import ToolCallAction, ToolEnvironment, ToolObservation, ToolSpec
from env.registry import env_class, names
from env.server import free_port

logger = logging.getLogger("bench_server")
ROOT = Path(__file__).resolve().parents[1]
_TOKEN = re.compile(r"\b[A-Za-z]{1,4}[-_]?\d{1,8}\b")


class SchemaPlayer:
    """Seeded random calls that fit the tool schemas, with ids from earlier observations."""

    def __init__(self, specs: list[ToolSpec], seed: int):
        self.rng = random.Random(seed)
        self.specs = [s for s in specs if not s.terminal]
        self.terminals = [s for s in specs if s.terminal]
        self.tokens: list[str] = []

    def observe(self, obs: ToolObservation) -> None:
        text = json.dumps(obs.result, default=str)
        self.tokens = sorted(set(self.tokens) | set(_TOKEN.findall(text)))

    def act(self) -> ToolCallAction:
        pool = self.terminals if self.rng.random() < 0.05 and self.terminals else self.specs
        spec = self.rng.choice(pool or self.terminals)
        props = spec.parameters.get("properties", {})
        required = set(spec.parameters.get("required", []))
        args = {
            name: self._value(schema)
            for name, schema in props.items()
            if name in required or self.rng.random() < 0.3
        }
        return ToolCallAction(tool=spec.name, arguments=args)

    def _value(self, schema: dict[str, Any]) -> Any:
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        if "anyOf" in schema:
            options = [s for s in schema["anyOf"] if s.get("type") != "null"] or schema["anyOf"]
            return self._value(self.rng.choice(options))
        kind = schema.get("type", "string")
        if kind == "integer":
            return self.rng.randint(0, 5)
        if kind == "number":
            return round(self.rng.random() * 100, 2)
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "array":
            return [self._value(schema.get("items", {})) for _ in range(self.rng.randint(1, 2))]
        if kind == "object":
            return {}
        return self.rng.choice(self.tokens) if self.tokens else "x"


@dataclass
class Script:
    """One session's messages and the observations the server must answer with."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    expected: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    env_s: float = 0.0
    """Seconds the environment's own ``reset`` and ``step`` took while the script was played
    in-process: the work a server adds to OpenEnv's per step, without sockets or threads."""

    def timed(self, call: Any, *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)``, its seconds added to ``env_s``."""
        started = time.perf_counter()
        try:
            return call(*args, **kwargs)
        finally:
            self.env_s += time.perf_counter() - started


def canonical(obs: dict[str, Any]) -> str:
    return json.dumps(obs, sort_keys=True)


def build_script(cls: type[ToolEnvironment], session: int, steps: int) -> Script:
    """Play a session in-process: the reference every remote answer is compared with."""
    env = cls()
    script = Script()
    task_rng = random.Random(f"bench:{session}")
    seed = 1000 * session
    done = True
    played = 0
    while played < steps:
        if done:
            task = task_rng.choice(list(cls.tasks))
            obs = script.timed(env.reset, seed=seed, task=task)
            player = SchemaPlayer(cls.tool_specs(), seed)
            player.observe(obs)
            script.messages.append({"type": "reset", "data": {"task": task, "seed": seed}})
            script.expected.append(canonical(obs.model_dump(mode="json")))
            script.kinds.append("reset")
            seed += 1
        action = player.act()
        obs = script.timed(env.step, action)
        player.observe(obs)
        done = obs.done
        script.messages.append({"type": "step", "data": action.model_dump(exclude={"metadata"})})
        script.expected.append(canonical(obs.model_dump(mode="json")))
        script.kinds.append("step")
        played += 1
    return script


def echo_script(session: int, steps: int) -> Script:
    """The bare baseline's session: the same number of steps, resets where its episodes end."""
    from benchmarks.trivial_env import EchoAction, EchoEnvironment

    env, script, seed, done = EchoEnvironment(), Script(), 1000 * session, True
    for played in range(steps):
        if done:
            obs = script.timed(env.reset, seed=seed)
            script.messages.append({"type": "reset", "data": {"seed": seed}})
            script.expected.append(canonical(obs.model_dump(mode="json")))
            script.kinds.append("reset")
            seed += 1
        action = EchoAction(message=f"session {session} step {played}")
        obs = script.timed(env.step, action)
        done = obs.done
        script.messages.append({"type": "step", "data": action.model_dump(exclude={"metadata"})})
        script.expected.append(canonical(obs.model_dump(mode="json")))
        script.kinds.append("step")
    return script


def _remote_obs(data: dict[str, Any]) -> dict[str, Any]:
    obs = dict(data["observation"])
    obs["reward"], obs["done"] = data["reward"], data["done"]
    return obs


async def run_session(url: str, script: Script, latencies: list[float]) -> tuple[int, int]:
    """Play a script over one WebSocket; returns (errors, mismatches)."""
    from websockets.asyncio.client import connect

    errors = mismatches = 0
    async with connect(url, max_size=None, open_timeout=60) as ws:
        for message, expected, kind in zip(
            script.messages, script.expected, script.kinds, strict=True
        ):
            started = time.perf_counter()
            await ws.send(json.dumps(message))
            reply = json.loads(await ws.recv())
            if kind == "step":
                latencies.append(time.perf_counter() - started)
            if reply.get("type") != "observation":
                errors += 1
                logger.error("session error: %s", reply)
                continue
            if canonical(_remote_obs(reply["data"])) != expected:
                mismatches += 1
        await ws.send(json.dumps({"type": "close"}))
    return errors, mismatches


async def load(url: str, scripts: list[Script], repeats: int = 1) -> dict[str, Any]:
    """Play every script at once, ``repeats`` times in a row (fresh sessions each time); steps/s
    is all steps over all the wall time, p50/p99 over every step's latency."""
    latencies: list[float] = []
    wall = 0.0
    results: list[tuple[int, int]] = []
    for _ in range(repeats):
        started = time.perf_counter()
        results += await asyncio.gather(*(run_session(url, s, latencies) for s in scripts))
        wall += time.perf_counter() - started
    latencies.sort()
    return {
        "wall_s": wall,
        "steps": len(latencies),
        "errors": sum(r[0] for r in results),
        "mismatches": sum(r[1] for r in results),
        "steps_per_s": len(latencies) / wall,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
    }


BARE = "bare"
"""The ``--env`` name of the bare OpenEnv baseline (``benchmarks/trivial_env.py``)."""
BARE_LIKE_OURS = "bare_like_ours"
"""The same echo environment served as ``env.server`` serves ours (``trivial_env --like-ours``):
one shared worker thread, reset and step on the event loop, the startup heap frozen. Against it
an environment server's ratio is the cost of its environment alone."""
BARES = (BARE, BARE_LIKE_OURS)


def start_server(
    env_name: str, port: int, sessions: int, bare_gc_freeze: bool = True
) -> subprocess.Popen:
    if env_name in BARES:
        cmd = [sys.executable, "-m", "benchmarks.trivial_env", "--port", str(port)]
        if env_name == BARE_LIKE_OURS:
            cmd += ["--like-ours", "--gc-freeze"]
        elif bare_gc_freeze:
            cmd += ["--gc-freeze"]
    else:
        cmd = [sys.executable, "-m", "env.server", "--env", env_name, "--port", str(port)]
    cmd += ["--max-concurrent-envs", str(sessions), "--log-level", "warning"]
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": pythonpath})


def wait_healthy(url: str, proc: subprocess.Popen, timeout_s: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("server exited during startup")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError("server did not become healthy")


def bench(
    env_name: str, sessions: int, steps: int, loads: int = 1, bare_gc_freeze: bool = True
) -> dict[str, Any]:
    """Start a server, run the load ``loads`` times, stop it; returns the figures."""
    if env_name in BARES:
        name, scripts = env_name, [echo_script(i, steps) for i in range(sessions)]
    else:
        cls = env_class(env_name) if ":" not in env_name else _import(env_name)
        name, scripts = cls.name, [build_script(cls, i, steps) for i in range(sessions)]
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(env_name, port, sessions, bare_gc_freeze)
    try:
        wait_healthy(url, proc)
        server = psutil.Process(proc.pid)
        server_cpu, client_cpu = _cpu_s(server), time.process_time()
        figures = asyncio.run(load(url.replace("http", "ws") + "/ws", scripts, loads))
        server_cpu, client_cpu = _cpu_s(server) - server_cpu, time.process_time() - client_cpu
    finally:
        proc.terminate()
        proc.wait(timeout=15)
    per_step = 1e6 / max(1, figures["steps"])
    return {
        "env": name,
        "sessions": sessions,
        "steps_per_session": steps,
        "loads": loads,
        "env_us_per_step": per_step * loads * sum(s.env_s for s in scripts),
        "server_cpu_us_per_step": per_step * server_cpu,
        "client_cpu_us_per_step": per_step * client_cpu,
        **figures,
    }


def _cpu_s(process: psutil.Process) -> float:
    """A process's CPU seconds so far (user + system)."""
    times = process.cpu_times()
    return times.user + times.system


def bench_rounds(
    envs: list[str],
    sessions: int,
    steps: int,
    rounds: int,
    loads: int = 1,
    bare_gc_freeze: bool = True,
    like_ours: bool = True,
) -> list[dict[str, Any]]:
    """Each server (the bare baseline first) once per round, in turn, playing the load ``loads``
    times; per server the median steps/s and p99 over the rounds, the summed errors and
    mismatches, and the ratios to bare. ``bare_gc_freeze`` (the default) gives the bare server
    the startup heap freeze our servers do (``env.server.freeze_startup_heap``), so that the
    ratios compare like for like: unfrozen, its one or two full collections per start (110-140
    ms each) flatter every ratio, and more the slower the machine runs. ``like_ours`` (the
    default) also runs ``BARE_LIKE_OURS`` and gives every server its ratio to it: the bare server
    keeps OpenEnv's thread per session and thread hop per message, which ours skip, so only the
    second ratio is the environment's own cost."""
    baselines = [BARE, BARE_LIKE_OURS] if like_ours else [BARE]
    order = [*baselines, *(e for e in envs if e not in BARES)]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in order}
    for _ in range(rounds):
        for name in order:
            runs[name].append(bench(name, sessions, steps, loads, bare_gc_freeze))
    merged = []
    for name in order:
        rows = runs[name]
        merged.append(
            {
                **rows[0],
                "rounds": len(rows),
                "steps": sum(r["steps"] for r in rows),
                "errors": sum(r["errors"] for r in rows),
                "mismatches": sum(r["mismatches"] for r in rows),
                **{
                    key: statistics.median(r[key] for r in rows)
                    for key in (
                        "steps_per_s",
                        "p50_ms",
                        "p99_ms",
                        "env_us_per_step",
                        "server_cpu_us_per_step",
                        "client_cpu_us_per_step",
                    )
                },
                "all_steps_per_s": [round(r["steps_per_s"]) for r in rows],
            }
        )
    bare = merged[0]
    like = merged[1] if like_ours else None
    for run in merged:
        run["speed_vs_bare"] = run["steps_per_s"] / bare["steps_per_s"]
        run["speed_vs_like_ours"] = (
            None if like is None else run["steps_per_s"] / like["steps_per_s"]
        )
        run["p99_vs_bare"] = run["p99_ms"] / bare["p99_ms"]
        run["meets_target"] = (
            run["speed_vs_bare"] >= SPEED_TARGET and run["p99_vs_bare"] <= P99_TARGET
        )
    return merged


SPEED_TARGET = 0.9
P99_TARGET = 1.5


def _import(target: str) -> type[ToolEnvironment]:
    from env.server import resolve

    return resolve(target)


def env_budget_us(bare: dict[str, Any]) -> float:
    """Microseconds per step an environment may add to the bare server and keep 0.9x its
    steps/s, if its work adds serially to the wall time (the load keeps both cores busy)."""
    return (1 / SPEED_TARGET - 1) * 1e6 / bare["steps_per_s"]


def budget_note(bare: dict[str, Any]) -> str:
    return (
        "`env µs/step in-process`: the environment's own `reset` and `step` time per step of "
        "this load, timed while the scripts are played in-process (no sockets, threads or "
        f"JSON). The bare server's {bare['steps_per_s']:.0f} steps/s is "
        f"{1e6 / bare['steps_per_s']:.0f} µs of wall time per step, so 0.9x of it leaves an "
        f"environment about {env_budget_us(bare):.0f} µs per step of its own work. "
        "`server CPU µs/step`: the server process's CPU time (user + system) over the load, per "
        "step; when it is close to the wall time per step, the server, not the client, sets the "
        "pace. `client CPU µs/step`: the same for the one client process playing every session."
    )


def markdown(runs: list[dict[str, Any]], command: str, bare_gc_freeze: bool = True) -> str:
    from benchmarks.results import machine

    lines = [
        "## bench_server: concurrent WebSocket sessions on loopback",
        "",
        f"`{command}` — one server process per environment (`python -m env.server`) and the bare "
        "OpenEnv baseline (`python -m benchmarks.trivial_env`, an echo environment on OpenEnv's "
        "own app), taking turns each round; N client sessions in one asyncio process, each "
        "playing its own seeded episodes with schema-valid random calls; every observation "
        "compared with an in-process replay. A round starts each server once and plays the load "
        "`loads` times in a row on it (new sessions each time) and pools them; figures are "
        "medians over the rounds; the ratios are to the bare server's medians "
        f"(target >= {SPEED_TARGET}x steps/s, p99 <= {P99_TARGET}x). The environment servers "
        "freeze their startup heap before serving (`env.server.freeze_startup_heap`); "
        + (
            "so does the bare server in this run (like for like; `--no-bare-gc-freeze` keeps "
            "OpenEnv's default)."
            if bare_gc_freeze
            else "the bare server keeps OpenEnv's default in this run (`--no-bare-gc-freeze`), "
            "whose full collections of its startup heap flatter every ratio."
        )
        + (
            " `bare_like_ours`: the same echo environment served as `env.server` serves ours "
            "(OpenEnv's one shared worker thread instead of a thread per session, reset and step "
            "on the event loop instead of a thread hop per message, startup heap frozen); the last "
            "column is each server's steps/s over its steps/s, the cost of the environment alone "
            "(the target is read against `bare`, OpenEnv's default serving)."
            if any(r["env"] == BARE_LIKE_OURS for r in runs)
            else ""
        ),
        "",
        "| env | sessions x steps x loads x rounds | errors | cross-talk mismatches "
        "| steps/s (each round) | p50 ms | p99 ms | steps/s vs bare | p99 vs bare | target "
        "| env µs/step in-process | server CPU µs/step | client CPU µs/step "
        "| steps/s vs bare served like ours |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        each = ", ".join(str(v) for v in r["all_steps_per_s"])
        target = "baseline" if r["env"] in BARES else ("met" if r["meets_target"] else "NOT met")
        like = r.get("speed_vs_like_ours")
        lines.append(
            f"| {r['env']} | {r['sessions']} x {r['steps_per_session']} x {r['loads']} x "
            f"{r['rounds']} | "
            f"{r['errors']} | {r['mismatches']} | {r['steps_per_s']:.0f} ({each}) | "
            f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['speed_vs_bare']:.2f}x | "
            f"{r['p99_vs_bare']:.2f}x | {target} | {r['env_us_per_step']:.1f} | "
            f"{r['server_cpu_us_per_step']:.0f} | {r['client_cpu_us_per_step']:.0f} | "
            f"{'-' if like is None else f'{like:.2f}x'} |"
        )
    lines += ["", budget_note(runs[0]), "", f"Measured on {machine()}."]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", help="environment(s); default: all importable")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3, help="turns per server (medians)")
    parser.add_argument(
        "--loads", type=int, default=1, help="loads per server start (a round's figure pools them)"
    )
    parser.add_argument(
        "--bare-gc-freeze",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the bare server freezes its startup heap as ours do (the default: like for like); "
        "--no-bare-gc-freeze keeps OpenEnv's default",
    )
    parser.add_argument(
        "--like-ours-baseline",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the echo environment served as ours are (bare_like_ours) and give each "
        "server's ratio to it: the environment's own cost",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update RESULTS.md")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    envs = args.env or [n for n in names() if _imports(n)]
    runs = bench_rounds(
        envs,
        args.sessions,
        args.steps,
        args.rounds,
        args.loads,
        args.bare_gc_freeze,
        args.like_ours_baseline,
    )
    command = "python benchmarks/bench_server.py " + " ".join(argv or sys.argv[1:])
    from benchmarks.results import publish

    publish("bench_server", markdown(runs, command.strip(), args.bare_gc_freeze), not args.no_write)
    return 0 if all(r["errors"] == 0 and r["mismatches"] == 0 for r in runs) else 1


def _imports(name: str) -> bool:
    try:
        env_class(name)
        return True
    except ImportError:
        return False


if __name__ == "__main__":
    sys.exit(main())
