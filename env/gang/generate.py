"""A reset: the layout of one episode's follower graph, from the episode's ``random.Random``.

The layout is what the opening and every later read depend on and nothing more: the gang (maybe
none), the popular accounts, the honest look-alike clusters (families, offices, startups, fan
clubs), the opening's alerts and sample, and the keys of everything drawn later. The friend order
is drawn on the first read of the graph (``follows.py``), profiles and follows per account when
read (``profiles.py``), all from draws keyed by this ``Random``, so (task, seed) still fixes the
whole world.
"""

from __future__ import annotations

import random

import numpy as np

from env.gang.config import GangConfig, TaskSettings
from env.gang.draws import Draws, reseed
from env.gang.world import Labels, World

LOOKALIKE_SIZES = {"family": (3, 6), "office": (6, 12), "fanclub": (5, 10), "startup": (6, 10)}


def build_world(
    task_name: str, rng: random.Random, config: GangConfig, bits: np.random.PCG64 | None = None
) -> World:
    """Build one episode's world for the task ``task_name`` from ``rng`` alone.

    ``bits``: the caller's numpy bit generator, reseeded from ``rng`` here and again when the
    friend order is drawn (``draws.reseed``); None makes one."""
    task: TaskSettings = config.tasks[task_name]
    n = task.accounts
    draws = Draws(rng.getrandbits(64))
    labels = Labels(rng.getrandbits(24), rng.getrandbits(24))
    bits = np.random.PCG64(0) if bits is None else bits
    g = reseed(bits, (rng.getrandbits(128), rng.getrandbits(128)))
    layout_seed = (rng.getrandbits(128), rng.getrandbits(128))
    n_nat, n_vpn, n_proxy = max(2, n // 12), max(2, n // 40), rng.randint(2, 3)
    clean = rng.random() < config.clean_share
    size = 0 if clean else rng.randint(task.gang_min, task.gang_max)
    kinds = tuple(LOOKALIKE_SIZES)
    shapes = []
    for c in range(task.lookalikes):
        kind = kinds[(c + rng.randrange(4)) % 4]
        shapes.append((kind, rng.randint(*LOOKALIKE_SIZES[kind])))
    roles = g.permutation(n)
    n_popular = max(3, n // 50)
    gang = sorted(roles[:size].tolist())
    popular = sorted(roles[size : size + n_popular].tolist())
    lookalikes: list[tuple[str, list[int]]] = []
    start = size + n_popular
    for kind, k in shapes:
        chosen = sorted(roles[start : start + k].tolist())
        start += k
        if len(chosen) >= 3:
            lookalikes.append((kind, chosen))
    alerts, sample = opening_accounts(rng, task, clean, gang, lookalikes, n)
    return World(
        n, draws, labels, layout_seed, bits, gang, popular, lookalikes, alerts, sample, n_nat, n_vpn,
        list(range(n_nat + n_vpn, n_nat + n_vpn + n_proxy)), config.gang_follow_p,
    )  # fmt: skip


def opening_accounts(
    rng: random.Random,
    task: TaskSettings,
    clean: bool,
    gang: list[int],
    lookalikes: list[tuple[str, list[int]]],
    n: int,
) -> tuple[list[int], list[int]]:
    """Alerts (some gang members plus honest decoys, look-alike members first; as many in a clean
    world, or their count would give the verdict away) and a sample of other accounts. Both
    are sorted by account number, which is the order of their ids."""
    in_gang = set(gang)
    pool = [i for _, m in lookalikes for i in m]
    if pool:
        decoys = rng.sample(pool, min(len(pool), task.decoy_alerts))
    else:
        decoys = _honest(rng, n, in_gang, set(), task.decoy_alerts)
    if clean:
        decoys += _honest(rng, n, in_gang, set(decoys), task.gang_alerts)
    alerts = (rng.sample(gang, min(len(gang), task.gang_alerts)) if gang else []) + decoys
    alerted = set(alerts)
    drawn = rng.sample(range(n), min(n, task.sample + len(alerted)))
    sample = [i for i in drawn if i not in alerted][: task.sample]
    return sorted(alerted), sorted(sample)


def _honest(rng: random.Random, n: int, gang: set[int], taken: set[int], k: int) -> list[int]:
    """``k`` distinct honest accounts outside ``taken`` (fewer if there are not that many)."""
    k = min(k, n - len(gang | taken))
    picked: list[int] = []
    while len(picked) < k:
        i = rng.randrange(n)
        if i not in gang and i not in taken and i not in picked:
            picked.append(i)
    return picked
