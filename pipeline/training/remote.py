"""Training against environment servers: ``env.urls`` wired into the rewards and the adapters.

``use_env_servers(cfg)`` points the plan/steps replay cache (``rewards.replay.CACHE``) and the
interactive ``environment_factory`` at the servers of ``cfg.env`` (env/remote.py); with no URLs it
leaves both in-process, as they are by default. ``train_grpo.py`` calls it once the config is
validated, so every process of a distributed run holds its own connections.
"""

from __future__ import annotations

import logging
from typing import Any

from env.remote import ReplayClient, Servers
from pipeline.training import interactive
from rewards.replay import CACHE

logger = logging.getLogger(__name__)


def use_env_servers(cfg: Any) -> Servers | None:
    """Replay and play on ``cfg.env.urls`` (None and in-process when there are none)."""
    urls = cfg.env.urls
    if not urls:
        interactive.SERVERS = None
        CACHE.use_servers(None)
        return None
    servers = Servers(urls, retries=cfg.env.retries, timeout_s=cfg.env.timeout_s)
    interactive.SERVERS = servers
    CACHE.use_servers(ReplayClient(servers))
    logger.info("environments on servers: %s", urls)
    return servers
