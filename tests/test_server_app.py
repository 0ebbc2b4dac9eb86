"""The OpenEnv server (env.server) and typed clients (env.client) over real loopback sockets.

``VaultEnv`` is a tiny environment with a hidden code: the agent lists drawers, opens them, and
names the code. The other server tests import it from here.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Literal

import httpx
import pytest
from openenv.core import GenericEnvClient
from websockets.sync.client import connect

from env.base import EnvConfig, Grade, ToolCallAction, ToolEnvironment, ToolError, tool
from env.client import CLIENTS, ToolEnvClient, client_class
from env.mcp_server import RESET_TOOL
from env.registry import names
from env.rollout import replay

from conftest import serve, wait_for_health

ROOT = Path(__file__).resolve().parents[1]


class VaultEnv(ToolEnvironment):
    """Find the drawer that holds the code and name the code."""

    name = "vault"
    tasks = ("small", "large")
    config_class = EnvConfig
    instructions = "Open drawers to find the hidden code, then name it."

    def _build(self, task: str, rng: random.Random) -> None:
        n = 4 if task == "small" else 9
        self.drawers = [f"D{i}" for i in range(n)]
        self.secret_drawer = rng.choice(self.drawers)
        self.code = f"QZX{rng.randrange(10**6):06d}"
        self.opened: set[str] = set()
        self.memory: list[str] = []

    def _opening(self):
        return {"drawers": self.drawers}, f"{len(self.drawers)} drawers."

    @tool(kind="investigation")
    def open_drawer(self, drawer: str) -> dict:
        """Open one drawer and see what is inside.

        Args:
            drawer: Drawer id from the list.
        """
        if drawer not in self.drawers:
            raise ToolError(f"no drawer {drawer!r}")
        self.opened.add(drawer)
        self.memory = [*self.memory[-1:], drawer]
        content = self.code if drawer == self.secret_drawer else None
        return {"drawer": drawer, "content": content, "working_memory": self.memory}

    @tool(kind="terminal", terminal=True)
    def name_code(self, code: str, sure: bool = True) -> str:
        """Name the code; ends the episode.

        Args:
            code: The code you found.
            sure: Whether you are sure.
        """
        self._finish(code)
        return "named"

    @tool(kind="action")
    def shout(self, volume: Literal["low", "high"] = "low") -> str:
        """Shout; does nothing useful.

        Args:
            volume: How loud.
        """
        return volume

    def _grade(self) -> Grade:
        right = float(self.decision == self.code)
        return Grade(total=right, components={"decision": right}, decision=self.decision)

    def reveal(self) -> dict:
        return {"code": self.code, "secret_drawer": self.secret_drawer}

    def _metrics(self) -> dict[str, float]:
        return {"evidence_coverage": float(self.secret_drawer in self.opened)}


def vault_walk(env_obs_drawers: list[str]) -> list[ToolCallAction]:
    """Calls that open every drawer (an honest, if slow, investigation)."""
    return [ToolCallAction(tool="open_drawer", arguments={"drawer": d}) for d in env_obs_drawers]


@pytest.fixture(scope="module")
def server():
    with serve(VaultEnv, max_concurrent_envs=8) as url:
        yield url


def test_info_routes_describe_the_environment(server):
    assert httpx.get(f"{server}/health").json()["status"] == "healthy"
    meta = httpx.get(f"{server}/metadata").json()
    assert meta["name"] == "vault" and "drawers" in meta["description"]
    schema = httpx.get(f"{server}/schema").json()
    assert set(schema["action"]["properties"]) >= {"tool", "arguments"}
    assert "steps_left" in schema["observation"]["properties"]
    assert "total_reward" in schema["state"]["properties"]


def test_websocket_episode_matches_in_process_replay(server):
    with ToolEnvClient(base_url=server).sync() as client:
        first = client.reset(task="large", seed=11)
        calls = vault_walk(first.observation.result["drawers"])[:5]
        rewards = [client.step(call).reward for call in calls]
        last = client.step(ToolCallAction(tool="name_code", arguments={"code": "QZX000000"}))
        state = client.state()
        tools = client.list_tools()
    assert [t["name"] for t in tools][1:] == list(VaultEnv.tool_specs_by_name())
    local = VaultEnv()
    report = replay(local, "large", 11, calls)
    assert rewards == report.step_rewards
    assert last.done and last.observation.grade is not None
    assert state.done and state.seed == 11 and state.task == "large" and state.step_count == 6


def test_async_client_and_generic_client_play_the_same_episode(server):
    async def typed() -> list[float]:
        async with client_class("aml")(base_url=server) as client:
            await client.reset(task="small", seed=5)
            out = [await client.call("open_drawer", drawer=f"D{i}") for i in range(3)]
            return [r.reward for r in out] + [str(r.observation.result) for r in out]

    with GenericEnvClient(base_url=server).sync() as generic:
        generic.reset(task="small", seed=5)
        steps = [
            generic.step({"tool": "open_drawer", "arguments": {"drawer": f"D{i}"}})
            for i in range(3)
        ]
    generic_out = [s.reward for s in steps] + [str(s.observation["result"]) for s in steps]
    assert asyncio.run(typed()) == generic_out


def test_a_client_class_per_registered_environment():
    assert {"aml", "fraud", "gang", "support", "ops"} <= set(CLIENTS) <= set(names())
    assert CLIENTS["aml"].__name__ == "AMLClient" and CLIENTS["fraud"].__name__ == "FraudClient"
    assert all(issubclass(c, ToolEnvClient) for c in CLIENTS.values())
    with pytest.raises(KeyError, match="unknown environment"):
        client_class("nope")


def test_mcp_client_investigates_a_case_over_the_mcp_websocket(server):
    ws_url = server.replace("http", "ws") + "/mcp"
    with connect(ws_url) as ws:

        def rpc(method: str, params: dict, i: int = 1) -> dict:
            ws.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}))
            return json.loads(ws.recv())

        tools = rpc("tools/list", {})["result"]["tools"]
        assert [t["name"] for t in tools] == [RESET_TOOL, *VaultEnv.tool_specs_by_name()]
        assert tools[1]["inputSchema"]["required"] == ["drawer"]
        opening = rpc("tools/call", {"name": RESET_TOOL, "arguments": {"task": "small", "seed": 2}})
        drawers = opening["result"]["result"]["drawers"]
        found = None
        for drawer in drawers:
            out = rpc("tools/call", {"name": "open_drawer", "arguments": {"drawer": drawer}})
            found = found or out["result"]["result"]["content"]
        final = rpc("tools/call", {"name": "name_code", "arguments": {"code": found}})["result"]
    assert final["done"] and final["grade"]["total"] == 1.0


def test_http_mcp_session_keeps_its_episode(server):
    def rpc(method: str, params: dict) -> dict:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return httpx.post(f"{server}/mcp", json=body).json()

    sid = rpc("openenv/session/create", {})["result"]["session_id"]
    rpc("tools/call", {"name": RESET_TOOL, "arguments": {"seed": 4}, "session_id": sid})
    out = rpc("tools/call", {"name": "shout", "arguments": {}, "session_id": sid})["result"]
    assert out["step"] == 1 and out["error"] is None
    assert rpc("openenv/session/close", {"session_id": sid})["result"]["closed"]
    stateless = rpc("tools/call", {"name": "shout", "arguments": {}})["result"]
    assert "call reset first" in stateless["error"]


def test_http_step_is_stateless_and_replays_history(server):
    lone = httpx.post(f"{server}/step", json={"action": {"tool": "shout", "arguments": {}}}).json()
    assert "stateless" in lone["observation"]["error"]
    history = [{"tool": "open_drawer", "arguments": {"drawer": "D1"}}]
    action = {"tool": "open_drawer", "arguments": {"drawer": "D2"}}
    body = {"action": action, "task": "small", "seed": 9, "history": history}
    remote = httpx.post(f"{server}/step", json=body).json()
    local = VaultEnv()
    local.reset(seed=9, task="small")
    local.step(history[0])
    expected = local.step(action)
    assert remote["observation"]["result"] == expected.result
    assert remote["observation"]["step"] == 2 and remote["reward"] == expected.reward
    bad = httpx.post(f"{server}/reset", json={"task": "nope"})
    assert bad.status_code == 400 and "unknown task" in bad.json()["detail"]


def test_openenv_validate_url_passes(server):
    cli = Path(sys.executable).with_name("openenv")
    out = subprocess.run(
        [str(cli), "validate", "--url", server, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    assert report["passed"], report["summary"]


def test_cli_serves_an_environment_by_import_string():
    from env.server import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "env.server", "--env", "test_server_app:VaultEnv"]
        + ["--port", str(port), "--log-level", "warning"],
        cwd=ROOT,
        env={"PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", "PATH": "/usr/bin:/bin"},
    )
    try:
        wait_for_health(proc, port)
        assert httpx.get(f"http://127.0.0.1:{port}/metadata").json()["name"] == "vault"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_openenv_mcp_tool_client_investigates_a_case(server):
    from openenv.core.mcp_client import MCPToolClient

    with MCPToolClient(base_url=server).sync() as mcp:
        assert [t.name for t in mcp.list_tools()][:2] == [RESET_TOOL, "open_drawer"]
        opening = mcp.call_tool(RESET_TOOL, task="large", seed=8)
        contents = [mcp.call_tool("open_drawer", drawer=d) for d in opening["result"]["drawers"]]
        code = next(c["result"]["content"] for c in contents if c["result"]["content"])
        final = mcp.call_tool("name_code", code=code)
    assert final["done"] and final["grade"]["total"] == 1.0
    assert final["step"] == len(contents) + 1


def test_served_environments_reset_and_step_on_the_event_loop() -> None:
    """OpenEnv awaits overridden reset_async and step_async instead of a thread-pool hop: the
    served class overrides both and they answer exactly as the synchronous calls do."""
    from openenv.core.env_server._utils import overrides_method
    from openenv.core.env_server.interfaces import Environment

    from env.registry import env_class
    from env.server import served_class

    for name in names():
        served = served_class(env_class(name))
        inline, sync = served(), served()
        assert overrides_method(inline.step_async, Environment.step_async)
        assert overrides_method(inline.reset_async, Environment.reset_async)
        task = served.tasks[0]
        first = asyncio.run(inline.reset_async(seed=5, task=task))
        assert first == sync.reset(seed=5, task=task)
        call = ToolCallAction(tool=first.tools[0], arguments={})
        assert asyncio.run(inline.step_async(call)) == sync.step(call)


def test_resets_take_turns_and_steps_go_between_them() -> None:
    """Many sessions resetting at once run one reset per pass of the event loop, so a step that
    arrives meanwhile waits for at most one of them, not for all (bench_server's p99)."""
    from env.registry import env_class
    from env.server import served_class

    served = served_class(env_class("gang"))
    stepper = served()
    opening = stepper.reset(seed=1, task="hard")
    done: list[str] = []

    async def reset(i: int) -> None:
        await served().reset_async(seed=100 + i, task="hard")
        done.append(f"reset {i}")

    async def step() -> None:
        await asyncio.sleep(0)  # arrives after every reset has started waiting
        call = ToolCallAction(
            tool="inspect", arguments={"account_id": opening.result["alerts"][0]["account_id"]}
        )
        assert (await stepper.step_async(call)).error is None
        done.append("step")

    async def main() -> None:
        await asyncio.gather(*(reset(i) for i in range(8)), step())

    asyncio.run(main())
    assert len(done) == 9
    assert done.index("step") <= 1, done


@pytest.mark.parametrize("entry", ["cli", "asgi"])
def test_server_freezes_its_startup_heap_before_serving(entry: str) -> None:
    """Both ways of serving (``python -m env.server`` and ``env.server:app``) take the objects
    built at import and startup out of the collector before the first request, so a full
    collection walks only what the sessions made (bench_server's p99 and steps/s)."""
    start = {
        "cli": "import env.server as s; s.main(['--env', 'support', '--log-level', 'warning'])",
        "asgi": "import env.server as s; s.app; report()",
    }[entry]
    code = (
        "import gc, uvicorn\n"
        "def report(*args, **kwargs):\n"
        "    print(gc.get_freeze_count(), len(gc.get_objects()))\n"
        "uvicorn.run = report\n" + start
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "ENV_NAME": "support"},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    frozen, walked = map(int, out.stdout.split())
    assert frozen > 50_000  # FastAPI, pydantic, OpenEnv and the environment's own modules
    assert walked < frozen // 20


def test_sessions_share_one_worker_thread_instead_of_starting_one_each() -> None:
    """OpenEnv builds and closes each session's environment in an executor, by default a new
    one-thread pool (a new thread) per session; our environments have no thread affinity, so the
    served class asks for OpenEnv's one shared executor: opening sessions starts no threads."""
    import threading

    from env.server import served_class

    def workers() -> set[int | None]:
        """The executors' threads alive now (the clients' sockets run threads of their own)."""
        return {t.ident for t in threading.enumerate() if t.name.startswith("ThreadPoolExecutor")}

    assert served_class(VaultEnv).REQUIRES_SINGLE_THREAD_EXECUTOR
    with serve(VaultEnv, max_concurrent_envs=8) as url:
        ws_url = url.replace("http", "ws") + "/ws"
        before = workers()
        sockets = [connect(ws_url) for _ in range(6)]
        try:
            for i, ws in enumerate(sockets):
                ws.send(json.dumps({"type": "reset", "data": {"seed": i, "task": "small"}}))
                assert json.loads(ws.recv())["type"] == "observation"
            started = workers() - before
        finally:
            for ws in sockets:
                ws.close()
    assert len(started) <= 1, started
