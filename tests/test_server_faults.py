"""Faults a remote agent can cause: each gets a clear error and the server goes on serving."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from test_server_app import VaultEnv
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from env.server import create_env_app

from conftest import ServerThread, serve

CAP = 3
pytestmark = pytest.mark.filterwarnings("ignore:connect\\(\\) must be used:DeprecationWarning")


@pytest.fixture(scope="module")
def server():
    with serve(VaultEnv, max_concurrent_envs=CAP) as url:
        yield url


class Session:
    """A raw WebSocket session speaking OpenEnv's /ws protocol."""

    def __init__(self, url: str):
        self.ws = connect(url.replace("http", "ws") + "/ws", max_size=None)

    def send(self, message: dict | str) -> dict:
        self.ws.send(message if isinstance(message, str) else json.dumps(message))
        return json.loads(self.ws.recv(timeout=30))

    def reset(self, seed: int) -> dict:
        return self.send({"type": "reset", "data": {"task": "small", "seed": seed}})

    def step(self, tool: str, **arguments) -> dict:
        return self.send({"type": "step", "data": {"tool": tool, "arguments": arguments}})

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def witness(server):
    """A healthy session running alongside the faults; it must stay consistent."""
    session = Session(server)
    session.reset(seed=1)
    yield session
    out = session.step("open_drawer", drawer="D0")
    assert out["type"] == "observation" and out["data"]["observation"]["error"] is None
    session.close()


def test_malformed_json_is_an_invalid_json_error(server, witness):
    s = Session(server)
    out = s.send("{not json")
    assert out["type"] == "error" and out["data"]["code"] == "INVALID_JSON"
    assert s.reset(seed=2)["type"] == "observation"  # the same session still works
    s.close()


def test_unknown_tool_and_wrong_types_are_error_observations(server, witness):
    s = Session(server)
    s.reset(seed=3)
    unknown = s.step("teleport", where="moon")["data"]
    assert "unknown tool 'teleport'" in unknown["observation"]["error"]
    assert unknown["reward"] < 0 and not unknown["done"]
    wrong = s.step("open_drawer", drawer=["D1"])["data"]["observation"]["error"]
    assert "invalid arguments for open_drawer" in wrong and "drawer" in wrong
    bad_action = s.send({"type": "step", "data": {"tool": 5, "arguments": "x"}})
    assert bad_action["type"] == "error" and bad_action["data"]["code"] == "VALIDATION_ERROR"
    assert s.step("shout")["data"]["observation"]["step"] == 3
    s.close()


def test_one_megabyte_payload_is_refused_clearly(server, witness):
    s = Session(server)
    s.reset(seed=4)
    out = s.step("open_drawer", drawer="x" * 1_000_000)["data"]["observation"]
    assert out["error"].startswith("arguments too large")
    big = httpx.post(
        f"{server}/step",
        json={"action": {"tool": "shout", "arguments": {"volume": "y" * 1_000_000}}, "seed": 1},
    )
    assert big.status_code == 200 and "too large" in big.json()["observation"]["error"]
    s.close()
    huge = Session(server)  # past the 4 MB frame limit the socket is closed (1009)
    huge.ws.send(json.dumps({"type": "step", "data": {"tool": "shout", "x": "z" * 5_000_000}}))
    with pytest.raises(ConnectionClosed) as closed:
        huge.ws.recv(timeout=30)
    assert closed.value.rcvd.code == 1009


def test_client_disconnecting_mid_episode_frees_its_session(server, witness):
    blocker = Session(server)  # with the witness, the cap is reached only if `gone` lingers
    blocker.reset(seed=7)
    gone = Session(server)
    gone.reset(seed=5)
    gone.step("open_drawer", drawer="D1")
    gone.ws.socket.close()  # abrupt: no close frame
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        fresh = Session(server)
        try:
            if fresh.reset(seed=6)["type"] == "observation":
                break
        finally:
            fresh.close()
        time.sleep(0.1)
    else:
        pytest.fail("the dropped session was never freed")
    assert blocker.step("shout")["type"] == "observation"
    blocker.close()


def test_session_cap_reached_is_a_capacity_error(server, witness):
    held = [Session(server) for _ in range(CAP - 1)]  # the witness holds one slot
    for i, s in enumerate(held):
        assert s.reset(seed=10 + i)["type"] == "observation"
    extra = Session(server)
    out = json.loads(extra.ws.recv(timeout=30))
    assert out["type"] == "error" and out["data"]["code"] == "CAPACITY_REACHED"
    assert out["data"]["max_sessions"] == CAP
    extra.close()
    for s in held:
        assert s.step("shout")["type"] == "observation"
        s.close()


def test_idle_sessions_are_reaped_after_the_timeout():
    app = create_env_app(VaultEnv, max_concurrent_envs=2, session_timeout_s=1.0)
    with ServerThread(app) as url:

        def rpc(method: str, params: dict) -> dict:
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            return httpx.post(f"{url}/mcp", json=body).json()

        sid = rpc("openenv/session/create", {})["result"]["session_id"]
        ok = rpc("tools/call", {"name": "reset_episode", "arguments": {}, "session_id": sid})
        assert ok["result"]["step"] == 0
        time.sleep(7)  # OpenEnv's reaper wakes every max(timeout / 4, 5) s
        gone = rpc("tools/call", {"name": "shout", "arguments": {}, "session_id": sid})
    assert "Unknown session_id" in gone["error"]["message"]
