"""Nothing a remote agent can reach shows the hidden truth before the episode ends.

For every registered environment that imports (and the test ``VaultEnv``), an in-process twin
with the same task and seed says what is hidden (``reveal()``). The served surfaces are then
searched for it: ``/state`` (HTTP and in-session), the error messages of malformed calls,
``/schema``, ``/metadata``, ``tools/list`` and the web page with its config.

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
from env.registry import env_class, names
from env.server import create_env_app


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


def _static(client: TestClient) -> str:
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    parts = [
        client.get("/schema").text,
        client.get("/metadata").text,
        client.get("/web").text,
        client.get("/web/config").text,
        json.dumps(client.post("/mcp", json=rpc).json()),
    ]
    return "\n".join(parts)


def leaks(cls: type[ToolEnvironment]) -> list[str]:
    """Every place a served surface shows hidden truth, for all tasks and seeds 0 and 1."""
    client = TestClient(create_env_app(cls, max_concurrent_envs=4))
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
