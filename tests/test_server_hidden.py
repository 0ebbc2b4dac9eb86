"""Nothing a remote agent can reach shows the hidden truth before the episode ends.

For every registered environment that imports (and the test ``VaultEnv``), an in-process twin
with the same task and seed says what is hidden (``reveal()``). The served surfaces are then
searched for it: ``/state`` (HTTP and in-session), the error messages of malformed calls,
``/schema``, ``/metadata``, ``tools/list`` and the web page with its config, and the same on the
streamable-HTTP MCP endpoint (``initialize``, ``tools/list``, error results, ``episode_state``).

Two kinds of hidden value are told apart. Episode values (ids, amounts, codes: strings with a
digit) must never appear anywhere served unless an observation already showed them. Label words
from a closed vocabulary (a typology, an outcome) may appear in static documentation, which is
the same for every episode (asserted), but never in the episode's state or error messages.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_server_app import VaultEnv

from env.base import ToolEnvironment, ToolError, tool
from env.mcp_server import RESET_TOOL, STATE_TOOL
from env.registry import env_class, names
from env.server import create_env_app

MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _importable() -> list[type[ToolEnvironment]]:
    classes: list[type[ToolEnvironment]] = [VaultEnv]
    for name in names():
        try:
            classes.append(env_class(name))
        except ImportError:
            continue
    return classes


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value} if len(value) >= 4 else set()
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    if isinstance(value, list | tuple | set):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()


def _vocabulary(cls: type[ToolEnvironment]) -> str:
    """Public words: env, tasks, tools and the enums of their arguments."""
    specs = [spec.openai_schema() for spec in cls.tool_specs()]
    return json.dumps([cls.name, list(cls.tasks), specs])


def _probes(cls: type[ToolEnvironment]) -> list[dict[str, Any]]:
    """Malformed and unknown-id calls for every tool: each should come back as an error."""
    probes: list[dict[str, Any]] = [{"tool": "no_such_tool", "arguments": {"x": 1}}]
    for spec in cls.tool_specs():
        props = spec.parameters.get("properties", {})
        probes.append({"tool": spec.name, "arguments": {"unexpected": 1}})
        probes.append({"tool": spec.name, "arguments": {p: [[1]] for p in props}})
        if spec.terminal:
            continue
        probes.append({"tool": spec.name, "arguments": {p: "ZZ-404" for p in props}})
    return probes


class McpSession:
    """A streamable-HTTP MCP session spoken by hand (JSON responses): initialize, calls, close."""

    def __init__(self, client: TestClient):
        self.client = client
        body = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "hidden-test", "version": "0"},
            },
        }
        opened = client.post("/mcp", json=body, headers=MCP_HEADERS)
        assert opened.status_code == 200, opened.text
        self.headers = {**MCP_HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        self.initialize = opened.json()["result"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert client.post("/mcp", json=note, headers=self.headers).status_code == 202

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        return self.client.post("/mcp", json=body, headers=self.headers).json()["result"]

    def call(self, name: str, arguments: dict[str, Any]) -> tuple[dict | None, bool, str]:
        out = self.rpc("tools/call", {"name": name, "arguments": arguments})
        return out.get("structuredContent"), out["isError"], out["content"][0]["text"]

    def close(self) -> None:
        self.client.delete("/mcp", headers=self.headers)


def _static(client: TestClient) -> str:
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    mcp = McpSession(client)
    parts = [
        client.get("/schema").text,
        client.get("/metadata").text,
        client.get("/web").text,
        client.get("/web/config").text,
        json.dumps(client.post("/mcp", json=rpc).json()),
        json.dumps(mcp.initialize, sort_keys=True),
        json.dumps(mcp.rpc("tools/list", {})),
    ]
    mcp.close()
    return "\n".join(parts)


def _mcp_episode(client: TestClient, cls: type, task: str, seed: int, opening: str) -> tuple:
    """Probe one episode on the MCP endpoint: (what valid calls showed, errors and states)."""
    mcp = McpSession(client)
    seen, dynamic = "", []
    first, error, _ = mcp.call(RESET_TOOL, {"task": task, "seed": seed})
    assert not error and first is not None
    assert first["result"] == json.loads(opening)["result"]
    for probe in _probes(cls):
        data, error, text = mcp.call(probe["tool"], probe["arguments"])
        if error:
            dynamic.append(text)
        else:
            seen += text  # a valid call: what it showed is now public
        if data is not None and data["done"]:
            mcp.call(RESET_TOOL, {"task": task, "seed": seed})
            continue
        dynamic.append(mcp.call(STATE_TOOL, {})[2])
    mcp.close()
    return seen, dynamic


def leaks(cls: type[ToolEnvironment]) -> list[str]:
    """Every place a served surface shows hidden truth, for all tasks and seeds 0 and 1."""
    with TestClient(create_env_app(cls, max_concurrent_envs=4)) as client:  # lifespan: MCP runs
        return _leaks(cls, client)


def _leaks(cls: type[ToolEnvironment], client: TestClient) -> list[str]:
    static_before = _static(client)
    vocabulary = _vocabulary(cls)
    found: list[str] = []
    for task in cls.tasks:
        for seed in (0, 1):
            twin = cls()
            opening = twin.reset(seed=seed, task=task)
            truth = _strings(twin.reveal())
            seen = opening.model_dump_json()
            dynamic: list[str] = [client.get("/state").text]
            with client.websocket_connect("/ws") as ws:
                ws.send_json({"type": "reset", "data": {"task": task, "seed": seed}})
                first = ws.receive_json()["data"]["observation"]
                assert first["result"] == json.loads(seen)["result"]
                for probe in _probes(cls):
                    ws.send_json({"type": "step", "data": probe})
                    data = ws.receive_json()["data"]
                    obs = data["observation"]
                    if obs["error"] is None:
                        seen += json.dumps(obs)  # a valid call: what it showed is now public
                    else:
                        dynamic.append(obs["error"] + obs["message"])
                    if data["done"]:
                        ws.send_json({"type": "reset", "data": {"task": task, "seed": seed}})
                        ws.receive_json()
                        continue
                    ws.send_json({"type": "state"})
                    dynamic.append(json.dumps(ws.receive_json()["data"]))
            opening_json = opening.model_dump_json()
            mcp_seen, mcp_dynamic = _mcp_episode(client, cls, task, seed, opening_json)
            seen += mcp_seen
            dynamic += mcp_dynamic
            hidden = {s for s in truth if s not in seen}
            episode_values = {s for s in hidden if any(ch.isdigit() for ch in s)}
            static = _static(client)
            assert static == static_before, "static surfaces must not depend on the episode"
            where = f"{cls.name}/{task}/{seed}"
            for text in dynamic:
                leaked = {s for s in hidden if s in text and s not in vocabulary}
                found += [f"{where}: {s!r} in {text[:200]!r}" for s in sorted(leaked)]
            leaked = {s for s in episode_values if s in static}
            found += [f"{where}: {s!r} in a static surface" for s in sorted(leaked)]
    return found


@pytest.mark.parametrize("cls", _importable(), ids=lambda c: c.name)
def test_served_surfaces_hide_the_truth(cls: type[ToolEnvironment]):
    assert leaks(cls) == []


class LeakyVault(VaultEnv):
    """A broken twin whose error message names the code: the check must catch it."""

    @tool(kind="investigation")
    def open_drawer(self, drawer: str) -> dict:
        """Open one drawer and see what is inside.

        Args:
            drawer: Drawer id from the list.
        """
        if drawer not in self.drawers:
            raise ToolError(f"no drawer {drawer!r}; try the one with {self.code}")
        return {"drawer": drawer, "content": None}


def test_the_check_finds_a_leak_in_an_error_message():
    found = leaks(LeakyVault)
    assert found and all("QZX" in line for line in found)


def test_the_mcp_probes_find_a_leak_in_an_error_message():
    with TestClient(create_env_app(LeakyVault, max_concurrent_envs=2)) as client:
        twin = LeakyVault()
        opening = twin.reset(seed=3, task="small")
        _, dynamic = _mcp_episode(client, LeakyVault, "small", 3, opening.model_dump_json())
    assert any(twin.code in text for text in dynamic)
