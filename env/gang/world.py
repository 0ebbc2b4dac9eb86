"""The hidden follower graph of one episode, drawn account by account as the tools read it.

A hard episode has 1,000 accounts and ~10k follows, but an agent reads a few dozen accounts before
it submits. So a reset fixes only the layout (who is in the gang, the look-alike clusters, the
popular accounts, the opening) and every profile, follow list, id and "who shares this IP /
photo / bio" column is drawn from counter-based draws (``draws.py``) on first read and kept: a hard reset costs ~0.1 ms instead of the ~2 ms of drawing every column and
follow up front (benchmarks/RESULTS.md, bench_resets), and a read returns the same whatever the
order of reads. Profiles live in ``profiles.py``, follows in ``follows.py``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from env.gang.draws import Draws
from env.gang.follows import FollowLayout, build_layout, links
from env.gang.profiles import (
    BIO_GROUPS,
    C_BRAND,
    C_LOOK,
    CELEBRITIES,
    COMPANIES,
    DEFAULT_AVATAR,
    FIRST,
    GANG,
    GANG_BIO_PARTS,
    GENERIC_BIOS,
    GROUPS,
    IP_KINDS,
    LAST,
    gang_traits,
    honest_profile,
    lookalike_traits,
    pooled_column,
    shared_without_column,
)

ID_RANGE = (10000, 99999)
F_ID = 70  # the draw field of an id's place in its window


@dataclass(slots=True)
class Account:
    """One account as the tools read it; ``gang`` and ``group`` are hidden truth."""

    id: str
    handle: str
    age_days: int
    posts: int
    email_verified: bool
    photo: str
    web_matches: int
    bio: str
    bio_group: str
    template_score: float
    ip: str
    ip_kind: str
    gang: bool = False
    group: str = "none"
    handle_changed: int | None = None


class Labels:
    """Random-looking, never-repeating labels (``ip-3fa09c7``): serial k maps through a keyed
    bijection of 24 bits, so two serials never print the same label."""

    def __init__(self, key: int, step: int) -> None:
        self.key, self.step = key & 0xFFFFFF, step | 1  # odd: a bijection mod 2**24

    def __call__(self, prefix: str, serial: int) -> str:
        return f"{prefix}-{(serial * self.step + self.key) & 0xFFFFFF:06x}{serial % 10}"


class Adjacency(Sequence):
    """``adj[i]``: the set of accounts ``i`` follows (or is followed by), drawn on first read and
    kept, so that evasion's edits stick."""

    def __init__(self, world: World, side: int) -> None:
        self._world, self._side = world, side

    def __len__(self) -> int:
        return self._world.n

    def __getitem__(self, i: int) -> set[int]:  # type: ignore[override]
        return self._world.links(i)[self._side]


class Accounts(Sequence):
    """``world.accounts[i]``: the account built from its profile on first read."""

    def __init__(self, world: World) -> None:
        self._world = world
        self._built: dict[int, Account] = {}

    def __len__(self) -> int:
        return self._world.n

    def __getitem__(self, i: int) -> Account:  # type: ignore[override]
        found = self._built.get(i)
        if found is None:
            found = self._built[i] = self._world.build_account(i)
        return found

    def __iter__(self) -> Iterator[Account]:
        return (self[i] for i in range(len(self)))

    def forget(self, i: int) -> None:
        self._built.pop(i, None)


@dataclass
class World:
    """One episode's layout; profiles, follows and shared-value columns are drawn on demand."""

    n: int
    draws: Draws
    labels: Labels
    layout_seed: tuple[int, int]
    """The numpy PCG64 (state, increment) of the friend order, drawn on first use."""
    bits: np.random.PCG64
    """The numpy bit generator that draws it (the environment's own, reseeded each time)."""
    gang: list[int]
    popular: list[int]
    lookalikes: list[tuple[str, list[int]]]
    alerts: list[int]
    sample: list[int]
    n_nat: int
    n_vpn: int
    proxies: list[int]
    gang_follow_p: float
    handles: dict[int, str] = field(default_factory=dict)
    """Handles written whole (renamed gang members); the rest print from their profile."""
    overrides: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Profile values written by evasion, over the drawn ones."""

    def __post_init__(self) -> None:
        n = self.n
        self.residential = self.n_nat + self.n_vpn + len(self.proxies)
        self.next_ip = self.residential + n + len(self.lookalikes)
        """Serial of the next fresh IP (evasion moves proxy users to new ones)."""
        self.id_gap = (ID_RANGE[1] - ID_RANGE[0] + 1) // n
        self.popular_set = set(self.popular)
        self.member_of: dict[int, int] = dict.fromkeys(self.gang, GANG)
        for c, (_, members) in enumerate(self.lookalikes):
            self.member_of.update(dict.fromkeys(members, c))
        self.accounts = Accounts(self)
        self.following, self.followers = Adjacency(self, 0), Adjacency(self, 1)
        self._layout: FollowLayout | None = None
        self._links: dict[int, tuple[set[int], set[int]]] = {}
        self._ids: dict[int, str] = {}
        self._profiles: dict[int, dict[str, Any]] = {}
        self._columns: dict[str, np.ndarray] = {}
        self._brands: dict[int, tuple[int, int, int, int]] = {}

    @property
    def layout(self) -> FollowLayout:
        if self._layout is None:
            self._layout = build_layout(self, self.bits)
        return self._layout

    # ----- reading ------------------------------------------------------------------------------

    def id_of(self, i: int) -> str:
        """Ids ascend with the account number, one in each window of ``id_gap`` numbers, at a
        drawn place in it: ``index_of`` is arithmetic, and sorting ids sorts accounts."""
        found = self._ids.get(i)
        if found is None:
            place = self.draws.below(i, 0, F_ID, self.id_gap)
            found = self._ids[i] = f"u{ID_RANGE[0] + i * self.id_gap + place:05d}"
        return found

    def index_of(self, account_id: str) -> int | None:
        """The account number of an id like ``u12345``; None for anything else."""
        text = str(account_id).strip()
        if len(text) != 6 or text[0] != "u" or not text[1:].isdigit():
            return None
        i = (int(text[1:]) - ID_RANGE[0]) // self.id_gap
        return i if 0 <= i < self.n and self.id_of(i) == text else None

    def links(self, i: int) -> tuple[set[int], set[int]]:
        found = self._links.get(i)
        if found is None:
            found = self._links[i] = links(self, i)
        return found

    def profile(self, i: int) -> dict[str, Any]:
        """Account ``i``'s profile codes (drawn once; hidden ``gang`` and ``group`` included)."""
        found = self._profiles.get(i)
        if found is None:
            found = honest_profile(self, i)
            member = self.member_of.get(i)
            if member == GANG:
                found.update(gang_traits(self, i))
            elif member is not None:
                found.update(lookalike_traits(self, i, member))
            found.update(self.overrides.get(i, {}))
            self._profiles[i] = found
        return found

    def cluster_brand(self, c: int) -> tuple[int, int, int, int]:
        """Look-alike cluster ``c``'s company, celebrity, photo web matches and family surname."""
        found = self._brands.get(c)
        if found is None:
            a, b = self.draws.pair(c, 1, C_BRAND)
            m, s = self.draws.pair(c, 1, C_LOOK)
            found = (int(a * len(COMPANIES)), int(b * len(CELEBRITIES)), 50 + int(m * 851))
            found = self._brands[c] = (*found, int(s * len(LAST)))
        return found

    def sharing(self, column: str, i: int) -> set[int]:
        """Accounts whose ``column`` code (photo, ip or bio_group) equals account ``i``'s."""
        few = shared_without_column(self, column, i)
        if few is not None:
            return few
        col = self._columns.get(column)
        if col is None:
            col = self._columns[column] = pooled_column(self, column)
        return set(np.flatnonzero(col == col[i]).tolist())

    def sharing_bio(self, i: int) -> set[int]:
        return self.sharing("bio_group", i) if self.profile(i)["bio_group"] else set()

    def build_account(self, i: int) -> Account:
        c = self.profile(i)
        changed = c["handle_changed"]
        return Account(
            self.id_of(i), self.handle(i, c), c["age_days"], c["posts"], c["email_verified"],
            self.photo(c["photo"]), c["web_matches"], self.bio(i, c), BIO_GROUPS[c["bio_group"]],
            c["template_score"], self.labels("ip", c["ip"]), IP_KINDS[c["ip_kind"]], c["gang"],
            GROUPS[c["group"]], None if changed < 0 else changed,
        )  # fmt: skip

    def handle(self, i: int, c: dict[str, Any]) -> str:
        if i in self.handles:
            return self.handles[i]
        num = c["handle_num"]
        return f"{FIRST[c['first']]}_{LAST[c['last']]}{num if num >= 0 else ''}"

    def photo(self, code: int) -> str:
        if code >= 0:
            return self.labels("img", code)
        if code == DEFAULT_AVATAR:
            return "default-avatar"
        if code < DEFAULT_AVATAR:
            c = DEFAULT_AVATAR - 1 - code
            star = CELEBRITIES[self.cluster_brand(c)[1]]
            return f"fan-{star}-{self.draws.below(c, 2, C_BRAND, 99)}"
        return f"stock-{-code - 1}"

    def bio(self, i: int, c: dict[str, Any]) -> str:
        if "bio" in c:
            return c["bio"]
        kind, a, b, d = c["bio_kind"], c["bio_a"], c["bio_b"], c["bio_c"]
        if kind == 0:
            return f"{FIRST[a].title()} from {LAST[b].title()}ville, {d}"
        if kind == 1:
            return GENERIC_BIOS[a]
        if kind == 2:
            return " ".join(part[k] for part, k in zip(GANG_BIO_PARTS, (a, b, d), strict=True))
        return ""

    # ----- writing (evasion) --------------------------------------------------------------------

    def write(self, i: int, **values: Any) -> None:
        """Write profile values of account ``i`` over the drawn ones (and any column built)."""
        self.overrides.setdefault(i, {}).update(values)
        if i in self._profiles:
            self._profiles[i].update(values)
        for name, value in values.items():
            if name in self._columns:
                self._columns[name][i] = value
        self.accounts.forget(i)

    def unfollow(self, a: int, b: int) -> None:
        self.following[a].discard(b)
        self.followers[b].discard(a)


def evade(world: World, rng: Any, config: Any) -> dict[str, int]:
    """The gang notices the investigation: drop follows, rename, rotate IPs. Returns counts."""
    dropped = renamed = rotated = 0
    for i in world.gang:
        for j in sorted(world.following[i]):
            if world.member_of.get(j) == GANG and rng.random() < config.evade_drop_follow:
                world.unfollow(i, j)
                dropped += 1
        if rng.random() < config.evade_rename:
            world.handles[i] = f"{rng.choice(FIRST)}.{rng.choice(LAST)}{rng.randrange(1000)}"
            world.write(i, handle_changed=0)
            renamed += 1
        if (
            IP_KINDS[world.profile(i)["ip_kind"]] == "hosting"
            and rng.random() < config.evade_rotate_ip
        ):
            world.write(i, ip=world.next_ip, ip_kind=IP_KINDS.index("residential"))
            world.next_ip += 1
            rotated += 1
    gang = set(world.gang)
    honest = [i for i in range(world.n) if i not in gang]
    for i in rng.sample(honest, min(len(honest), max(1, len(world.gang) // 2))):
        world.write(i, handle_changed=0)  # ordinary churn hides the renames
    return {"dropped_follows": dropped, "renamed": renamed, "rotated_ips": rotated}
