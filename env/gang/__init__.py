"""Fake-gang detection on a follower graph (issue 7): see README.md."""

from env.gang.environment import GangEnvironment

__all__ = ["GangEnvironment"]
