"""Generation of the hidden follower graph: honest communities, gang-like honest clusters and
(maybe) a gang.

Honest accounts live in friend groups with ordinary, noisy profiles: some are new, some use stock
photos or generic bios, some share a carrier NAT or VPN IP. Look-alike clusters make the hard part:
families share a home IP and follow each other densely, offices and startups share an office IP and a
company bio (startups are also young), fan clubs share a celebrity photo and a fan bio. The gang is a
dense mutual-follow clique whose members *tend* to be young, use stolen or AI photos, a templated
bio and proxy IPs -- each trait on only part of the gang, each trait also common among honest
accounts. Only the combination, read through the tools, gives the gang away.

Every draw comes from the episode's ``random.Random``: the bulk (every account's profile, friend
groups, popular and random follows) from a numpy ``Generator`` seeded by it, in one vectorised
draw per column; the few look-alike and gang members from the ``Random`` itself.
"""

from __future__ import annotations

import random

import numpy as np

from env.gang.config import GangConfig, TaskSettings
from env.gang.world import (
    CELEBRITIES,
    COMPANIES,
    DEFAULT_AVATAR,
    FIRST,
    GANG_BIO_PARTS,
    GENERIC_BIOS,
    IP_KINDS,
    LAST,
    STOCK_PHOTOS,
    Adjacency,
    Labels,
    World,
    write_columns,
)

GROUPS = ["none", "gang", "family", "office", "fanclub", "startup"]
LOOKALIKE_SIZES = {"family": (3, 6), "office": (6, 12), "fanclub": (5, 10), "startup": (6, 10)}
LOOKALIKE_DENSITY = {"family": 0.9, "office": 0.5, "startup": 0.7, "fanclub": 0.6}
RESIDENTIAL, MOBILE, HOSTING, BUSINESS = range(len(IP_KINDS))


def honest_columns(g: np.random.Generator, n: int, ids: np.ndarray, ips: dict) -> dict:
    """Every account's profile drawn as honest (look-alike and gang members are rewritten), from
    one matrix of uniforms: a row per draw, so a column costs a few array operations."""
    u = g.random((24, n))

    def pick(row: int, low: int | np.ndarray, high: int | np.ndarray) -> np.ndarray:
        """Integers uniform in [low, high] (element-wise bounds allowed)."""
        return low + (u[row] * (np.asarray(high) - low + 1)).astype(np.int64)

    age = np.where(u[0] < 0.18, pick(1, 5, 150), (150 + 4850 * u[2]).astype(np.int64))
    exponential = -3.0 * np.log1p(-u[4])  # mean 3
    posts = np.where(u[3] < 0.75, (exponential * age / 10).astype(np.int64), pick(5, 0, 30))
    unique, stock = u[6] < 0.7, (u[6] >= 0.7) & (u[6] < 0.93)
    photo = np.select(
        [unique, stock], [np.arange(n), -1 - pick(7, 0, STOCK_PHOTOS - 1)], DEFAULT_AVATAR
    )
    matches = np.select(
        [unique, stock], [np.array([0, 0, 0, 0, 1, 2])[pick(8, 0, 5)], pick(9, 5, 400)], 0
    )
    kind = np.select([u[10] < 0.62, u[10] < 0.89, u[10] < 0.97], [0, 1, 2], 3)
    bio_a = pick(11, 0, np.array([len(FIRST), len(GENERIC_BIOS), 5, 1])[kind] - 1)
    bio_b = pick(12, 0, np.array([len(LAST), 1, 5, 1])[kind] - 1)
    bio_c = pick(13, np.array([18, 0, 0, 0])[kind], np.array([70, 0, 4, 0])[kind])
    bio_group = np.select([kind == 1, kind == 2], [1 + bio_a, 1 + len(GENERIC_BIOS)], 0)
    low, high = np.array([0.02, 0.3, 0.45, 0.0])[kind], np.array([0.55, 0.9, 0.95, 0.0])[kind]
    ip_kind = np.select([u[15] < 0.62, u[15] < 0.88], [RESIDENTIAL, MOBILE], HOSTING)
    nat, vpn = ips["nat"], ips["vpn"]
    ip = np.select(
        [ip_kind == RESIDENTIAL, ip_kind == MOBILE],
        [ips["residential"] + np.arange(n), nat[pick(16, 0, len(nat) - 1)]],
        vpn[pick(16, 0, len(vpn) - 1)],
    )
    return {
        "id": ids,
        "first": pick(17, 0, len(FIRST) - 1),
        "last": pick(18, 0, len(LAST) - 1),
        "handle_num": np.where(u[19] < 0.6, pick(20, 0, 99), -1),
        "age_days": age,
        "posts": posts,
        "email_verified": u[21] < 0.75,
        "photo": photo,
        "web_matches": matches,
        "bio_kind": kind,
        "bio_a": bio_a,
        "bio_b": bio_b,
        "bio_c": bio_c,
        "bio_group": bio_group,
        "template_score": (low + (high - low) * u[14]).round(2),
        "ip": ip,
        "ip_kind": ip_kind,
        "handle_changed": np.where(u[22] < 0.08, pick(23, 0, 400), -1),
        "gang": np.zeros(n, dtype=bool),
        "group": np.zeros(n, dtype=np.int64),
    }


def friend_follows(g: np.random.Generator, honest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Honest friend groups of 4-25 in a row of ``honest``: each ordered pair follows with
    chance 0.3, about half of those followed back."""
    h = len(honest)
    sizes = g.integers(4, 26, h // 4 + 1)
    starts = np.cumsum(sizes) - sizes
    starts = starts[starts < h]
    sizes = np.minimum(starts + sizes[: len(starts)], h) - starts
    group = np.repeat(np.arange(len(starts)), sizes)
    width = sizes[group]  # each position pairs with every position of its group
    a = np.repeat(np.arange(h), width)
    b = (
        np.repeat(starts[group], width)
        + np.arange(width.sum())
        - np.repeat(np.cumsum(width) - width, width)
    )
    a, b = a[a != b], b[a != b]
    once = g.random(len(a)) < 0.3
    back = once & (g.random(len(a)) < 0.5)
    return (
        np.concatenate([honest[a[once]], honest[b[back]]]),
        np.concatenate([honest[b[once]], honest[a[back]]]),
    )


def crowd_follows(
    g: np.random.Generator, n: int, popular: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Everyone follows 1-4 distinct popular accounts and 0-3 random accounts."""
    top = min(4, len(popular))
    picks = np.argsort(g.random((n, len(popular))), axis=1)[:, :top]
    chosen = np.arange(top)[None, :] < g.integers(1, top + 1, n)[:, None]
    rows = np.broadcast_to(np.arange(n)[:, None], (n, top))
    extra = g.integers(0, 4, n)
    return (
        np.concatenate([rows[chosen], np.repeat(np.arange(n), extra)]),
        np.concatenate([popular[picks[chosen]], g.integers(0, n, int(extra.sum()))]),
    )


class _Members:
    """Look-alike and gang members, written one by one from the episode's ``Random``."""

    def __init__(self, rng: random.Random, cols: dict, next_ip: int, next_photo: int) -> None:
        self.rng, self.cols = rng, cols
        self.bios: dict[int, str] = {}
        self.handles: dict[int, str] = {}
        self.shared_photos: dict[int, str] = {}
        self.bio_groups = ["", *(f"generic-{k}" for k in range(len(GENERIC_BIOS)))]
        self.bio_groups += ["influencer", "gang-template"]
        self.src: list[int] = []
        self.dst: list[int] = []
        self.serials = {"ip": next_ip, "photo": next_photo}
        """The next unused label serial of each kind."""

    def fresh(self, kind: str) -> int:
        """A new label serial of ``kind`` (``ip`` or ``photo``)."""
        self.serials[kind] += 1
        return self.serials[kind] - 1

    def bio_group(self, name: str) -> int:
        if name not in self.bio_groups:
            self.bio_groups.append(name)
        return self.bio_groups.index(name)

    def put(self, i: int, **values: object) -> None:
        write_columns(self.cols, i, values)

    def clique(self, members: list[int], density: float) -> None:
        for i in members:
            for j in members:
                if i != j and self.rng.random() < density:
                    self.src.append(i)
                    self.dst.append(j)

    def lookalike(self, kind: str, members: list[int]) -> None:
        r = self.rng
        company, star = r.choice(COMPANIES), r.choice(CELEBRITIES)
        shared_ip = self.fresh("ip")
        photo = DEFAULT_AVATAR - 1 - len(self.shared_photos)
        self.shared_photos[photo] = f"fan-{star}-{r.randrange(99)}"
        matches, surname = r.randint(50, 900), r.randrange(len(LAST))
        for i in members:
            self.put(i, group=GROUPS.index(kind))
            if kind == "family":
                self.put(i, ip=shared_ip, ip_kind=RESIDENTIAL, first=r.randrange(len(FIRST)))
                self.put(i, last=surname, handle_num=r.randrange(100) if r.random() < 0.6 else -1)
            elif kind in ("office", "startup"):
                self.put(i, ip=shared_ip, ip_kind=BUSINESS)
                self.bios[i] = f"{r.choice(('engineer', 'sales', 'design', 'ops'))} at {company}"
                score = round(r.uniform(0.4, 0.9), 2)
                self.put(i, bio_group=self.bio_group(f"company-{company}"), template_score=score)
                if kind == "startup":
                    self.put(i, age_days=r.randint(10, 160), posts=r.randint(0, 60))
            else:
                self.put(i, photo=photo, web_matches=matches)
                self.bios[i] = f"#1 fan of {star}"
                score = round(r.uniform(0.5, 0.95), 2)
                self.put(i, bio_group=self.bio_group(f"fan-{star}"), template_score=score)
                if r.random() < 0.3:
                    self.put(i, age_days=r.randint(10, 150))
        self.clique(members, LOOKALIKE_DENSITY[kind])

    def gang_member(self, i: int, proxies: list[int], nat: list[int]) -> None:
        r = self.rng
        self.put(i, gang=True, group=GROUPS.index("gang"))
        self.put(i, age_days=r.randint(8, 150) if r.random() < 0.5 else int(r.uniform(150, 3000)))
        self.put(i, posts=r.randint(0, 40) if r.random() < 0.7 else int(r.uniform(40, 600)))
        self.put(i, email_verified=r.random() < 0.5)
        u = r.random()
        if u < 0.5:
            self.put(i, photo=self.fresh("photo"), web_matches=r.randint(5, 80))
        elif u < 0.65:
            self.put(i, photo=-1 - r.randrange(STOCK_PHOTOS), web_matches=r.randint(5, 400))
        else:
            self.put(i, photo=self.fresh("photo"), web_matches=r.choice((0, 0, 1)))
        if r.random() < 0.65:
            parts = [r.randrange(len(part)) for part in GANG_BIO_PARTS]
            self.put(i, bio_kind=2, bio_a=parts[0], bio_b=parts[1], bio_c=parts[2])
            score = round(r.uniform(0.45, 0.95), 2)
            self.put(i, bio_group=self.bio_group("gang-template"), template_score=score)
        else:
            self.put(i, bio_kind=0, bio_a=r.randrange(len(FIRST)), bio_b=r.randrange(len(LAST)))
            self.put(
                i,
                bio_c=r.randint(18, 70),
                bio_group=0,
                template_score=round(r.uniform(0.05, 0.6), 2),
            )
        w = r.random()
        if w < 0.6:
            self.put(i, ip=r.choice(proxies), ip_kind=HOSTING)
        elif w < 0.82:
            self.put(i, ip=self.fresh("ip"), ip_kind=RESIDENTIAL)
        else:
            self.put(i, ip=r.choice(nat), ip_kind=MOBILE)
        self.put(i, handle_changed=r.randint(0, 200) if r.random() < 0.15 else -1)


def adjacency(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[Adjacency, Adjacency]:
    """Following and followers of each account as compressed rows; self-follows dropped, repeats
    left to collapse when a row becomes a set. Rows group by a stable radix sort of the small
    integer account numbers."""
    keep = src != dst
    src, dst = src[keep], dst[keep]
    small = np.int16 if n < 2**15 else np.int32

    def rows(by: np.ndarray, other: np.ndarray) -> Adjacency:
        order = np.argsort(by.astype(small), kind="stable")
        indptr = np.concatenate([[0], np.cumsum(np.bincount(by, minlength=n))])
        return Adjacency(indptr, other[order])

    return rows(src, dst), rows(dst, src)


def build_world(task_name: str, rng: random.Random, config: GangConfig) -> World:
    """Build one episode's world for the task ``task_name`` from ``rng`` alone."""
    task: TaskSettings = config.tasks[task_name]
    n = task.accounts
    g = np.random.default_rng(rng.getrandbits(64))
    labels = Labels(rng.getrandbits(24), rng.getrandbits(24))
    n_nat, n_vpn, n_proxy = max(2, n // 12), max(2, n // 40), rng.randint(2, 3)
    ips = {
        "nat": np.arange(n_nat),
        "vpn": n_nat + np.arange(n_vpn),
        "residential": n_nat + n_vpn + n_proxy,
    }
    proxies = list(range(n_nat + n_vpn, n_nat + n_vpn + n_proxy))
    cols = honest_columns(g, n, g.choice(90000, n, replace=False) + 10000, ips)
    members = _Members(rng, cols, next_ip=ips["residential"] + n, next_photo=n)
    clean = rng.random() < config.clean_share
    size = 0 if clean else rng.randint(task.gang_min, task.gang_max)
    order = g.permutation(n)
    gang, honest = sorted(order[:size].tolist()), order[size:]
    popular = honest[: max(3, n // 50)]
    edges = [friend_follows(g, honest), crowd_follows(g, n, popular)]
    # Look-alike honest clusters.
    free = g.permutation(honest[len(popular) :]).tolist()
    lookalikes: list[tuple[str, list[int]]] = []
    for c in range(task.lookalikes):
        kind = tuple(LOOKALIKE_SIZES)[(c + rng.randrange(4)) % 4]
        k = rng.randint(*LOOKALIKE_SIZES[kind])
        chosen, free = free[:k], free[k:]
        if len(chosen) >= 3:
            members.lookalike(kind, chosen)
            lookalikes.append((kind, chosen))
    # The gang: a dense clique with camouflage follows and a few honest follow-backs.
    honest_list = honest.tolist()
    for i in gang:
        members.gang_member(i, proxies, ips["nat"].tolist())
    members.clique(gang, config.gang_follow_p)
    for i in gang:
        for _ in range(rng.randint(1, 3)):
            members.src.append(i)
            members.dst.append(rng.choice(honest_list))
        for _ in range(rng.randint(0, 2)):
            members.src.append(rng.choice(honest_list))
            members.dst.append(i)
    edges.append((np.array(members.src, dtype=np.int64), np.array(members.dst, dtype=np.int64)))
    following, followers = adjacency(
        n, np.concatenate([e[0] for e in edges]), np.concatenate([e[1] for e in edges])
    )
    alerts, sample = opening_accounts(rng, task, clean, gang, honest_list, lookalikes, cols["id"])
    return World(
        n, labels, cols, following, followers, gang, lookalikes, alerts, sample,
        members.bio_groups, list(GROUPS), members.shared_photos, members.bios, members.handles,
        members.serials["ip"],
    )  # fmt: skip


def opening_accounts(
    rng: random.Random,
    task: TaskSettings,
    clean: bool,
    gang: list[int],
    honest: list[int],
    lookalikes: list[tuple[str, list[int]]],
    ids: np.ndarray,
) -> tuple[list[int], list[int]]:
    """Alerts (some gang members plus honest decoys, look-alike members first; as many in a clean
    world, or their count would give the verdict away) and a sample of other accounts."""
    decoy_pool = [i for _, m in lookalikes for i in m] or honest
    decoys = rng.sample(decoy_pool, min(len(decoy_pool), task.decoy_alerts))
    if clean:
        taken = set(decoys)
        others = [i for i in honest if i not in taken]
        decoys += rng.sample(others, min(len(others), task.gang_alerts))
    alerts = (rng.sample(gang, min(len(gang), task.gang_alerts)) if gang else []) + decoys
    alerted = set(alerts)
    rest = [i for i in range(len(ids)) if i not in alerted]
    sample = rng.sample(rest, min(task.sample, len(rest)))
    return sorted(alerted, key=lambda i: ids[i]), sorted(sample, key=lambda i: ids[i])
