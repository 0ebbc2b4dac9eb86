"""Episodes on environment servers (``python -m env.server``), with retries across servers.

Training can run its environments as OpenEnv servers on other machines (``env.urls`` in the
training config) instead of in-process. Two things go through them:

- **Replays** (plan and steps rewards): ``ReplayClient.replay(env, task, seed, calls, prefix)``
  posts the row's task, seed and calls to the server's ``POST /replay`` and gets back the
  episode's ``EpisodeReport`` plus what the reward components read from the trace (which calls
  failed, the prefix's steps and evidence). Replays are stateless, so a failed request is simply
  sent to the next server.
- **Interactive episodes**: ``RemoteEpisode`` plays one episode over OpenEnv's WebSocket client
  (``env.client.ToolEnvClient``), one session per episode. It keeps the calls it made, so when its
  server dies or restarts mid-episode it opens a session on the next server, replays (task, seed,
  calls) there and carries on; the report at the end is a ``/replay`` of the same calls.

Servers are chosen round robin (each replay or episode starts at the next URL) and every failure
moves to the next one; after ``retries`` attempts a ``RemoteError`` says why. One HTTP client
(keep-alive connection pool) per URL per process. A server that answers 4xx rejected the row
itself (``RowError``): that is not retried.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import httpx

from env.base import EpisodeReport, StepRecord, ToolCallAction, ToolObservation, ToolSpec
from env.registry import env_class

logger = logging.getLogger(__name__)

REPLAY_PATH = "/replay"


class RemoteError(RuntimeError):
    """No server could play the episode after the retries (the message says what failed)."""


class RowError(RemoteError):
    """A server rejected the row itself (HTTP 4xx): retrying elsewhere would not help."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def check_urls(urls: Any) -> list[str]:
    """Base URLs as a clean list (``http://host:port``, no trailing slash); else ``ValueError``."""
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, (list, tuple)) or not urls:
        raise ValueError(f"expected one or more base URLs, got {urls!r}")
    out = []
    for url in urls:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"environment server URL {url!r} must start with http:// or https://")
        out.append(url.rstrip("/"))
    return out


class Servers:
    """The servers of each environment: a list for one environment or ``{env: [urls]}``."""

    def __init__(
        self,
        urls: Sequence[str] | Mapping[str, Sequence[str]],
        retries: int = 3,
        timeout_s: float = 60.0,
        backoff_s: float = 0.5,
    ):
        if isinstance(urls, Mapping):
            self.by_env: dict[str, list[str]] | None = {k: check_urls(v) for k, v in urls.items()}
            self.shared: list[str] = []
        else:
            self.by_env = None
            self.shared = check_urls(list(urls))
        if retries < 1:
            raise ValueError("retries must be >= 1")
        self.retries = retries
        self.timeout_s = timeout_s
        self.backoff_s = backoff_s
        self._turn = itertools.count()
        self._clients: dict[str, httpx.Client] = {}
        self._lock = threading.Lock()

    def urls(self, env_name: str) -> list[str]:
        if self.by_env is None:
            return self.shared
        if env_name not in self.by_env:
            raise RemoteError(f"env.urls names no server for environment {env_name!r}")
        return self.by_env[env_name]

    def order(self, env_name: str) -> list[str]:
        """The URLs to try for the next replay or episode: round robin, then the others."""
        urls = self.urls(env_name)
        start = next(self._turn) % len(urls)
        return [urls[(start + i) % len(urls)] for i in range(self.retries)]

    def http(self, url: str) -> httpx.Client:
        """The process's HTTP client of ``url`` (one keep-alive pool per server)."""
        with self._lock:
            client = self._clients.get(url)
            if client is None:
                client = self._clients[url] = httpx.Client(base_url=url, timeout=self.timeout_s)
            return client

    def pause(self, attempt: int) -> None:
        """Wait before retry ``attempt`` (0: none): 0.5 s, 1 s, 2 s, ... up to 10 s, so a lone
        server that restarts has time to come back (``retries=6`` waits about 15 s in all)."""
        if attempt:
            time.sleep(min(self.backoff_s * 2 ** (attempt - 1), 10.0))

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()


@dataclass(frozen=True)
class Replayed:
    """A server's answer to ``/replay``: the report and what the rewards read from the trace."""

    report: EpisodeReport
    prefix_steps: int
    prefix_coverage: float
    errors: tuple[bool, ...]
    """For each step after the prefix: whether that call failed."""
    max_steps: int
    max_argument_chars: int
    url: str = ""

    @property
    def trace(self) -> list[SimpleNamespace]:
        """The episode's steps in the shape the rewards read (``.error`` set when a call of the
        completion failed; the prefix's steps are placeholders, never read)."""
        steps = [SimpleNamespace(error=None) for _ in range(self.prefix_steps)]
        return steps + [SimpleNamespace(error="error" if bad else None) for bad in self.errors]

    @property
    def config(self) -> SimpleNamespace:
        return SimpleNamespace(max_steps=self.max_steps, max_argument_chars=self.max_argument_chars)


def _calls(calls: Sequence[Any]) -> list[dict[str, Any]]:
    out = []
    for call in calls:
        if isinstance(call, ToolCallAction):
            out.append({"tool": call.tool, "arguments": call.arguments})
        else:
            out.append({"tool": call.get("tool"), "arguments": call.get("arguments", {})})
    return out


class ReplayClient:
    """Replays (task, seed, calls) on the servers: ``POST /replay``, retried across them."""

    def __init__(self, servers: Servers):
        self.servers = servers

    def replay(
        self,
        env_name: str,
        task: str,
        seed: int,
        calls: Sequence[Any],
        prefix: Sequence[Any] = (),
    ) -> Replayed:
        body = json.dumps(
            {
                "env": env_name,
                "task": task,
                "seed": seed,
                "prefix": _calls(prefix),
                "calls": _calls(calls),
            },
            default=str,
        )
        failures = []
        for attempt, url in enumerate(self.servers.order(env_name)):
            self.servers.pause(attempt)
            try:
                response = self.servers.http(url).post(
                    REPLAY_PATH, content=body, headers={"content-type": "application/json"}
                )
            except httpx.HTTPError as exc:
                failures.append(f"{url}: {type(exc).__name__}")
                logger.warning("replay on %s failed (%s); trying another server", url, exc)
                continue
            if 400 <= response.status_code < 500:
                detail = _detail(response)
                raise RowError(str(detail.get("kind", "ValueError")), str(detail.get("message")))
            if response.status_code != 200:
                failures.append(f"{url}: HTTP {response.status_code}")
                logger.warning("replay on %s: HTTP %s; trying another", url, response.status_code)
                continue
            data = response.json()
            return Replayed(
                report=EpisodeReport.model_validate(data["report"]),
                prefix_steps=int(data["prefix_steps"]),
                prefix_coverage=float(data["prefix_coverage"]),
                errors=tuple(bool(e) for e in data["errors"]),
                max_steps=int(data["max_steps"]),
                max_argument_chars=int(data["max_argument_chars"]),
                url=url,
            )
        raise RemoteError(f"replay failed on every server tried: {'; '.join(failures)}")


def _detail(response: httpx.Response) -> dict[str, Any]:
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = None
    if isinstance(detail, dict):
        return detail
    return {"kind": "ValueError", "message": str(detail or response.text)[:500]}


@dataclass
class RemoteEpisode:
    """One episode played on a server over OpenEnv's WebSocket client, surviving server faults.

    Stands in for the ``ToolEnvironment`` of an in-process episode where callers read it:
    ``reset``, ``step`` (observations), ``report()`` (a ``/replay`` of the calls made), ``name``,
    ``tasks``, ``config``, ``done``, ``tool_specs()`` / ``tool_specs_by_name()``. ``failure`` holds
    the reason once no server could go on; ``report()`` then raises ``RemoteError``.
    """

    name: str
    servers: Servers
    task: str = ""
    seed: int | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    done: bool = False
    _client: Any = None
    _url: str | None = None
    _replayed: Replayed | None = None

    @property
    def tasks(self) -> tuple[str, ...]:
        return env_class(self.name).tasks

    def tool_specs_by_name(self) -> dict[str, ToolSpec]:
        return env_class(self.name).tool_specs_by_name()

    def tool_specs(self) -> list[ToolSpec]:
        return env_class(self.name).tool_specs()

    @property
    def config(self) -> Any:
        return self._final().config

    @property
    def trace(self) -> list[StepRecord]:
        return []  # the rewards read an interactive episode's calls from its report

    def reset(self, seed: int | None = None, task: str | None = None, **_: Any) -> ToolObservation:
        self.task, self.seed = task or (self.tasks[0] if self.tasks else ""), seed
        self.calls, self.failure, self.done, self._replayed = [], None, False, None
        return self._play(None)

    def step(self, action: ToolCallAction | dict[str, Any]) -> ToolObservation:
        call = _calls([action])[0]
        self._replayed = None
        if self.done:  # what the in-process environment answers, without a round trip
            return ToolObservation(error="the episode is over; call reset()", done=True, reward=0.0)
        return self._play(call)

    def _play(self, call: dict[str, Any] | None) -> ToolObservation:
        """Run ``call`` (None: the reset) on the current server, else rebuild the episode on the
        next ones; after the retries the episode is marked failed and an error observation says
        so (the model sees it as a failed tool call; the rewards score the row 0)."""
        failures = []
        for attempt in range(self.servers.retries):
            self.servers.pause(attempt)
            try:
                if self._client is None or attempt:
                    opening = self._open()
                    if call is None:
                        return self._seen(opening)
                elif call is None:
                    return self._seen(self._reset_on(self._client))
                result = self._client.step(ToolCallAction(**call))
                self.calls.append(call)
                return self._seen(result.observation)
            except Exception as exc:  # any transport or server failure: next server
                failures.append(f"{self._url}: {type(exc).__name__}: {exc}"[:300])
                logger.warning("episode on %s failed (%s); trying another server", self._url, exc)
                self._drop()
        self.failure = "environment servers unavailable: " + "; ".join(failures)
        self.done = True
        return ToolObservation(error=self.failure, done=True, reward=0.0)

    def _seen(self, obs: ToolObservation) -> ToolObservation:
        self.done = bool(obs.done)
        return obs

    def _open(self) -> ToolObservation:
        """A session on the next server, with the episode so far replayed in it."""
        from env.client import ToolEnvClient

        self._drop()
        self._url = self.servers.order(self.name)[0]
        client = ToolEnvClient(base_url=self._url).sync()
        client.connect()
        self._client = client
        opening = self._reset_on(client)
        for past in self.calls:
            client.step(ToolCallAction(**past))
        return opening

    def _reset_on(self, client: Any) -> ToolObservation:
        return client.reset(task=self.task, seed=self.seed).observation

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # the server may already be gone
                logger.debug("closing a session failed", exc_info=True)

    def _final(self) -> Replayed:
        if self.failure:
            raise RemoteError(self.failure)
        if self._replayed is None:
            self._replayed = ReplayClient(self.servers).replay(
                self.name, self.task, int(self.seed or 0), self.calls
            )
        return self._replayed

    def report(self) -> EpisodeReport:
        """The episode's report: its calls replayed by a server (``RemoteError`` if none can)."""
        return self._final().report

    def close(self) -> None:
        self._drop()
