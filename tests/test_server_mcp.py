"""Real MCP (streamable HTTP) on the environment server, played by standard MCP clients.

The server runs for real (uvicorn on a loopback port, ``conftest.ServerThread``). ``fastmcp``'s
``Client`` and the official ``mcp`` SDK client each initialize, list the tools, reset an AML case
and play the registered heuristic policy's calls to the end; the grade and every step reward must
equal an in-process game of the same task and seed. Sessions hold independent episodes, bad
calls come back as MCP error results, the session cap refuses clearly, and OpenEnv's JSON-RPC on
the same ``/mcp`` path keeps answering.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from fastmcp import Client as FastMCPClient
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from openenv.core import GenericEnvClient

from env.base import ToolObservation
from env.mcp_server import RESET_TOOL, STATE_TOOL
from env.registry import env_class, policies
from env.rollout import play
from env.server import create_env_app

from conftest import ServerThread, serve

TASK, SEED = "medium", 7
MAX_CALLS = 200  # a bound on every loop: the env's own step limit ends episodes far sooner
Call = Callable[[str, dict[str, Any]], Awaitable[tuple[dict[str, Any] | None, bool, str]]]
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    },
}


@pytest.fixture(scope="module")
def server():
    with serve("aml", max_concurrent_envs=8) as url:
        yield url


def in_process(task: str, seed: int) -> tuple[dict[str, Any], list[float], list[str]]:
    """The heuristic's game in-process: grade, step rewards and the tools it called."""
    episode = play(env_class("aml")(), policies("aml")["heuristic"](seed), task, seed)
    assert episode.report is not None
    grade = episode.report.grade.model_dump(mode="json")
    return grade, episode.report.step_rewards, [a.tool for a in episode.actions]


async def play_over_mcp(call: Call, task: str, seed: int) -> tuple[dict, list[float], list[str]]:
    """Reset through ``reset_episode`` and play the heuristic's calls as MCP tool calls."""
    data, is_error, _ = await call(RESET_TOOL, {"task": task, "seed": seed})
    assert not is_error and data is not None
    obs = ToolObservation.model_validate(data)
    policy = policies("aml")["heuristic"](seed)
    policy.reset(env_class("aml")(), obs)  # an unstarted env: an honest policy reads obs only
    rewards, tools = [], []
    for _ in range(MAX_CALLS):
        if obs.done:
            break
        action = policy.act(obs)
        data, is_error, _ = await call(action.tool, action.arguments)
        assert data is not None, f"{action.tool} gave no observation"
        obs = ToolObservation.model_validate(data)
        assert is_error == (obs.error is not None)
        rewards.append(obs.reward)
        tools.append(action.tool)
    assert obs.done and obs.grade is not None, "the episode did not end"
    state, _, _ = await call(STATE_TOOL, {})
    assert state is not None and state["done"] and state["seed"] == seed
    assert state["grade"] == obs.grade.model_dump(mode="json")
    return obs.grade.model_dump(mode="json"), rewards, tools


def fastmcp_call(client: FastMCPClient) -> Call:
    async def call(name: str, arguments: dict[str, Any]):
        out = await client.call_tool(name, arguments, raise_on_error=False)
        text = out.content[0].text if out.content else ""
        return out.structured_content, out.is_error, text

    return call


def sdk_call(session: ClientSession) -> Call:
    async def call(name: str, arguments: dict[str, Any]):
        out = await session.call_tool(name, arguments)
        text = out.content[0].text if out.content else ""
        return out.structuredContent, out.isError, text

    return call


def test_fastmcp_client_plays_an_aml_episode_to_the_in_process_grade(server):
    async def go():
        async with FastMCPClient(f"{server}/mcp") as client:
            tools = await client.list_tools()
            return tools, await play_over_mcp(fastmcp_call(client), TASK, SEED)

    tools, (grade, rewards, called) = asyncio.run(go())
    specs = env_class("aml").tool_specs()
    assert [t.name for t in tools] == [RESET_TOOL, *(s.name for s in specs), STATE_TOOL]
    by_name = {t.name: t for t in tools}
    for spec in specs:
        assert by_name[spec.name].inputSchema == spec.parameters
        assert by_name[spec.name].description == spec.description
    assert by_name[RESET_TOOL].inputSchema["properties"]["task"]["enum"] == [
        "easy",
        "medium",
        "hard",
    ]
    expected_grade, expected_rewards, expected_tools = in_process(TASK, SEED)
    assert called == expected_tools and len(called) >= 3
    assert rewards == expected_rewards
    assert grade == expected_grade


def test_official_mcp_sdk_client_plays_an_aml_episode_to_the_in_process_grade(server):
    async def go():
        async with (
            streamable_http_client(f"{server}/mcp") as (read, write, session_id),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert session_id(), "the server must open an MCP session (Mcp-Session-Id)"
            tools = (await session.list_tools()).tools
            return init, tools, await play_over_mcp(sdk_call(session), "hard", 3)

    init, tools, (grade, rewards, called) = asyncio.run(go())
    assert init.serverInfo.name == "aml-environment" and RESET_TOOL in (init.instructions or "")
    assert {RESET_TOOL, STATE_TOOL, "review_alert", "file_sar"} <= {t.name for t in tools}
    expected_grade, expected_rewards, expected_tools = in_process("hard", 3)
    assert (grade, rewards, called) == (expected_grade, expected_rewards, expected_tools)


def test_two_concurrent_sessions_hold_independent_episodes(server):
    async def go():
        async with FastMCPClient(f"{server}/mcp") as a, FastMCPClient(f"{server}/mcp") as b:
            # b has not reset: a's episode must not be visible to it
            _, error, text = await fastmcp_call(b)("review_alert", {"alert_id": "x"})
            assert error and "no episode yet" in text
            return await asyncio.gather(
                play_over_mcp(fastmcp_call(a), "easy", 11),
                play_over_mcp(fastmcp_call(b), "medium", 12),
            )

    (grade_a, rewards_a, tools_a), (grade_b, rewards_b, tools_b) = asyncio.run(go())
    assert (grade_a, rewards_a, tools_a) == in_process("easy", 11)
    assert (grade_b, rewards_b, tools_b) == in_process("medium", 12)


def test_bad_calls_are_mcp_errors_and_the_server_keeps_serving(server):
    async def go():
        async with FastMCPClient(f"{server}/mcp") as client:
            call = fastmcp_call(client)
            out = {"before_reset": await call("review_alert", {"alert_id": "A"})}
            out["unknown_task"] = await call(RESET_TOOL, {"task": "nope"})
            out["bad_seed"] = await call(RESET_TOOL, {"seed": "seven"})
            out["extra"] = await call(RESET_TOOL, {"seed": 1, "colour": "red"})
            out["reset"] = await call(RESET_TOOL, {"task": "easy", "seed": 5})
            out["unknown_tool"] = await call("no_such_tool", {"x": 1})
            out["wrong_types"] = await call("query_transactions", {"customer_id": [[1]]})
            out["state"] = await call(STATE_TOOL, {})
            alert = out["reset"][0]["result"]["alert_id"]
            out["good"] = await call("review_alert", {"alert_id": alert})
            return out

    out = asyncio.run(go())
    for key in ("before_reset", "unknown_task", "bad_seed", "extra", "unknown_tool"):
        data, error, text = out[key]
        assert error and data is None and text, key
    assert "reset_episode" in out["before_reset"][2] and "easy" in out["unknown_task"][2]
    assert "colour" in out["extra"][2] and "integer" in out["bad_seed"][2]
    # a wrongly typed call is a step of the episode, costed like on /ws, and an MCP error
    data, error, _ = out["wrong_types"]
    assert error and data["error"] and data["step"] == 1 and data["reward"] < -0.02
    assert out["state"][0]["step_count"] == 1 and out["state"][0]["grade"] is None
    data, error, _ = out["good"]
    assert not error and data["error"] is None and data["step"] == 2


def _initialize(client: httpx.Client, url: str) -> httpx.Response:
    return client.post(f"{url}/mcp", json=INITIALIZE, headers=MCP_HEADERS)


def test_session_cap_refuses_clearly_and_a_closed_session_frees_its_environment():
    app = create_env_app("aml", max_concurrent_envs=2)
    endpoint = app.state.mcp
    with ServerThread(app) as url, httpx.Client(timeout=10) as http:
        ids = []
        for _ in range(2):
            opened = _initialize(http, url)
            assert opened.status_code == 200, opened.text
            ids.append(opened.headers["mcp-session-id"])
        assert _wait(lambda: endpoint.live == 2)
        refused = _initialize(http, url)
        assert refused.status_code == 503
        assert "too many MCP sessions" in refused.json()["error"]["message"]
        assert "cap is 2" in refused.json()["error"]["message"]
        # other clients are unaffected: OpenEnv's JSON-RPC on the same path still answers
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        assert http.post(f"{url}/mcp", json=rpc).json()["result"]["tools"]
        closed = http.delete(f"{url}/mcp", headers={**MCP_HEADERS, "mcp-session-id": ids[0]})
        assert closed.status_code in (200, 204)
        assert _wait(lambda: endpoint.live == 1), "the closed session's environment was kept"
        gone = http.post(
            f"{url}/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
            headers={**MCP_HEADERS, "mcp-session-id": ids[0]},
        )
        assert gone.status_code == 404
        assert _initialize(http, url).status_code == 200


def test_idle_sessions_expire_and_free_their_environment():
    app = create_env_app("aml", max_concurrent_envs=4, session_timeout_s=0.5)
    with ServerThread(app) as url, httpx.Client(timeout=10) as http:
        assert _initialize(http, url).status_code == 200
        assert _wait(lambda: app.state.mcp.live == 1)
        assert _wait(lambda: app.state.mcp.live == 0, timeout_s=15), "idle session kept"


def test_openenv_clients_still_work_beside_an_open_mcp_session(server):
    async def mcp_session_open_while(check: Callable[[], Any]) -> Any:
        async with FastMCPClient(f"{server}/mcp") as client:
            await client.call_tool(RESET_TOOL, {"task": "easy", "seed": 2})
            return await asyncio.to_thread(check)

    def openenv_clients() -> tuple[list[str], float | None]:
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        tools = httpx.post(f"{server}/mcp", json=rpc).json()["result"]["tools"]
        with GenericEnvClient(base_url=server).sync() as generic:
            first = generic.reset(task="easy", seed=2)
            alert = first.observation["result"]["alert_id"]
            step = generic.step({"tool": "review_alert", "arguments": {"alert_id": alert}})
        return [t["name"] for t in tools], step.reward

    names, reward = asyncio.run(mcp_session_open_while(openenv_clients))
    assert names[0] == RESET_TOOL and "review_alert" in names
    assert reward is not None
    # `openenv validate`'s probe (POST {} without MCP's Accept header) still reaches OpenEnv
    assert httpx.post(f"{server}/mcp", json={}).json()["jsonrpc"] == "2.0"


def _wait(predicate: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
