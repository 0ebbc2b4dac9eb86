"""The AML alert investigation environment (issue 2): see ``environment.py`` for the episode."""

from env.aml.config import AMLConfig
from env.aml.environment import AMLEnvironment

__all__ = ["AMLConfig", "AMLEnvironment"]
