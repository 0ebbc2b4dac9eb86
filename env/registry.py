"""Find environments and their policies by name, gymnasium-style (``make("aml")``).

Entries are import strings so that importing the registry stays cheap and a new environment is
one line here; the generic conformance tests pick it up at once.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from env.base import ToolEnvironment

_ENVIRONMENTS: dict[str, str] = {
    "aml": "env.aml.environment:AMLEnvironment",
    "fraud": "env.fraud.environment:FraudEnvironment",
    "gang": "env.gang.environment:GangEnvironment",
    "support": "env.support.environment:SupportEnvironment",
    "ops": "env.ops.environment:OpsEnvironment",
}
_POLICIES: dict[str, str] = {name: f"env.{name}.policies:POLICIES" for name in _ENVIRONMENTS}


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def register(name: str, env_target: str, policies_target: str) -> None:
    """Register an environment class and its policy table by import string."""
    _ENVIRONMENTS[name] = env_target
    _POLICIES[name] = policies_target


def names() -> list[str]:
    """Names of every registered environment."""
    return sorted(_ENVIRONMENTS)


def env_class(name: str) -> type[ToolEnvironment]:
    if name not in _ENVIRONMENTS:
        raise KeyError(f"unknown environment {name!r}; registered: {', '.join(names())}")
    return _load(_ENVIRONMENTS[name])


def make(name: str, **config: Any) -> ToolEnvironment:
    """A fresh environment instance; keyword arguments override its config."""
    return env_class(name)(**config)


def references(name: str) -> dict[str, Callable[..., Any]]:
    """Steps-mode reference policies of an environment (``REFERENCES`` beside ``POLICIES``):
    ``reference`` (whose call choices must not reveal the verdict), ``blind_decision`` (the
    same with a coin-flip decision) and ``blind_decision_flipped`` (the other side of that coin).
    An environment without its own table uses its heuristic."""
    module, _, _ = _POLICIES[name].partition(":") if name in _POLICIES else ("", "", "")
    env_class(name)
    table = dict(getattr(import_module(module), "REFERENCES", {}))
    table.setdefault("reference", policies(name)["heuristic"])
    return table


def policies(name: str) -> dict[str, Callable[..., Any]]:
    """Policy factories of an environment: ``{"heuristic": factory, ...}``; factory(seed) -> Policy."""
    env_class(name)
    return _load(_POLICIES[name])
