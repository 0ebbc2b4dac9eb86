"""Environments: seeded tool-use worlds on one shared contract (``env.base``)."""

from env.base import Grade, ToolCallAction, ToolEnvironment, ToolObservation, tool
from env.registry import env_class, make, names, policies, register

__all__ = [
    "Grade",
    "ToolCallAction",
    "ToolEnvironment",
    "ToolObservation",
    "env_class",
    "make",
    "names",
    "policies",
    "register",
    "tool",
]
