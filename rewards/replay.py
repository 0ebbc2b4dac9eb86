"""One replay per completion, shared by every reward component.

A plan-mode completion is scored by rebuilding its episode from the row's ``env``, ``task`` and
``seed`` and replaying the parsed calls in-process (``env.rollout.replay``). TRL calls each reward
function separately on the same batch, so the first component to see a completion replays it and
stores the ``Outcome`` in a small bounded LRU cache keyed by (env, task, seed, completion); the
other components read it from there. No completion is ever replayed twice, and no component can
count another's signal by accident because they all read one report.

In steps mode a row also carries ``prefix``: the calls of a reference trajectory up to the row's
cut point, which the prompt shows with their results. The replay runs the prefix, then the
completion's calls, and grades the whole episode; the outcome keeps how many steps the prefix took
and the evidence it had already revealed, so the components that judge the reply's own calls
(format, execution, investigation) never credit it with the prefix's work. An empty prefix is plan
mode exactly.

In interactive mode TRL has already run the episode; the outcome then comes from the finished
environment the adapter exposes as ``.env``.
"""

from __future__ import annotations

import json
import logging
import operator
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from env.base import EpisodeReport, ToolEnvironment, ToolError, ToolSpec
from env.registry import env_class, make
from env.remote import RemoteError, ReplayClient, Replayed, RowError
from env.rollout import replay
from rewards.parsing import ParseResult, parse_tool_calls

logger = logging.getLogger(__name__)

# Quality of one parsed call, for the format reward: readable but unknown < known with bad
# arguments < valid. Calls past the end of the episode are wasted and score like unknown ones.
QUALITY_UNKNOWN = 0.25
QUALITY_INVALID = 0.6
QUALITY_VALID = 1.0


@dataclass(frozen=True)
class Outcome:
    """Everything the reward components need about one completion."""

    parse: ParseResult
    report: EpisodeReport | None
    call_quality: tuple[float, ...]
    terminal_last: bool
    n_terminal: int
    problem: str | None = None
    prefix_steps: int = 0
    """Steps the row's prefix took before the completion's first call (steps mode)."""
    prefix_coverage: float = 0.0
    """``evidence_coverage`` already revealed by the prefix (steps mode)."""

    @property
    def reply_step_rewards(self) -> list[float]:
        """Per-step rewards of the completion's own calls (the prefix's are not the reply's)."""
        return list(self.report.step_rewards[self.prefix_steps :]) if self.report else []

    @property
    def broken(self) -> bool:
        """The row itself (not the model) made scoring impossible."""
        return self.report is None


class ReplayCache:
    """A bounded LRU of outcomes and one reusable environment instance per env name."""

    def __init__(self, maxsize: int = 8192):
        self.maxsize = maxsize
        self._items: OrderedDict[tuple, Outcome] = OrderedDict()
        self._envs: dict[str, ToolEnvironment] = {}
        self._lock = threading.Lock()
        self.replays = 0
        self.remote: ReplayClient | None = None
        """Set (``use_servers``) to replay on environment servers instead of in-process."""

    def use_servers(self, client: ReplayClient | None) -> None:
        """Replay on environment servers from now on (``None``: in-process again)."""
        with self._lock:
            self.remote = client
            self._items.clear()

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.replays = 0

    def outcome(
        self, env_name: Any, task: Any, seed: Any, completion: Any, prefix: Any = None
    ) -> Outcome:
        """The (cached) outcome of a completion for the episode (env, task, seed), played after
        ``prefix`` (steps mode: a list of ``{"tool", "arguments"}`` calls or its JSON text)."""
        key = (
            str(env_name),
            str(task),
            str(seed),
            _completion_key(prefix or ""),
            _completion_key(completion),
        )
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
            result = self._compute(env_name, task, seed, completion, prefix)
            self._items[key] = result
            if len(self._items) > self.maxsize:
                self._items.popitem(last=False)
            return result

    def _compute(
        self, env_name: Any, task: Any, seed: Any, completion: Any, prefix: Any = None
    ) -> Outcome:
        parse = parse_tool_calls(completion)
        try:
            before = prefix_calls(prefix)
            if not isinstance(env_name, str):
                raise ValueError(f"env must be a string, got {env_name!r}")
            env = self._envs.get(env_name)
            if env is None:
                env = self._envs[env_name] = make(env_name)
            seed = _as_seed(seed)
            if env.tasks and task not in env.tasks:
                raise ValueError(f"unknown task {task!r} for env {env_name}")
        except (KeyError, ValueError, ImportError, TypeError) as exc:
            problem = str(exc.args[0]) if exc.args else type(exc).__name__
            return Outcome(parse, None, (), False, 0, problem)
        if self.remote is not None:
            return self._remote(env_name, task, seed, parse, before)
        try:
            if not before:
                report = replay(env, task, seed, parse.calls)
                self.replays += 1
                return _outcome(env, parse, report, replayed=True)
            prefix_report = replay(env, task, seed, before)
            if env.done:
                raise ValueError("the prefix already ends the episode: a cut must precede the end")
            for call in parse.calls:
                if env.done:
                    break
                env.step(call)
            self.replays += 1
            coverage = float(prefix_report.metrics.get("evidence_coverage", 0.0))
            return _outcome(env, parse, env.report(), True, prefix_report.steps, coverage)
        except Exception as exc:  # an environment bug must not stop training: score it 0
            logger.exception("replay of %s/%s/%s failed", env_name, task, seed)
            return Outcome(parse, None, (), False, 0, f"replay failed: {type(exc).__name__}")

    def _remote(
        self, env_name: str, task: Any, seed: int, parse: ParseResult, before: list[dict[str, Any]]
    ) -> Outcome:
        """The same outcome, from a replay on an environment server (``env.remote``)."""
        try:
            done = self.remote.replay(env_name, task, seed, parse.calls, before)
        except RowError as exc:  # what the in-process replay would have raised
            logger.warning("replay of %s/%s/%s failed: %s", env_name, task, seed, exc)
            return Outcome(parse, None, (), False, 0, f"replay failed: {exc.kind}")
        except RemoteError as exc:  # no server could answer after the retries: score 0, go on
            logger.error("replay of %s/%s/%s not scored: %s", env_name, task, seed, exc)
            return Outcome(parse, None, (), False, 0, f"remote replay failed: {exc}"[:300])
        self.replays += 1
        return _outcome(
            done, parse, done.report, True, done.prefix_steps, done.prefix_coverage, env_name
        )


def _outcome(
    env: ToolEnvironment | Replayed,
    parse: ParseResult,
    report: EpisodeReport,
    replayed: bool = False,
    prefix_steps: int = 0,
    prefix_coverage: float = 0.0,
    env_name: str | None = None,
) -> Outcome:
    """Judge each call; after a replay the env's trace already says which calls ran cleanly."""
    specs = env_class(env_name).tool_specs_by_name() if env_name else env.tool_specs_by_name()
    trace = env.trace[prefix_steps:] if replayed else []
    limit = env.config.max_argument_chars
    quality, n_terminal, ended_at = [], 0, None
    for i, call in enumerate(parse.calls):
        spec = specs.get(call["tool"])
        if ended_at is not None or prefix_steps + i >= env.config.max_steps or spec is None:
            quality.append(QUALITY_UNKNOWN)
            continue
        if not (i < len(trace) and trace[i].error is None) and not _schema_valid(
            spec, call["arguments"], limit
        ):
            quality.append(QUALITY_INVALID)
            continue
        quality.append(QUALITY_VALID)
        if spec.terminal:
            n_terminal += 1
            ended_at = i
    terminal_last = ended_at is not None and ended_at == len(parse.calls) - 1
    return Outcome(
        parse,
        report,
        tuple(quality),
        terminal_last,
        n_terminal,
        None,
        prefix_steps,
        prefix_coverage,
    )


def prefix_calls(prefix: Any) -> list[dict[str, Any]]:
    """A steps-mode row's prefix as a list of ``{"tool", "arguments"}`` calls.

    Accepts the dataset's JSON text, a list of such dicts, or nothing (plan mode); anything else
    is a broken row (``ValueError``), scored 0 with its reason rather than replayed wrongly."""
    if prefix is None or prefix == "" or prefix == []:
        return []
    if isinstance(prefix, str):
        try:
            prefix = json.loads(prefix)
        except json.JSONDecodeError as exc:
            raise ValueError(f"prefix is not valid JSON: {exc.msg}") from None
    if not isinstance(prefix, list):
        raise ValueError(f"prefix must be a list of calls, got {type(prefix).__name__}")
    calls = []
    for item in prefix:
        if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
            raise ValueError(f"prefix call without a tool name: {item!r}"[:200])
        arguments = item.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ValueError(f"prefix call arguments must be an object: {item!r}"[:200])
        calls.append({"tool": item["tool"], "arguments": arguments})
    return calls


def _schema_valid(spec: ToolSpec, arguments: dict[str, Any], limit: int) -> bool:
    """Schema-valid and within the size limit (a call can be valid yet fail on an unknown id)."""
    if len(json.dumps(arguments, default=str)) > limit:
        return False
    try:
        spec.validate(arguments)
    except ToolError:
        return False
    return True


def outcome_from_env(env: ToolEnvironment, completion: Any) -> Outcome:
    """The outcome of an episode TRL already ran (interactive mode): no replay needed."""
    parse = parse_tool_calls(completion)
    try:
        return _outcome(env, parse, env.report())
    except Exception as exc:  # e.g. the adapter never reset its environment
        logger.exception("reading the interactive episode of %s failed", env.name)
        return Outcome(parse, None, (), False, 0, f"episode unreadable: {type(exc).__name__}")


def _as_seed(seed: Any) -> int:
    """An integer seed from a dataset value (int, numpy integer, digit string); else an error."""
    if isinstance(seed, str) and seed.strip().lstrip("-").isdigit():
        return int(seed)
    if not isinstance(seed, bool):
        try:
            return operator.index(seed)
        except TypeError:
            pass
    raise ValueError(f"seed must be an integer, got {seed!r}")


def _completion_key(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    try:
        return json.dumps(completion, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(completion)


CACHE = ReplayCache()


def tool_names(env_name: str) -> list[str]:
    """Tool names of an environment (for audits and tests)."""
    return list(env_class(env_name).tool_specs_by_name())
