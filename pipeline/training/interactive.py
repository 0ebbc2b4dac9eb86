"""Interactive mode: any registered environment as a TRL ``environment_factory`` class.

In plan mode the model writes its whole investigation blind and the rewards replay it. In
interactive mode TRL's GRPOTrainer plays the episode with the model turn by turn: for each rollout it
takes one adapter instance from its pool, calls ``reset(**row)`` (the row's env/task/seed rebuild
the seeded episode; ``pipeline.data.prompts.render_observation`` of the opening is appended to the
user message, whose interactive header ends in a blank line), renders the adapter's
public methods as tools in the chat template, executes every tool call the model emits against the
environment and feeds the result back as a ``tool`` message (those tokens are masked out of the
loss), and finally scores the rollout with ``get_reward()`` (the episode grade; 0 without a
decision) and with the reward functions, which read ``adapter.env.report()`` through the
``environments`` keyword argument.

The tool methods are generated from the environment's ``ToolSpec`` objects, never written by hand:
each has the tool's name, a keyword-only signature with the original type hints and a Google-style
docstring made from the spec, so ``transformers.utils.get_json_schema`` (what TRL uses) yields the
same names, types, enums, descriptions and required arguments as ``ToolSpec.parameters``. A call
goes through ``ToolEnvironment.step`` so validation, penalties, repeats and the step limit are the
environment's own; bad arguments come back to the model as an error message, never an exception.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, get_type_hints

from env.base import ToolCallAction, ToolEnvironment, ToolObservation, ToolSpec
from env.registry import env_class
from env.remote import RemoteEpisode, RemoteError, Servers
from pipeline.data.prompts import render_observation

logger = logging.getLogger(__name__)

# TRL treats every public bound method of the adapter as a tool, except these two.
RESERVED_NAMES = frozenset({"reset", "get_reward", "env"})


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text or "").strip()


def _tool_docstring(spec: ToolSpec) -> str:
    """A Google-style docstring that transformers' parser reads back into the spec's texts."""
    lines = [_one_line(spec.description) or spec.name]
    props = spec.parameters.get("properties", {})
    if props:
        lines += ["", "Args:"]
        for arg, schema in props.items():
            lines.append(f"    {arg}: {_one_line(schema.get('description', '')) or arg}")
    return "\n".join(lines)


def _tool_signature(env_cls: type[ToolEnvironment], spec: ToolSpec) -> inspect.Signature:
    """Keyword-only parameters with the tool method's own type hints and defaults."""
    method = getattr(env_cls, spec.name)
    hints = get_type_hints(method)
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for name, param in inspect.signature(method).parameters.items():
        if name == "self":
            continue
        params.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=param.default, annotation=hints[name]
            )
        )
    return inspect.Signature(params)


def _make_tool_method(env_cls: type[ToolEnvironment], spec: ToolSpec) -> Callable[..., str]:
    """A method named after the tool whose call becomes one ``env.step``."""

    def call(self: EnvironmentAdapter, **arguments: Any) -> str:
        return self._call(spec.name, arguments)

    signature = _tool_signature(env_cls, spec)
    call.__name__ = call.__qualname__ = spec.name
    call.__doc__ = _tool_docstring(spec)
    call.__signature__ = signature  # type: ignore[attr-defined]
    call.__annotations__ = {
        name: p.annotation for name, p in signature.parameters.items() if name != "self"
    }
    return call


class EnvironmentAdapter:
    """Base of the generated adapters: one environment episode per TRL rollout.

    Only ``reset``, ``get_reward`` and the generated tool methods are public (TRL exposes every
    other public method as a tool). ``env`` is the live ``ToolEnvironment``; reward functions read
    ``env.report()`` from it once the rollout ends.
    """

    _env_class: type[ToolEnvironment]

    def __init__(
        self, config: Mapping[str, Any] | None = None, servers: Servers | None = None
    ) -> None:
        if servers is not None and config:
            raise ValueError("a served environment takes its config from its server, not here")
        self.env: ToolEnvironment | RemoteEpisode = (
            self._env_class(dict(config or {}))
            if servers is None
            else RemoteEpisode(self._env_class.name, servers)
        )
        self._opening: ToolObservation | None = None

    def reset(self, **row: Any) -> str:
        """Rebuild the row's episode (env/task/seed) and return the opening observation text."""
        name = row.get("env", self.env.name)
        if name != self.env.name:
            raise ValueError(
                f"row for env {name!r} reached the {self.env.name!r} adapter; with several "
                "environments pass the dict factory and an 'environment' column"
            )
        if row.get("seed") is None:
            raise ValueError("interactive rows need a 'seed' column to rebuild the episode")
        self._opening = self.env.reset(seed=int(row["seed"]), task=row.get("task") or None)
        return render_observation(self._opening)

    def get_reward(self) -> float:
        """The episode grade; 0 when the rollout ended without a decision (or, on environment
        servers, when no server could replay it: the reason is logged)."""
        try:
            report = self.env.report()
        except RemoteError as exc:
            logger.error("interactive episode of %s not scored: %s", self.env.name, exc)
            return 0.0
        return float(report.grade.total) if report.decision_reached else 0.0

    def _call(self, tool_name: str, arguments: dict[str, Any]) -> str:
        obs = self.env.step(ToolCallAction(tool=tool_name, arguments=dict(arguments)))
        return render_observation(obs)


_ADAPTERS: dict[tuple[type[ToolEnvironment], bool], type[EnvironmentAdapter]] = {}


def adapter_class(env_cls: type[ToolEnvironment], with_reward: bool = True) -> type:
    """The adapter class of an environment class, generated once from its tool specs.

    ``with_reward=False`` leaves out ``get_reward`` so TRL adds no extra reward column (use it when
    the reward functions already score the episode grade, so no signal counts twice).
    """
    key = (env_cls, with_reward)
    if key in _ADAPTERS:
        return _ADAPTERS[key]
    namespace: dict[str, Any] = {
        "__doc__": f"TRL tools of the {env_cls.name!r} environment (generated from its specs).",
        "__module__": __name__,
        "_env_class": env_cls,
    }
    for spec in env_cls.tool_specs():
        if spec.name in RESERVED_NAMES or spec.name.startswith("_"):
            raise TypeError(f"tool name {spec.name!r} of {env_cls.__name__} clashes with TRL")
        namespace[spec.name] = _make_tool_method(env_cls, spec)
    if not with_reward:
        namespace["get_reward"] = None  # TRL looks for a bound method; None hides the base one
    cls = type(f"{env_cls.__name__}Tools", (EnvironmentAdapter,), namespace)
    _ADAPTERS[key] = cls
    return cls


SERVERS: Servers | None = None
"""Environment servers (``env.urls``; set by ``pipeline.training.remote.use_env_servers``): when set, the
adapters play their episodes there instead of in-process."""


def environment_factory(
    env_names: Sequence[str] | str,
    env_configs: Mapping[str, Mapping[str, Any]] | None = None,
    with_reward: bool = True,
    servers: Servers | None = None,
) -> Callable[[], EnvironmentAdapter] | dict[str, Callable[[], EnvironmentAdapter]]:
    """What ``GRPOTrainer(environment_factory=...)`` takes for the named environments.

    One name gives a zero-argument callable. Several give TRL's multi-environment dict
    ``{name: callable}``; then every dataset row needs an ``environment`` column naming its env
    (see ``add_environment_column``) and each prompt shows only its own env's tools.
    ``env_configs`` maps an env name to config overrides (e.g. ``{"aml": {"max_steps": 12}}``).
    ``servers`` (default ``SERVERS``) plays every episode on environment servers over OpenEnv's
    WebSocket client (``env.remote.RemoteEpisode``), replayed elsewhere if a server fails.
    """
    servers = servers if servers is not None else SERVERS
    names = [env_names] if isinstance(env_names, str) else list(env_names)
    if not names:
        raise ValueError("environment_factory needs at least one environment name")
    configs = env_configs or {}
    factories = {}
    for name in dict.fromkeys(names):
        cls = adapter_class(env_class(name), with_reward=with_reward)
        if servers is None:
            factories[name] = partial(cls, dict(configs.get(name, {})))
        else:
            factories[name] = partial(cls, dict(configs.get(name, {})), servers)
    return factories[names[0]] if len(factories) == 1 else factories


def add_environment_column(dataset: Any) -> Any:
    """Copy each row's ``env`` into the ``environment`` column TRL's dict factory routes on."""
    if "environment" in dataset.column_names:
        return dataset
    return dataset.add_column("environment", list(dataset["env"]))


def _trl_order(specs: Sequence[ToolSpec]) -> list[ToolSpec]:
    """The specs in the order TRL lists the adapter's tools: ``inspect.getmembers``, by name.

    Evaluation prompts and the interactive warm start render the same list, so a model meets the
    tools in one order everywhere."""
    return sorted(specs, key=lambda spec: spec.name)


def tool_methods(adapter: EnvironmentAdapter) -> list[Callable[..., str]]:
    """The bound methods TRL will expose as tools, in TRL's order."""
    return [getattr(adapter, spec.name) for spec in _trl_order(adapter.env.tool_specs())]


def tool_schemas(env_name: str) -> list[dict[str, Any]]:
    """The tool schemas TRL renders in an interactive prompt: ``get_json_schema`` of the env's
    adapter methods, in TRL's order."""
    from transformers.utils import get_json_schema

    cls = adapter_class(env_class(env_name))
    specs = _trl_order(env_class(env_name).tool_specs())
    return [get_json_schema(getattr(cls, spec.name)) for spec in specs]
