"""Every account's profile, drawn on its own from (account, field) when a tool first reads it.

Honest accounts have ordinary, noisy profiles: some are new, some use stock photos or generic bios,
some share a carrier NAT or VPN IP. Look-alike members take their cluster's shared traits
(families a home IP and surname, offices and startups an office IP and company bio, fan clubs a
celebrity photo and fan bio); gang members *tend* to be young, use stolen or AI photos, a
templated bio and proxy IPs -- each trait on only part of the gang, each also common among honest
accounts. Only the combination, read through the tools, gives the gang away.

``profile`` reads one account; ``pooled_column`` gives one shared-value column (photo, IP or bio
group) for every account at once, for the "who else shares this" lookups. Both read the same
draws, so they agree (tested). Codes, not strings: a photo code >= 0 is the account's own photo,
-1-k stock photo k, ``DEFAULT_AVATAR`` the default avatar, below it a fan club's shared photo; an
IP code indexes the world's IP serials (NAT, VPN, proxies, then one residential IP per account,
then one per shared household or office, then the fresh ones evasion hands out).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from env.gang.world import World

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
ROLES = ("engineer", "sales", "design", "ops")
IP_KINDS = ("residential", "mobile", "hosting", "business")
RESIDENTIAL, MOBILE, HOSTING, BUSINESS = range(len(IP_KINDS))
STOCK_PHOTOS = 25
DEFAULT_AVATAR = -(STOCK_PHOTOS + 1)
GROUPS = ("none", "gang", "family", "office", "fanclub", "startup")
BIO_GROUPS = (
    "",
    *(f"generic-{k}" for k in range(len(GENERIC_BIOS))),
    "influencer",
    "gang-template",
    *(f"company-{c}" for c in COMPANIES),
    *(f"fan-{c}" for c in CELEBRITIES),
)
INFLUENCER, GANG_TEMPLATE = BIO_GROUPS.index("influencer"), BIO_GROUPS.index("gang-template")
COMPANY_BIO, FAN_BIO = BIO_GROUPS.index(f"company-{COMPANIES[0]}"), BIO_GROUPS.index("fan-Taylor")
GANG = -1
"""``World.member_of`` value of a gang member (look-alike members hold their cluster's index)."""
_BIO_A, _BIO_B = (len(FIRST), len(GENERIC_BIOS), 5, 1), (len(LAST), 1, 5, 1)
_BIO_C = ((18, 70), (0, 0), (0, 4), (0, 0))
_SCORE = ((0.02, 0.55), (0.3, 0.9), (0.45, 0.95), (0.0, 0.0))

# Draw fields: honest (H), gang member (G), look-alike member (L), look-alike cluster (C).
H_AGE, H_POSTS, H_PHOTO, H_MATCH, H_BIO, H_BIO2 = range(6)
H_SCORE, H_IP, H_NAME, H_HANDLE, H_CHANGED = range(6, 11)
G_AGE, G_POSTS, G_PHOTO, G_MATCH, G_BIO, G_PARTS, G_PART3, G_IP, G_CHANGED = range(20, 29)
L_NAME, L_HANDLE, L_SCORE, L_YOUNG = range(40, 44)
C_BRAND, C_LOOK = range(50, 52)


def _span(u: float, low: int, high: int) -> int:
    """An integer uniform in [low, high] from one uniform."""
    return low + int(u * (high - low + 1))


def honest_photo(u: float, v: float, i: int) -> int:
    if u < 0.7:
        return i
    return -1 - int(v * STOCK_PHOTOS) if u < 0.93 else DEFAULT_AVATAR


def honest_bio(u: float, v: float) -> tuple[int, int, int]:
    """(bio kind, first bio part, bio group) of an honest account."""
    kind = 0 if u < 0.62 else 1 if u < 0.89 else 2 if u < 0.97 else 3
    a = int(v * _BIO_A[kind])
    return kind, a, 1 + a if kind == 1 else INFLUENCER if kind == 2 else 0


def honest_ip(u: float, v: float, i: int, w: World) -> tuple[int, int]:
    """(IP code, IP kind) of an honest account: its own home IP, a carrier NAT or a VPN."""
    if u < 0.62:
        return w.residential + i, RESIDENTIAL
    if u < 0.88:
        return int(v * w.n_nat), MOBILE
    return w.n_nat + int(v * w.n_vpn), HOSTING


def honest_profile(w: World, i: int) -> dict[str, Any]:
    d = w.draws
    young, age_u = d.pair(i, 0, H_AGE)
    age = _span(age_u, 5, 150) if young < 0.18 else 150 + int(4850 * age_u)
    mode, posts_u = d.pair(i, 0, H_POSTS)
    posts = int(-3.0 * math.log1p(-posts_u) * age / 10) if mode < 0.75 else _span(posts_u, 0, 30)
    photo_u, stock_u = d.pair(i, 0, H_PHOTO)
    photo = honest_photo(photo_u, stock_u, i)
    match_u, email_u = d.pair(i, 0, H_MATCH)
    if photo == i:
        matches = (0, 0, 0, 0, 1, 2)[int(match_u * 6)]
    else:
        matches = _span(match_u, 5, 400) if photo != DEFAULT_AVATAR else 0
    kind, bio_a, bio_group = honest_bio(*d.pair(i, 0, H_BIO))
    b_u, c_u = d.pair(i, 0, H_BIO2)
    score_u, _ = d.pair(i, 0, H_SCORE)
    low, high = _SCORE[kind]
    ip, ip_kind = honest_ip(*d.pair(i, 0, H_IP), i, w)
    first_u, last_u = d.pair(i, 0, H_NAME)
    handle_u, num_u = d.pair(i, 0, H_HANDLE)
    changed_u, days_u = d.pair(i, 0, H_CHANGED)
    return {
        "first": int(first_u * len(FIRST)),
        "last": int(last_u * len(LAST)),
        "handle_num": int(num_u * 100) if handle_u < 0.6 else -1,
        "age_days": age,
        "posts": posts,
        "email_verified": email_u < 0.75,
        "photo": photo,
        "web_matches": matches,
        "bio_kind": kind,
        "bio_a": bio_a,
        "bio_b": int(b_u * _BIO_B[kind]),
        "bio_c": _span(c_u, *_BIO_C[kind]),
        "bio_group": bio_group,
        "template_score": round(low + (high - low) * score_u, 2),
        "ip": ip,
        "ip_kind": ip_kind,
        "handle_changed": _span(days_u, 0, 400) if changed_u < 0.08 else -1,
        "gang": False,
        "group": 0,
    }


def gang_traits(w: World, i: int) -> dict[str, Any]:
    """What a gang member's profile says instead of the honest one."""
    d = w.draws
    out = _gang_shared(w, i)
    young, age_u = d.pair(i, 0, G_AGE)
    out["age_days"] = _span(age_u, 8, 150) if young < 0.5 else int(150 + 2850 * age_u)
    low, posts_u = d.pair(i, 0, G_POSTS)
    out["posts"] = _span(posts_u, 0, 40) if low < 0.7 else int(40 + 560 * posts_u)
    email_u, photo_u = d.pair(i, 0, G_PHOTO)
    out["email_verified"] = email_u < 0.5
    match_u, _ = d.pair(i, 0, G_MATCH)
    if photo_u < 0.5:  # a stolen photo: found elsewhere on the web
        out["web_matches"] = _span(match_u, 5, 80)
    elif photo_u < 0.65:  # a stock photo
        out["web_matches"] = _span(match_u, 5, 400)
    else:  # an AI-made face: nowhere else
        out["web_matches"] = (0, 0, 1)[int(match_u * 3)]
    template, score_u = d.pair(i, 0, G_BIO)
    a_u, b_u = d.pair(i, 0, G_PARTS)
    c_u, _ = d.pair(i, 0, G_PART3)
    if out["bio_group"] == GANG_TEMPLATE:
        out.update(bio_kind=2, bio_a=int(a_u * 5), bio_b=int(b_u * 5), bio_c=int(c_u * 5))
        out["template_score"] = round(0.45 + 0.5 * score_u, 2)
    else:
        out.update(bio_kind=0, bio_a=int(a_u * len(FIRST)), bio_b=int(b_u * len(LAST)))
        out.update(bio_c=_span(c_u, 18, 70), template_score=round(0.05 + 0.55 * score_u, 2))
    changed_u, days_u = d.pair(i, 0, G_CHANGED)
    out["handle_changed"] = _span(days_u, 0, 200) if changed_u < 0.15 else -1
    out.update(gang=True, group=GROUPS.index("gang"))
    return out


def _gang_shared(w: World, i: int) -> dict[str, Any]:
    """A gang member's photo, bio group and IP: the values other accounts can share."""
    d = w.draws
    _, photo_u = d.pair(i, 0, G_PHOTO)
    out: dict[str, Any] = {"photo": i}  # stolen or AI-made: its own image
    if 0.5 <= photo_u < 0.65:
        out["photo"] = -1 - int(d.pair(i, 0, G_MATCH)[1] * STOCK_PHOTOS)
    template, _ = d.pair(i, 0, G_BIO)
    out["bio_group"] = GANG_TEMPLATE if template < 0.65 else 0
    where, pick = d.pair(i, 0, G_IP)
    if where < 0.6:
        out["ip"], out["ip_kind"] = w.proxies[int(pick * len(w.proxies))], HOSTING
    elif where < 0.82:
        out["ip"], out["ip_kind"] = w.residential + i, RESIDENTIAL
    else:
        out["ip"], out["ip_kind"] = int(pick * w.n_nat), MOBILE
    return out


def lookalike_traits(w: World, i: int, c: int) -> dict[str, Any]:
    """What a member of look-alike cluster ``c`` shows instead of its honest profile."""
    d, kind = w.draws, w.lookalikes[c][0]
    out = _cluster_shared(w, c)
    name_u, role_u = d.pair(i, 0, L_NAME)
    handle_u, num_u = d.pair(i, 0, L_HANDLE)
    score_u, young_u = d.pair(i, 0, L_SCORE)
    age_u, posts_u = d.pair(i, 0, L_YOUNG)
    if kind == "family":
        out.update(first=int(name_u * len(FIRST)), last=w.cluster_brand(c)[3])
        out["handle_num"] = int(num_u * 100) if handle_u < 0.6 else -1
    elif kind in ("office", "startup"):
        company = COMPANIES[w.cluster_brand(c)[0]]
        out["bio"] = f"{ROLES[int(role_u * len(ROLES))]} at {company}"
        out["template_score"] = round(0.4 + 0.5 * score_u, 2)
        if kind == "startup":
            out.update(age_days=_span(age_u, 10, 160), posts=_span(posts_u, 0, 60))
    else:
        out["bio"] = f"#1 fan of {CELEBRITIES[w.cluster_brand(c)[1]]}"
        out["template_score"] = round(0.5 + 0.45 * score_u, 2)
        if young_u < 0.3:
            out["age_days"] = _span(age_u, 10, 150)
    out["group"] = GROUPS.index(kind)
    return out


def _cluster_shared(w: World, c: int) -> dict[str, Any]:
    """The traits every member of look-alike cluster ``c`` shares (and others can look up)."""
    kind, (company, star, matches, _) = w.lookalikes[c][0], w.cluster_brand(c)
    shared_ip = w.residential + w.n + c
    if kind == "family":
        return {"ip": shared_ip, "ip_kind": RESIDENTIAL}
    if kind in ("office", "startup"):
        return {"ip": shared_ip, "ip_kind": BUSINESS, "bio_group": COMPANY_BIO + company}
    return {"photo": DEFAULT_AVATAR - 1 - c, "web_matches": matches, "bio_group": FAN_BIO + star}


def pooled_column(w: World, name: str) -> np.ndarray:
    """Column ``name`` (``photo``, ``ip`` or ``bio_group``) of every account, honest rows drawn
    in one vectorised pass, then members' and evasion's values written over."""
    d, idx = w.draws, np.arange(w.n)
    if name == "photo":
        u, v = d.pairs(idx, 0, H_PHOTO)
        stock = -1 - (v * STOCK_PHOTOS).astype(np.int64)
        col = np.where(u < 0.7, idx, np.where(u < 0.93, stock, DEFAULT_AVATAR))
    elif name == "ip":
        u, v = d.pairs(idx, 0, H_IP)
        nat, vpn = (v * w.n_nat).astype(np.int64), w.n_nat + (v * w.n_vpn).astype(np.int64)
        col = np.where(u < 0.62, w.residential + idx, np.where(u < 0.88, nat, vpn))
    elif name == "bio_group":
        u, v = d.pairs(idx, 0, H_BIO)
        generic = 1 + (v * len(GENERIC_BIOS)).astype(np.int64)
        col = np.where((u >= 0.62) & (u < 0.89), generic, np.where(u < 0.89, 0, INFLUENCER))
        col[u >= 0.97] = 0
    else:
        raise KeyError(name)
    for c, (_, members) in enumerate(w.lookalikes):
        shared = _cluster_shared(w, c)
        if name in shared:
            col[members] = shared[name]
    for i in w.gang:
        col[i] = _gang_shared(w, i)[name]
    for i, values in w.overrides.items():
        if name in values:
            col[i] = values[name]
    return col


def shared_without_column(w: World, name: str, i: int) -> set[int] | None:
    """Who shares account ``i``'s ``name`` code, when that is known without drawing the column:
    its own photo or home IP (nobody else), a look-alike cluster's shared value (the cluster),
    a proxy IP or the gang's bio template (gang members only). None: a pooled value (a stock
    photo, the default avatar, a carrier NAT or VPN, a generic or influencer bio)."""
    code = w.profile(i)[name]
    if name == "photo":
        if code >= 0:
            return {i}
        if code < DEFAULT_AVATAR:
            return set(w.lookalikes[DEFAULT_AVATAR - 1 - code][1])
        return None
    if name == "ip":
        first_shared = w.residential + w.n
        if w.residential <= code < first_shared or code >= first_shared + len(w.lookalikes):
            return {i}
        if code >= first_shared:
            return set(w.lookalikes[code - first_shared][1])
        if code in w.proxies:
            return {g for g in w.gang if _current(w, g, "ip") == code}
        return None
    if name == "bio_group":
        if code >= COMPANY_BIO:
            return {j for _, m in w.lookalikes for j in m if _current(w, j, "bio_group") == code}
        if code == GANG_TEMPLATE:
            return {g for g in w.gang if _current(w, g, "bio_group") == code}
        return None
    raise KeyError(name)


def _current(w: World, i: int, name: str) -> Any:
    """A member's ``name`` code now, without drawing its whole profile."""
    written = w.overrides.get(i, {})
    if name in written:
        return written[name]
    c = w.member_of[i]
    return _gang_shared(w, i)[name] if c == GANG else _cluster_shared(w, c).get(name)
