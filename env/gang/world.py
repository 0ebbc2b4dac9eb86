"""The hidden follower graph of one episode, stored as columns that materialise on demand.

A hard episode has 1000 accounts and ~11k follows, but an agent reads a few dozen accounts before
it submits. So the world keeps every attribute as a numpy column (codes, not strings) and the
follows as two compressed adjacency arrays; an ``Account`` object, a follow set or a display
string is built only when a tool reads it, and the "who shares this IP / photo / bio" lookups
compare one column. Generation (``env/gang/generate.py``) fills the columns in a few vectorised
draws: a hard reset costs about 2 ms instead of the 15 ms of one Python object per account
and one ``set.add`` per follow (benchmarks/RESULTS.md, bench_resets).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FIRST = (
    "ana", "maria", "li", "wei", "omar", "sara", "john", "aisha", "ken", "yuki", "lucas",
    "emma", "noah", "mia", "liam", "zoe", "raj", "nina", "tom", "eva", "ivan", "olga", "pablo",
    "lena", "marco", "chloe", "amir", "dana", "felix", "iris",
)  # fmt: skip
LAST = (
    "smith", "garcia", "chen", "khan", "silva", "novak", "rossi", "kim", "ito", "muller",
    "brown", "lopez", "patel", "nguyen", "costa", "berg", "haas", "kowal", "sato", "dubois",
)  # fmt: skip
GENERIC_BIOS = (
    "coffee, travel and good books",
    "living my best life one day at a time",
    "dog mom | foodie | dreamer",
    "just here for the memes",
    "music lover. runner. optimist.",
    "making the world a better place",
    "photographer in my free time",
)
GANG_BIO_PARTS = (
    ("crypto", "forex", "fitness", "lifestyle", "growth"),
    ("coach", "mentor", "investor", "creator", "queen"),
    ("DM for collab", "link in bio", "follow back", "financial freedom", "100% real"),
)
COMPANIES = ("Acme", "Northwind", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay")
CELEBRITIES = ("Taylor", "Messi", "BTS", "Zendaya", "Ronaldo", "Rihanna")
IP_KINDS = ("residential", "mobile", "hosting", "business")
STOCK_PHOTOS = 25
DEFAULT_AVATAR = -(STOCK_PHOTOS + 1)
"""Photo codes: >= 0 a unique ``img-`` label; -1-k stock photo k; this one the default avatar;
below it the shared photos of ``World.shared_photos`` (fan clubs)."""


def write_columns(cols: dict[str, Any], i: int, values: dict[str, Any]) -> None:
    """Set account ``i``'s entry in each named column (generation and evasion both edit rows)."""
    for name, value in values.items():
        cols[name][i] = value


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
    """``adj[i]``: the set of accounts ``i`` follows (or is followed by), built on first read
    from a compressed row and kept, so that evasion's edits stick."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray) -> None:
        self._indptr, self._indices = indptr.tolist(), indices
        self._sets: dict[int, set[int]] = {}

    def __len__(self) -> int:
        return len(self._indptr) - 1

    def __getitem__(self, i: int) -> set[int]:  # type: ignore[override]
        found = self._sets.get(i)
        if found is None:
            found = set(self._indices[self._indptr[i] : self._indptr[i + 1]].tolist())
            self._sets[i] = found
        return found


class Accounts(Sequence):
    """``world.accounts[i]``: the account built from the columns on first read."""

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
    """The whole hidden graph of one episode: columns indexed by account number."""

    n: int
    labels: Labels
    cols: dict[str, np.ndarray]
    """id, first, last, handle_num, age_days, posts, email_verified, photo, web_matches,
    bio_kind, bio_a, bio_b, bio_c, bio_group, template_score, ip, ip_kind, handle_changed (-1 =
    never), gang, group (index into ``groups``)."""
    following: Adjacency
    followers: Adjacency
    gang: list[int]
    lookalikes: list[tuple[str, list[int]]]
    alerts: list[int]
    sample: list[int]
    bio_groups: list[str]
    groups: list[str] = field(default_factory=lambda: ["none", "gang"])
    shared_photos: dict[int, str] = field(default_factory=dict)
    bios: dict[int, str] = field(default_factory=dict)
    """Bios written whole (look-alike and gang members); the rest print from codes."""
    handles: dict[int, str] = field(default_factory=dict)
    """Handles written whole (renamed gang members); the rest print from codes."""
    next_ip: int = 0
    """Serial of the next fresh IP label (evasion moves proxy users to new ones)."""

    def __post_init__(self) -> None:
        self.accounts = Accounts(self)
        ids = self.cols["id"].tolist()
        self._index = dict(zip(ids, range(self.n), strict=True))

    # ----- reading ------------------------------------------------------------------------------

    def id_of(self, i: int) -> str:
        return f"u{int(self.cols['id'][i]):05d}"

    def index_of(self, account_id: str) -> int | None:
        """The account number of an id like ``u12345``; None for anything else."""
        text = str(account_id).strip()
        if len(text) != 6 or text[0] != "u" or not text[1:].isdigit():
            return None
        return self._index.get(int(text[1:]))

    def sharing(self, column: str, i: int) -> set[int]:
        """Accounts whose ``column`` code equals account ``i``'s (``i`` included)."""
        col = self.cols[column]
        return set(np.flatnonzero(col == col[i]).tolist())

    def sharing_bio(self, i: int) -> set[int]:
        return self.sharing("bio_group", i) if self.cols["bio_group"][i] else set()

    def build_account(self, i: int) -> Account:
        c = {name: col[i].item() for name, col in self.cols.items()}
        changed = c["handle_changed"]
        return Account(
            self.id_of(i), self.handle(i, c), c["age_days"], c["posts"], c["email_verified"],
            self.photo(c["photo"]), c["web_matches"], self.bio(i, c),
            self.bio_groups[c["bio_group"]], c["template_score"],
            self.labels("ip", c["ip"]), IP_KINDS[c["ip_kind"]], c["gang"], self.groups[c["group"]],
            None if changed < 0 else changed,
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
        return self.shared_photos[code] if code < DEFAULT_AVATAR else f"stock-{-code - 1}"

    def bio(self, i: int, c: dict[str, Any]) -> str:
        if i in self.bios:
            return self.bios[i]
        kind, a, b, d = c["bio_kind"], c["bio_a"], c["bio_b"], c["bio_c"]
        if kind == 0:
            return f"{FIRST[a].title()} from {LAST[b].title()}ville, {d}"
        if kind == 1:
            return GENERIC_BIOS[a]
        if kind == 2:
            return " ".join(part[k] for part, k in zip(GANG_BIO_PARTS, (a, b, d), strict=True))
        return ""

    # ----- writing (generation and evasion) ------------------------------------------------------

    def write(self, i: int, **values: Any) -> None:
        """Write columns of account ``i`` (its built ``Account``, if any, is rebuilt on read)."""
        write_columns(self.cols, i, values)
        self.accounts.forget(i)

    def unfollow(self, a: int, b: int) -> None:
        self.following[a].discard(b)
        self.followers[b].discard(a)


def evade(world: World, rng: Any, config: Any) -> dict[str, int]:
    """The gang notices the investigation: drop follows, rename, rotate IPs. Returns counts."""
    dropped = renamed = rotated = 0
    is_gang, ip_kind = world.cols["gang"], world.cols["ip_kind"]
    for i in world.gang:
        for j in sorted(world.following[i]):
            if is_gang[j] and rng.random() < config.evade_drop_follow:
                world.unfollow(i, j)
                dropped += 1
        if rng.random() < config.evade_rename:
            world.handles[i] = f"{rng.choice(FIRST)}.{rng.choice(LAST)}{rng.randrange(1000)}"
            world.write(i, handle_changed=0)
            renamed += 1
        if IP_KINDS[ip_kind[i]] == "hosting" and rng.random() < config.evade_rotate_ip:
            world.write(i, ip=world.next_ip, ip_kind=IP_KINDS.index("residential"))
            world.next_ip += 1
            rotated += 1
    honest = np.flatnonzero(~is_gang).tolist()
    for i in rng.sample(honest, min(len(honest), max(1, len(world.gang) // 2))):
        world.write(i, handle_changed=0)  # ordinary churn hides the renames
    return {"dropped_follows": dropped, "renamed": renamed, "rotated_ips": rotated}
