"""The contract every environment shares.

An episode is a conversation of tool calls. ``reset(seed, task)`` builds a hidden world from a
per-instance ``random.Random(seed)`` and returns the opening observation; each ``step`` carries one
``ToolCallAction`` (a tool name and its arguments) and returns a ``ToolObservation`` with the tool's
result, a per-step reward and ``done``. A terminal tool (a decision) or the step limit ends the
episode with a ``Grade`` in [0, 1] and its named components.

Tools are ordinary typed methods marked with ``@tool``; their signatures and Google-style docstrings
are read once per class into ``ToolSpec`` objects (``env/tool_spec.py``), and those specs are the
single source for the system prompt, the JSON schemas, the OpenEnv action model, MCP and TRL tools.

Agent input never raises: an unknown tool, a missing, extra or mistyped argument, an oversized
payload, an unknown id (a tool raises ``ToolError``) all come back as an observation with ``error``
set and a small penalty. Programmer errors inside a tool are logged, counted in
``internal_errors`` (the conformance test asserts it stays 0) and also answered with an observation.
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from dataclasses import dataclass
from typing import Any, ClassVar

from openenv.core import Action, Environment, Observation, State
from pydantic import BaseModel, ConfigDict, Field

from env.tool_spec import ToolError, ToolSpec, spec_from_method
from env.tool_spec import tool as tool  # environments import the decorator from here

logger = logging.getLogger(__name__)
_ARGUMENTS_ENCODER = json.JSONEncoder(sort_keys=True, default=str)
"""``json.dumps(arguments, sort_keys=True, default=str)`` without building an encoder per call."""


class ToolCallAction(Action):
    """One tool call: the only kind of action an agent sends."""

    tool: str = Field(description="Name of the tool to call")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments")


class Grade(BaseModel):
    """The terminal grade of an episode: a total in [0, 1] and the parts it is made of."""

    model_config = ConfigDict(extra="forbid")

    total: float = Field(ge=0.0, le=1.0, description="Weighted total in [0, 1]")
    components: dict[str, float] = Field(default_factory=dict, description="Named parts in [0, 1]")
    decision: str | None = Field(default=None, description="The decision taken; None if none")


class ToolObservation(Observation):
    """What the agent sees after reset or a tool call. Never carries hidden truth."""

    tool: str | None = Field(default=None, description="Tool that produced this result")
    result: Any = Field(default=None, description="JSON-able tool result")
    message: str = Field(default="", description="Short human-readable summary")
    error: str | None = Field(default=None, description="Why the call failed, if it did")
    tools: list[str] = Field(default_factory=list, description="Tools available now")
    step: int = Field(default=0, ge=0, description="Steps taken so far")
    steps_left: int = Field(default=0, ge=0, description="Steps left before the limit")
    grade: Grade | None = Field(default=None, description="Terminal grade, once done")


class EpisodeState(State):
    """Public episode state (OpenEnv ``/state``): bookkeeping only, no hidden truth."""

    env: str = ""
    task: str = ""
    seed: int | None = None
    done: bool = False
    total_reward: float = 0.0
    decision: str | None = None


class EnvConfig(BaseModel):
    """Tunable numbers shared by every environment; subclasses add their own fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int = Field(default=30, ge=1, description="Step limit; reaching it ends the episode")
    action_cost: float = Field(default=-0.02, description="Every call costs a little: be efficient")
    error_penalty: float = Field(
        default=-0.05, description="Invalid calls cost more than valid ones"
    )
    repeat_penalty: float = Field(default=-0.03, description="Same tool and arguments again")
    max_argument_chars: int = Field(default=4000, ge=16, description="Larger payloads are refused")


@dataclass
class StepRecord:
    """One step of the episode trace, kept for reward functions and evaluation."""

    tool: str
    arguments: dict[str, Any]
    reward: float
    error: str | None
    done: bool


class EpisodeReport(BaseModel):
    """Everything measured about a finished (or abandoned) episode, for rewards and evaluation."""

    env: str
    task: str
    seed: int | None
    grade: Grade
    decision_reached: bool
    steps: int
    step_rewards: list[float]
    n_errors: int
    n_repeats: int
    metrics: dict[str, float] = Field(
        default_factory=dict,
        description="Environment-specific effect measurements in [0, 1] (e.g. evidence coverage)",
    )


class ToolEnvironment(Environment[ToolCallAction, ToolObservation, EpisodeState]):
    """Base class of every environment: tool dispatch, validation, penalties, step limit, grade.

    Subclasses set ``name``, ``tasks``, ``config_class`` and ``instructions``, mark tools with
    ``@tool`` and implement ``_build``, ``_opening``, ``_grade``, ``reveal`` and optionally
    ``_metrics`` and the ``_before_call`` / ``_after_call`` hooks.
    """

    SUPPORTS_CONCURRENT_SESSIONS: ClassVar[bool] = True
    name: ClassVar[str] = ""
    tasks: ClassVar[tuple[str, ...]] = ()
    config_class: ClassVar[type[EnvConfig]] = EnvConfig
    instructions: ClassVar[str] = ""
    decision_kinds: ClassVar[tuple[str, ...]] = ()
    """Tool kinds whose calls commit the case's outcome before the terminal call (a refund, a
    flag): steps mode's ``decision`` cut falls before the first of them or the terminal call."""
    _spec_cache: ClassVar[dict[type, dict[str, ToolSpec]]] = {}

    def __init__(self, config: EnvConfig | dict[str, Any] | None = None, **overrides: Any):
        super().__init__()
        if isinstance(config, dict) or config is None:
            config = self.config_class(**{**(config or {}), **overrides})
        elif overrides:
            config = config.model_copy(update=overrides)
        if not isinstance(config, self.config_class):
            raise TypeError(f"{type(self).__name__} needs a {self.config_class.__name__}")
        self.config = config
        self._specs = self.tool_specs_by_name()
        self._seed_source = random.Random(0)
        self.internal_errors = 0
        self._started = False
        self._init_episode(task=self.tasks[0] if self.tasks else "", seed=None)

    # ----- tool specs ---------------------------------------------------------------------------

    @classmethod
    def tool_specs_by_name(cls) -> dict[str, ToolSpec]:
        """Specs of every ``@tool`` method, in definition order, computed once per class."""
        if cls not in ToolEnvironment._spec_cache:
            specs = {}
            for klass in reversed(cls.__mro__):
                for attr, value in vars(klass).items():
                    if callable(value) and hasattr(value, "__tool__"):
                        specs[attr] = spec_from_method(attr, value)
            ToolEnvironment._spec_cache[cls] = specs
        return ToolEnvironment._spec_cache[cls]

    @classmethod
    def tool_specs(cls) -> list[ToolSpec]:
        return list(cls.tool_specs_by_name().values())

    # ----- episode lifecycle --------------------------------------------------------------------

    def _init_episode(self, task: str, seed: int | None, episode_id: str | None = None) -> None:
        self.task = task
        self.seed = seed
        self.episode_id = episode_id or str(uuid.UUID(int=self._seed_source.getrandbits(128)))
        self.step_count = 0
        self.done = False
        self.decision: str | None = None
        self.final_grade: Grade | None = None
        self.trace: list[StepRecord] = []
        self._seen_calls: set[str] = set()
        self._pending_reward = 0.0
        self._n_errors = 0
        self._n_repeats = 0

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task: str | None = None,
        **kwargs: Any,
    ) -> ToolObservation:
        """Start the episode (task, seed); the same pair always builds the same world."""
        task = task or (self.tasks[0] if self.tasks else "")
        if self.tasks and task not in self.tasks:
            raise ValueError(f"unknown task {task!r} for env {self.name}; choose from {self.tasks}")
        if seed is None:
            seed = self._seed_source.randrange(2**31)
        seed = int(seed)
        self._init_episode(task, seed, episode_id)
        self._started = True
        self._build(task, random.Random(f"{self.name}:{task}:{seed}"))
        result, message = self._opening()
        return self._observe(None, result, message, None, reward=0.0)

    def step(
        self, action: ToolCallAction | dict[str, Any], timeout_s: float | None = None, **kwargs: Any
    ) -> ToolObservation:
        """Execute one tool call. Never raises on agent input."""
        if not self._started:
            return self._observe(None, None, "", "call reset() before step()", reward=0.0)
        if self.done:
            return self._observe(None, None, "", "the episode is over; call reset()", reward=0.0)
        name, arguments, error = self._coerce(action)
        self.step_count += 1
        self._pending_reward = self.config.action_cost
        result, message = None, ""
        if error is None:
            try:
                result, message = self._dispatch(name, arguments)
            except ToolError as exc:
                error = str(exc)
            except Exception as exc:  # a bug in a tool, not the agent's fault
                self.internal_errors += 1
                logger.exception("internal error in %s.%s", self.name, name)
                error = f"internal error in tool {name}: {type(exc).__name__}"
        if error is not None:
            self._n_errors += 1
            self._pending_reward += self.config.error_penalty
        if not self.done and self.step_count >= self.config.max_steps:
            self._finish(None)
            message = (message + " " if message else "") + "Step limit reached: no decision."
        reward = round(self._pending_reward, 6)
        self.trace.append(StepRecord(name, arguments, reward, error, self.done))
        return self._observe(name, result, message, error, reward=reward)

    def _coerce(self, action: Any) -> tuple[str, dict[str, Any], str | None]:
        if isinstance(action, ToolCallAction):
            return action.tool, action.arguments, None
        if isinstance(action, dict):
            name = action.get("tool", action.get("name"))
            args = action.get("arguments", {})
            if isinstance(name, str) and isinstance(args, dict):
                return name, args, None
        return "", {}, "an action needs a 'tool' name (string) and 'arguments' (object)"

    def _dispatch(self, name: str, arguments: dict[str, Any]) -> tuple[Any, str]:
        spec = self._specs.get(name)
        if spec is None:
            raise ToolError(f"unknown tool {name!r}; available: {', '.join(self._specs)}")
        try:  # encoded once: both the size limit and the repeat key
            encoded = _ARGUMENTS_ENCODER.encode(arguments)
        except (TypeError, ValueError):
            raise ToolError("arguments must be a JSON object with string keys") from None
        size = len(encoded)
        if size > self.config.max_argument_chars:
            raise ToolError(
                f"arguments too large ({size} chars; limit {self.config.max_argument_chars})"
            )
        kwargs = spec.validate(arguments)
        key = name + encoded
        if key in self._seen_calls:
            self._n_repeats += 1
            self._pending_reward += self.config.repeat_penalty
        self._seen_calls.add(key)
        self._before_call(spec, kwargs)
        out = getattr(self, name)(**kwargs)
        result, message = out if isinstance(out, tuple) else (out, "")
        self._after_call(spec, kwargs, result)
        return result, message

    def _finish(self, decision: str | None) -> None:
        """End the episode; ``decision`` None means no decision was reached."""
        self.done = True
        self.decision = decision
        grade = self._grade()
        if decision is None:
            grade = grade.model_copy(update={"decision": None})
        self.final_grade = grade

    def add_reward(self, amount: float) -> None:
        """Add to this step's reward (tools and hooks call it for env-specific shaping)."""
        self._pending_reward += amount

    def _observe(
        self, tool_name: str | None, result: Any, message: str, error: str | None, reward: float
    ) -> ToolObservation:
        return ToolObservation(
            tool=tool_name,
            result=result,
            message=message if error is None else (message or f"error: {error}"),
            error=error,
            tools=self._tools_now() if not self.done else [],
            step=self.step_count,
            steps_left=max(0, self.config.max_steps - self.step_count),
            grade=self.final_grade if self.done else None,
            done=self.done,
            reward=reward,
        )

    def _tools_now(self) -> list[str]:
        """The tools an observation lists while the episode runs; a subclass narrows them here
        (building the observation once: a later assignment re-validates it)."""
        return list(self._specs)

    @property
    def state(self) -> EpisodeState:
        return EpisodeState(
            episode_id=self.episode_id,
            step_count=self.step_count,
            env=self.name,
            task=self.task,
            seed=self.seed,
            done=self.done,
            total_reward=round(sum(r.reward for r in self.trace), 6),
            decision=self.decision if self.done else None,
        )

    def report(self) -> EpisodeReport:
        """Measurements of the episode so far; an unfinished episode is graded as undecided."""
        grade = self.final_grade
        if grade is None:
            grade = self._grade().model_copy(update={"decision": None})
        return EpisodeReport(
            env=self.name,
            task=self.task,
            seed=self.seed,
            grade=grade,
            decision_reached=self.done and self.decision is not None,
            steps=self.step_count,
            step_rewards=[r.reward for r in self.trace],
            n_errors=self._n_errors,
            n_repeats=self._n_repeats,
            metrics=self._metrics(),
        )

    # ----- what a subclass provides -------------------------------------------------------------

    def _build(self, task: str, rng: random.Random) -> None:
        """Generate the hidden world for this task from ``rng`` alone."""
        raise NotImplementedError

    def _opening(self) -> tuple[Any, str]:
        """The reset observation's result and message (no hidden truth)."""
        raise NotImplementedError

    def _grade(self) -> Grade:
        """Grade the episode; called once at the end with ``self.decision`` set (or None)."""
        raise NotImplementedError

    def reveal(self) -> dict[str, Any]:
        """The hidden truth, for analysis after the episode. Never served to a remote agent."""
        raise NotImplementedError

    def _metrics(self) -> dict[str, float]:
        """Effect measurements in [0, 1] for reward functions (e.g. evidence coverage)."""
        return {}

    def _before_call(self, spec: ToolSpec, kwargs: dict[str, Any]) -> None:
        """Hook before a valid tool call runs (e.g. page faults on evicted ids)."""

    def _after_call(self, spec: ToolSpec, kwargs: dict[str, Any], result: Any) -> None:
        """Hook after a valid tool call ran (e.g. working-memory updates)."""
