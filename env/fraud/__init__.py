"""Fraud defender-vs-fraudster environment (registered as ``fraud``)."""

from env.fraud.config import FraudConfig
from env.fraud.environment import FraudEnvironment

__all__ = ["FraudConfig", "FraudEnvironment"]
