"""The gang world drawn on demand: the same world whichever order the tools read it in.

Profiles, follows and shared-value columns come from counter-based draws (env/gang/draws.py), so
these tests pin what that design promises: scalar and vector draws agree bit for bit, both ends of
a follow agree, "who shares this" agrees with the whole column (also after evasion), ids map back
to accounts, and the order of reads changes nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

from env.gang.draws import Draws
from env.gang.environment import GangEnvironment
from env.gang.profiles import pooled_column

from conftest import call


def test_scalar_and_vector_draws_agree_bit_for_bit():
    d = Draws(0xDEADBEEF_12345678_9ABCDEF)
    idx = np.arange(500)
    assert d.units(idx, 7, 3).tolist() == [d.unit(i, 7, 3) for i in range(500)]
    assert d.units(5, idx, np.full(500, 9)).tolist() == [d.unit(5, i, 9) for i in range(500)]
    high, low = d.pairs(idx, 0, 4)
    assert list(zip(high.tolist(), low.tolist(), strict=True)) == [
        d.pair(i, 0, 4) for i in range(500)
    ]
    u = d.units(idx, 0, 11)
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.05
    assert d.unit(1, 2, 3) != d.unit(2, 1, 3) != Draws(1).unit(1, 2, 3)


def _worlds(seeds: int):
    env = GangEnvironment()
    for task in GangEnvironment.tasks:
        for seed in range(seeds):
            env.reset(seed=seed, task=task)
            yield task, seed, env


@pytest.mark.parametrize("seeds", [12])
def test_both_ends_of_every_follow_agree(seeds):
    for task, seed, env in _worlds(seeds):
        w = env.world
        for i in range(0, w.n, max(1, w.n // 60)):
            following, followers = w.links(i)
            assert i not in following and i not in followers
            assert all(i in w.followers[j] for j in following), (task, seed, i)
            assert all(i in w.following[j] for j in followers), (task, seed, i)


def test_shared_values_match_the_whole_column_before_and_after_evasion():
    def check(env: GangEnvironment) -> None:
        w = env.world
        for name in ("photo", "ip", "bio_group"):
            col = pooled_column(w, name)
            for i in range(w.n):
                assert col[i] == w.profile(i)[name]
                if name == "bio_group" and col[i] == 0:
                    assert w.sharing_bio(i) == set()
                    continue
                assert w.sharing(name, i) == set(np.flatnonzero(col == col[i]).tolist())

    for _, _, env in _worlds(6):
        check(env)
    env = GangEnvironment()
    env.reset(seed=next(s for s in range(40) if _has_gang(env, s)), task="medium")
    env.check_ip(env.reveal()["gang"][0])  # a column built before evasion is kept up to date
    for _ in range(env.settings.evade_at + 1):
        env.step(call("get_policy"))
    assert env.reveal()["evasion"]["rotated_ips"] + env.reveal()["evasion"]["renamed"] > 0
    check(env)


def _has_gang(env: GangEnvironment, seed: int) -> bool:
    env.reset(seed=seed, task="medium")
    return bool(env.reveal()["gang"])


def test_ids_are_distinct_in_range_and_map_back():
    for _, _, env in _worlds(4):
        w = env.world
        ids = [w.id_of(i) for i in range(w.n)]
        assert len(set(ids)) == w.n and ids == sorted(ids)
        assert all("u10000" <= x <= "u99999" and len(x) == 6 for x in ids)
        assert all(w.index_of(x) == i for i, x in enumerate(ids))
        taken = set(ids)
        near = [f"u{int(x[1:]) + 1:05d}" for x in ids[:50]]
        assert all(w.index_of(x) is None for x in near if x not in taken)
        assert w.index_of("u1234") is None and w.index_of("x12345") is None


def test_reading_order_changes_nothing():
    """Two environments read the same accounts in opposite orders and see the same results."""
    tools = ("investigate_network", "reverse_image_search", "analyze_bio", "check_ip")
    for task in GangEnvironment.tasks:
        a, b = GangEnvironment(), GangEnvironment()
        opening = a.reset(seed=5, task=task).result
        b.reset(seed=5, task=task)
        accounts = [x["account_id"] for x in opening["alerts"]] + opening["recently_active"]
        forward = {(t, x): getattr(a, t)(x) for x in accounts for t in tools}
        backward = {(t, x): getattr(b, t)(x) for x in reversed(accounts) for t in reversed(tools)}
        assert forward == backward
        assert a.reveal() == b.reveal()
