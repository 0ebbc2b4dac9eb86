"""Who follows whom, drawn per account when a tool first reads it.

Every follow is a draw about one ordered pair (a follows b), so an account's following and
followers are known from the few accounts it could be linked to, without drawing the graph:

- friend groups: honest accounts in runs of 4-25 (of a random order); each ordered pair follows
  with chance 0.3, and half of those are followed back;
- interest groups of ~30: the accounts whose places in that order are equal modulo ~n/30 (spread
  across friend groups); follows with the chance that gives 1.5 a account on average, the sparse
  noise between friend groups. A gang member also follows ~2 honest members of its interest
  group and is followed by ~1 (camouflage);
- popular accounts (1 in 50, honest): everyone follows each with chance ~2.5 / their number;
- look-alike clusters and the gang: dense cliques (each ordered pair with the cluster's density).

Both ends of a follow read the same draw, so ``a in following(b)`` exactly when
``b in followers(a)`` (tested). The random order is drawn on the first read of an episode
(``FollowLayout``), not at reset: a reset that nobody reads the graph of costs nothing here.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from env.gang.draws import MASK, A, B, mix, reseed, to_units
from env.gang.profiles import GANG

if TYPE_CHECKING:
    from env.gang.world import World

FRIEND_P, BACK_P = 0.3, 0.5
FRIEND_SIZES = (4, 25)
INTEREST_SIZE, INTEREST_FOLLOWS = 30, 1.5
CAMOUFLAGE_FOLLOWS, CAMOUFLAGE_FANS = 2.0, 1.0
POPULAR_FOLLOWS = 2.5
LOOKALIKE_DENSITY = {"family": 0.9, "office": 0.5, "startup": 0.7, "fanclub": 0.6}
F_FRIEND, F_BACK, F_INTEREST, F_POPULAR, F_CLIQUE = range(60, 65)
_FIELDS = (F_FRIEND, F_INTEREST, F_POPULAR, F_CLIQUE)
_NONE = np.empty(0, dtype=np.int64)


@dataclass
class FollowLayout:
    """The episode's friend order and what a follow draw needs besides the pair."""

    order: np.ndarray
    pos: np.ndarray
    """``pos[i]``: account i's place in ``order``."""
    starts: list[int]
    """Where each friend group starts in ``order``."""
    gang_mask: np.ndarray
    gang_array: np.ndarray
    popular: np.ndarray
    terms: np.ndarray
    """Per draw group (friend, interest, popular, clique): the field's part of the hash input."""
    back_delta: int
    """From a friend draw's hash input to its follow-back draw's."""
    stride: int
    limits: tuple[float, float, float]
    """The chance of a follow in a friend group, an interest group and of a popular account."""
    camo_follow: float
    camo_fan: float


def build_layout(w: World, bits: np.random.PCG64) -> FollowLayout:
    """Draw the friend order from the world's own numpy seed (``bits`` is reseeded here)."""
    g = reseed(bits, w.layout_seed)
    n, d = w.n, w.draws
    order = g.permutation(n)
    pos = np.empty_like(order)
    pos[order] = np.arange(n)
    runs = g.integers(FRIEND_SIZES[0], FRIEND_SIZES[1] + 1, n // FRIEND_SIZES[0] + 1)
    starts = np.cumsum(runs) - runs
    gang_array = np.asarray(w.gang, dtype=np.int64)
    gang_mask = np.zeros(n, dtype=bool)
    gang_mask[gang_array] = True
    stride = max(1, round(n / INTEREST_SIZE))
    size = n // stride
    popular = np.asarray(w.popular, dtype=np.int64)
    fans = min(0.9, POPULAR_FOLLOWS / max(1, len(popular)))
    return FollowLayout(
        order, pos, starts[starts < n].tolist(), gang_mask, gang_array, popular,
        np.array([d.offset(0, 0, f) for f in _FIELDS], dtype=np.uint64),
        (d.offset(0, 0, F_BACK) - d.offset(0, 0, F_FRIEND)) & MASK, stride,
        (FRIEND_P, INTEREST_FOLLOWS / max(1, size - 1), fans),
        CAMOUFLAGE_FOLLOWS / size, CAMOUFLAGE_FANS / size,
    )  # fmt: skip


def links(w: World, i: int) -> tuple[set[int], set[int]]:
    """(accounts ``i`` follows, accounts following ``i``)."""
    lay, d = w.layout, w.draws
    member = w.member_of.get(i)
    in_gang = member == GANG
    friends = _NONE if in_gang else _friends(lay, i, w.n)
    interest = lay.order[lay.pos[i] % lay.stride :: lay.stride]
    clique, density = _clique(w, lay, member)
    groups = (friends, interest, lay.popular, clique)
    sizes = [len(g) for g in groups]
    others = np.concatenate(groups)
    m, k, t = len(others), sizes[0], sizes[0] + sizes[1]
    # One pass of draws over [i -> others, others -> i, both follow-back draws of friend pairs].
    # Hash inputs add (draws.py), so they are built from two products and a few sums.
    terms = np.repeat(lay.terms, sizes)
    z = np.empty(2 * m + 2 * k, dtype=np.uint64)
    as_u64 = others.astype(np.uint64)
    np.multiply(as_u64, B, out=z[:m])
    np.multiply(as_u64, A, out=z[m : 2 * m])
    z[:m] += terms
    z[m : 2 * m] += terms
    z[:m] += np.uint64(d.offset(i, 0, 0) - d.key & MASK)
    z[m : 2 * m] += np.uint64(d.offset(0, i, 0) - d.key & MASK)
    back = np.uint64(lay.back_delta)
    np.add(z[:k], back, out=z[2 * m : 2 * m + k])
    np.add(z[m : m + k], back, out=z[2 * m + k :])
    u = to_units(mix(z))
    out_u, in_u = u[:m], u[m : 2 * m]
    out_limit = np.repeat(np.array((*lay.limits, density)), sizes)
    in_limit = out_limit.copy()
    if len(w.gang):  # camouflage: a gang member's follows of (and by) honest interest peers
        peers = lay.gang_mask[interest] != in_gang
        lead, trail = (
            (lay.camo_follow, lay.camo_fan) if in_gang else (lay.camo_fan, lay.camo_follow)
        )
        out_limit[k:t] += peers * lead
        in_limit[k:t] += peers * trail
    out_mask, in_mask = out_u < out_limit, in_u < in_limit
    if k:  # a follow back: the back draw of the pair that followed first
        out_mask[:k] |= (in_u[:k] < FRIEND_P) & (u[2 * m + k :] < BACK_P)
        in_mask[:k] |= (out_u[:k] < FRIEND_P) & (u[2 * m : 2 * m + k] < BACK_P)
    in_mask[t : t + sizes[2]] = False  # only a popular account has fans (below)
    following = set(others[out_mask].tolist())
    followers = set(others[in_mask].tolist())
    if i in w.popular_set:
        fans = d.units(np.arange(w.n), i, F_POPULAR) < lay.limits[2]
        followers.update(np.flatnonzero(fans).tolist())
    following.discard(i)
    followers.discard(i)
    return following, followers


def _friends(lay: FollowLayout, i: int, n: int) -> np.ndarray:
    pos = int(lay.pos[i])
    block = bisect_right(lay.starts, pos) - 1
    end = lay.starts[block + 1] if block + 1 < len(lay.starts) else n
    members = lay.order[lay.starts[block] : end]
    return members[~lay.gang_mask[members] & (members != i)]


def _clique(w: World, lay: FollowLayout, member: int | None) -> tuple[np.ndarray, float]:
    if member is None:
        return _NONE, 0.0
    if member == GANG:
        return lay.gang_array, w.gang_follow_p
    kind, members = w.lookalikes[member]
    return np.asarray(members, dtype=np.int64), LOOKALIKE_DENSITY[kind]
