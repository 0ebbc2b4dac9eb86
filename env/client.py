"""Typed clients for the environment servers (``env.server``), on OpenEnv's ``EnvClient``.

A client holds one WebSocket session, so one client is one episode at a time:

    async with AMLClient(base_url="http://127.0.0.1:8000") as env:
        first = await env.reset(task="structuring", seed=7)
        result = await env.call("review_alert")
        print(result.observation.result, result.reward, result.done)

or synchronously with ``AMLClient(base_url=...).sync()``. Every environment shares the same
action and observation models, so the per-environment clients are generated from the registry
names over one base class (no copy per environment).
"""

from __future__ import annotations

from typing import Any, ClassVar

from openenv.core import EnvClient
from openenv.core.client_types import StepResult

from env.base import EpisodeState, ToolCallAction, ToolObservation
from env.registry import names


class ToolEnvClient(EnvClient[ToolCallAction, ToolObservation, EpisodeState]):
    """Client of any tool environment server: reset, step / call, state, and MCP tools/list."""

    env_name: ClassVar[str] = ""

    def _step_payload(self, action: ToolCallAction | dict[str, Any]) -> dict[str, Any]:
        if isinstance(action, ToolCallAction):
            return action.model_dump(exclude={"metadata"})
        return dict(action)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ToolObservation]:
        obs = dict(payload.get("observation", {}))
        obs["reward"] = payload.get("reward")
        obs["done"] = payload.get("done", False)
        observation = ToolObservation.model_validate(obs)
        return StepResult(
            observation=observation,
            reward=observation.reward,
            done=observation.done,
            metadata=payload.get("metadata"),
        )

    def _parse_state(self, payload: dict[str, Any]) -> EpisodeState:
        return EpisodeState.model_validate(payload)

    def call(self, tool: str, **arguments: Any) -> Any:
        """One tool call by name: ``await env.call("query_transactions", customer_id="C1")``."""
        return self.step(ToolCallAction(tool=tool, arguments=arguments))

    def list_tools(self) -> Any:
        """The tools served over MCP in this session (``tools/list``): name, schema."""
        return self._dispatch(self._list_tools_async)

    async def _list_tools_async(self) -> list[dict[str, Any]]:
        message = {
            "type": "mcp",
            "data": {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
        }
        response = await self._send_and_receive(message)
        data = response.get("data", {})
        if "error" in data and data["error"]:
            raise RuntimeError(f"tools/list failed: {data['error']}")
        return data["result"]["tools"]


def _class_name(name: str) -> str:
    return (name.upper() if len(name) <= 3 else name.capitalize()) + "Client"


def client_class(name: str) -> type[ToolEnvClient]:
    """The client class of a registered environment (``client_class("aml") is AMLClient``)."""
    if name not in CLIENTS:
        if name not in names():
            raise KeyError(f"unknown environment {name!r}; registered: {', '.join(names())}")
        CLIENTS[name] = _make(name)  # registered after this module was imported
    return CLIENTS[name]


def _make(name: str) -> type[ToolEnvClient]:
    return type(_class_name(name), (ToolEnvClient,), {"env_name": name, "__module__": __name__})


CLIENTS: dict[str, type[ToolEnvClient]] = {n: _make(n) for n in names()}
globals().update({cls.__name__: cls for cls in CLIENTS.values()})

__all__ = ["CLIENTS", "ToolEnvClient", "client_class", *(c.__name__ for c in CLIENTS.values())]
