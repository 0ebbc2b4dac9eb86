"""The hidden follower graph: honest communities, gang-like honest clusters and (maybe) a gang.

Honest accounts live in friend groups with ordinary, noisy profiles: some are new, some use stock
photos or generic bios, some share a carrier NAT or VPN IP. Look-alike clusters make the hard part:
families share a home IP and follow each other densely, offices and startups share an office IP and a
company bio (startups are also young), fan clubs share a celebrity photo and a fan bio. The gang is a
dense mutual-follow clique whose members *tend* to be young, use stolen or AI photos, a templated
bio and proxy IPs -- each trait on only part of the gang, each trait also common among honest
accounts. Only the combination, read through the tools, gives the gang away.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from env.gang.config import GangConfig, TaskSettings

FIRST = [
    "ana",
    "maria",
    "li",
    "wei",
    "omar",
    "sara",
    "john",
    "aisha",
    "ken",
    "yuki",
    "lucas",
    "emma",
    "noah",
    "mia",
    "liam",
    "zoe",
    "raj",
    "nina",
    "tom",
    "eva",
    "ivan",
    "olga",
    "pablo",
    "lena",
    "marco",
    "chloe",
    "amir",
    "dana",
    "felix",
    "iris",
]
LAST = [
    "smith",
    "garcia",
    "chen",
    "khan",
    "silva",
    "novak",
    "rossi",
    "kim",
    "ito",
    "muller",
    "brown",
    "lopez",
    "patel",
    "nguyen",
    "costa",
    "berg",
    "haas",
    "kowal",
    "sato",
    "dubois",
]
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


@dataclass(slots=True)
class Account:
    """One account; ``gang`` and ``group`` are hidden truth."""

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


@dataclass
class World:
    """The whole hidden graph of one episode."""

    accounts: list[Account]
    following: list[set[int]]
    followers: list[set[int]]
    gang: list[int]
    lookalikes: list[tuple[str, list[int]]]
    alerts: list[int]
    sample: list[int]
    by_id: dict[str, int] = field(default_factory=dict)
    by_ip: dict[str, set[int]] = field(default_factory=dict)
    by_photo: dict[str, set[int]] = field(default_factory=dict)
    by_bio: dict[str, set[int]] = field(default_factory=dict)

    def index(self) -> None:
        """(Re)build the lookup tables the tools read."""
        self.by_id = {a.id: i for i, a in enumerate(self.accounts)}
        self.by_ip, self.by_photo, self.by_bio = {}, {}, {}
        for i, a in enumerate(self.accounts):
            self.by_ip.setdefault(a.ip, set()).add(i)
            self.by_photo.setdefault(a.photo, set()).add(i)
            if a.bio_group:
                self.by_bio.setdefault(a.bio_group, set()).add(i)

    def follow(self, a: int, b: int) -> None:
        if a != b:
            self.following[a].add(b)
            self.followers[b].add(a)

    def unfollow(self, a: int, b: int) -> None:
        self.following[a].discard(b)
        self.followers[b].discard(a)


class _Gen:
    """One generation pass; every draw comes from the episode's ``rng``."""

    def __init__(self, rng: random.Random, config: GangConfig, task: TaskSettings) -> None:
        self.rng, self.config, self.task = rng, config, task
        self.n = task.accounts
        self.counter = 0

    def label(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.rng.getrandbits(24):06x}{self.counter % 10}"

    def handle(self, last: str | None = None) -> str:
        r = self.rng
        return f"{r.choice(FIRST)}_{last or r.choice(LAST)}{r.randrange(100) if r.random() < 0.6 else ''}"

    def honest(self, ident: str, nat_pools: list[str], vpns: list[str]) -> Account:
        r = self.rng
        young = r.random() < 0.18
        age = r.randint(5, 150) if young else int(r.uniform(150, 5000))
        posts = int(r.expovariate(1 / 3) * age / 10) if r.random() < 0.75 else r.randint(0, 30)
        u = r.random()
        if u < 0.7:
            photo, matches = self.label("img"), r.choice((0, 0, 0, 0, 1, 2))
        elif u < 0.93:
            photo, matches = f"stock-{r.randrange(25)}", r.randint(5, 400)
        else:
            photo, matches = "default-avatar", 0
        v = r.random()
        if v < 0.62:
            bio, group, score = self.unique_bio(), "", r.uniform(0.02, 0.55)
        elif v < 0.89:
            k = r.randrange(len(GENERIC_BIOS))
            bio, group, score = GENERIC_BIOS[k], f"generic-{k}", r.uniform(0.3, 0.9)
        elif v < 0.97:  # would-be influencers write the same spammy bios as the gang
            bio = " ".join(r.choice(part) for part in GANG_BIO_PARTS)
            group, score = "influencer", r.uniform(0.45, 0.95)
        else:
            bio, group, score = "", "", 0.0
        w = r.random()
        if w < 0.62:
            ip, kind = self.label("ip"), "residential"
        elif w < 0.88:
            ip, kind = r.choice(nat_pools), "mobile"
        else:
            ip, kind = r.choice(vpns), "hosting"
        changed = r.randint(0, 400) if r.random() < 0.08 else None
        return Account(
            ident, self.handle(), age, posts, r.random() < 0.75, photo, matches, bio, group,
            round(score, 2), ip, kind, handle_changed=changed,
        )  # fmt: skip

    def unique_bio(self) -> str:
        r = self.rng
        return f"{r.choice(FIRST).title()} from {r.choice(LAST).title()}ville, {r.randint(18, 70)}"

    def gang_member(self, acc: Account, proxies: list[str], nat_pools: list[str]) -> None:
        r = self.rng
        acc.gang, acc.group = True, "gang"
        acc.age_days = r.randint(8, 150) if r.random() < 0.5 else int(r.uniform(150, 3000))
        acc.posts = r.randint(0, 40) if r.random() < 0.7 else int(r.uniform(40, 600))
        acc.email_verified = r.random() < 0.5
        u = r.random()
        if u < 0.5:
            acc.photo, acc.web_matches = self.label("img"), r.randint(5, 80)
        elif u < 0.65:
            acc.photo, acc.web_matches = f"stock-{r.randrange(25)}", r.randint(5, 400)
        else:
            acc.photo, acc.web_matches = self.label("img"), r.choice((0, 0, 1))
        if r.random() < 0.65:
            acc.bio = " ".join(r.choice(part) for part in GANG_BIO_PARTS)
            acc.bio_group, acc.template_score = "gang-template", round(r.uniform(0.45, 0.95), 2)
        else:
            acc.bio, acc.bio_group = self.unique_bio(), ""
            acc.template_score = round(r.uniform(0.05, 0.6), 2)
        w = r.random()
        if w < 0.6:
            acc.ip, acc.ip_kind = r.choice(proxies), "hosting"
        elif w < 0.82:
            acc.ip, acc.ip_kind = self.label("ip"), "residential"
        else:
            acc.ip, acc.ip_kind = r.choice(nat_pools), "mobile"
        acc.handle_changed = r.randint(0, 200) if r.random() < 0.15 else None

    def lookalike(self, kind: str, members: list[int], world: World) -> None:
        r, accs = self.rng, world.accounts
        company = r.choice(COMPANIES)
        star = r.choice(CELEBRITIES)
        shared_ip = self.label("ip")
        photo, matches = f"fan-{star}-{r.randrange(99)}", r.randint(50, 900)
        surname = r.choice(LAST)
        density = {"family": 0.9, "office": 0.5, "startup": 0.7, "fanclub": 0.6}[kind]
        for i in members:
            a = accs[i]
            a.group = f"{kind}"
            if kind == "family":
                a.ip, a.ip_kind = shared_ip, "residential"
                a.handle = self.handle(surname)
            elif kind in ("office", "startup"):
                a.ip, a.ip_kind = shared_ip, "business"
                a.bio = f"{r.choice(('engineer', 'sales', 'design', 'ops'))} at {company}"
                a.bio_group, a.template_score = f"company-{company}", round(r.uniform(0.4, 0.9), 2)
                if kind == "startup":
                    a.age_days, a.posts = r.randint(10, 160), r.randint(0, 60)
            else:
                a.photo, a.web_matches = photo, matches
                a.bio, a.bio_group = f"#1 fan of {star}", f"fan-{star}"
                a.template_score = round(r.uniform(0.5, 0.95), 2)
                if r.random() < 0.3:
                    a.age_days = r.randint(10, 150)
            for j in members:
                if i != j and r.random() < density:
                    world.follow(i, j)


def build_world(task_name: str, rng: random.Random, config: GangConfig) -> World:
    """Build one episode's world for the task ``task_name`` from ``rng`` alone."""
    task = config.tasks[task_name]
    g = _Gen(rng, config, task)
    n = task.accounts
    ids = [f"u{x:05d}" for x in rng.sample(range(10000, 100000), n)]
    nat_pools = [g.label("ip") for _ in range(max(2, n // 12))]
    vpns = [g.label("ip") for _ in range(max(2, n // 40))]
    proxies = [g.label("ip") for _ in range(rng.randint(2, 3))]
    accounts = [g.honest(ids[i], nat_pools, vpns) for i in range(n)]
    world = World(accounts, [set() for _ in range(n)], [set() for _ in range(n)], [], [], [], [])
    clean = rng.random() < config.clean_share
    size = 0 if clean else rng.randint(task.gang_min, task.gang_max)
    order = list(range(n))
    rng.shuffle(order)
    gang, honest = sorted(order[:size]), order[size:]
    # Honest friend groups: sparse follows, about half returned.
    start = 0
    while start < len(honest):
        grp = honest[start : start + rng.randint(4, 25)]
        start += len(grp)
        for i in grp:
            for j in grp:
                if i != j and rng.random() < 0.3:
                    world.follow(i, j)
                    if rng.random() < 0.5:
                        world.follow(j, i)
    popular = honest[: max(3, n // 50)]
    for i in range(n):
        for p in rng.sample(popular, rng.randint(1, min(4, len(popular)))):
            world.follow(i, p)
        for _ in range(rng.randint(0, 3)):
            world.follow(i, rng.randrange(n))
    # Look-alike honest clusters.
    kinds = ("family", "office", "fanclub", "startup")
    free = [i for i in honest[len(popular) :]]
    rng.shuffle(free)
    for c in range(task.lookalikes):
        kind = kinds[(c + rng.randrange(4)) % 4]
        sz = {"family": (3, 6), "office": (6, 12), "fanclub": (5, 10), "startup": (6, 10)}[kind]
        k = rng.randint(*sz)
        members, free = free[:k], free[k:]
        if len(members) >= 3:
            g.lookalike(kind, members, world)
            world.lookalikes.append((kind, members))
    # The gang: a dense clique with camouflage follows and a few honest follow-backs.
    for i in gang:
        g.gang_member(accounts[i], proxies, nat_pools)
        for j in gang:
            if i != j and rng.random() < config.gang_follow_p:
                world.follow(i, j)
        for _ in range(rng.randint(1, 3)):
            world.follow(i, rng.choice(honest))
        for _ in range(rng.randint(0, 2)):
            world.follow(rng.choice(honest), i)
    world.gang = gang
    # Alerts: some gang members plus honest decoys (lookalike members first); reasons say nothing.
    decoy_pool = [i for _, m in world.lookalikes for i in m] or honest
    decoys = rng.sample(decoy_pool, min(len(decoy_pool), task.decoy_alerts))
    if clean:  # as many alerts as a gang case shows, or their count would give the verdict away
        taken = set(decoys)
        others = [i for i in honest if i not in taken]
        decoys += rng.sample(others, min(len(others), task.gang_alerts))
    alerts = (rng.sample(gang, min(len(gang), task.gang_alerts)) if gang else []) + decoys
    world.alerts = sorted(set(alerts), key=lambda i: ids[i])
    alerted = set(world.alerts)
    rest = [i for i in range(n) if i not in alerted]
    world.sample = sorted(rng.sample(rest, min(task.sample, len(rest))), key=lambda i: ids[i])
    world.index()
    return world


def evade(world: World, rng: random.Random, config: GangConfig, gen_label) -> dict[str, int]:
    """The gang notices the investigation: drop follows, rename, rotate IPs. Returns counts."""
    dropped = renamed = rotated = 0
    for i in world.gang:
        for j in sorted(world.following[i]):
            if world.accounts[j].gang and rng.random() < config.evade_drop_follow:
                world.unfollow(i, j)
                dropped += 1
        acc = world.accounts[i]
        if rng.random() < config.evade_rename:
            acc.handle = f"{rng.choice(FIRST)}.{rng.choice(LAST)}{rng.randrange(1000)}"
            acc.handle_changed = 0
            renamed += 1
        if acc.ip_kind == "hosting" and rng.random() < config.evade_rotate_ip:
            acc.ip, acc.ip_kind = gen_label(), "residential"
            rotated += 1
    honest = [i for i, a in enumerate(world.accounts) if not a.gang]
    for i in rng.sample(honest, min(len(honest), max(1, len(world.gang) // 2))):
        world.accounts[i].handle_changed = 0  # ordinary churn hides the renames
    world.index()
    return {"dropped_follows": dropped, "renamed": renamed, "rotated_ips": rotated}
