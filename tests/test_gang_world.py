"""The gang world: fast, seeded, small openings, real evasion, and no single feature gives it away."""

from __future__ import annotations

import time

from sklearn.metrics import roc_auc_score

from env.gang.environment import GangEnvironment
from env.seeds import split_seeds

from conftest import call


def test_hard_reset_is_fast():
    env = GangEnvironment()
    env.reset(seed=0, task="hard")
    best = min(_timed(lambda s=s: env.reset(seed=s, task="hard")) for s in range(1, 6))
    assert best < 0.05, f"hard reset took {best * 1000:.1f} ms"


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def test_same_seed_same_world_and_opening():
    a, b = GangEnvironment(), GangEnvironment()
    for task in GangEnvironment.tasks:
        assert (
            a.reset(seed=7, task=task).model_dump_json()
            == b.reset(seed=7, task=task).model_dump_json()
        )
        assert a.reveal() == b.reveal()
    assert a.reset(seed=8, task="hard").model_dump_json() != b.reset(seed=7, task="hard")


def test_opening_is_small_and_step_limits_follow_the_task():
    env = GangEnvironment()
    for task, (accounts, steps) in {
        "easy": (50, 30),
        "medium": (200, 50),
        "hard": (1000, 80),
    }.items():
        obs = env.reset(seed=3, task=task)
        assert obs.result["accounts_total"] == accounts and obs.steps_left == steps
        listed = len(obs.result["alerts"]) + len(obs.result["recently_active"])
        assert listed <= 20 and len(obs.model_dump_json()) < 2500


def test_gang_size_varies_and_clean_episodes_exist():
    env = GangEnvironment()
    sizes = []
    for seed in range(60):
        env.reset(seed=seed, task="medium")
        sizes.append(len(env.reveal()["gang"]))
    assert 0 in sizes and len(set(sizes) - {0}) >= 3
    assert all(8 <= s <= 12 for s in sizes if s)


def test_alert_count_is_the_same_with_and_without_a_gang():
    """The opening's alert list must not give the verdict away by its length."""
    env = GangEnvironment()
    for task in ("easy", "medium", "hard"):
        counts: dict[bool, set[int]] = {True: set(), False: set()}
        for seed in split_seeds("train", 120):
            opening = env.reset(seed=seed, task=task)
            counts[bool(env.reveal()["gang"])].add(len(opening.result["alerts"]))
        assert counts[True] and counts[False], task
        assert counts[True] == counts[False], (task, counts)


def test_flag_marks_exactly_one_account():
    env = GangEnvironment()
    obs = env.reset(seed=11, task="medium")
    target = obs.result["alerts"][0]["account_id"]
    out = env.step(call("flag", account_id=target))
    assert out.error is None and len(env.flagged) == 1
    again = env.step(call("flag", account_id=target))
    assert again.error and len(env.flagged) == 1
    missing = env.step(call("inspect", account_id="nobody"))
    assert missing.error and env.internal_errors == 0


def test_gang_evades_mid_episode_with_visible_effects():
    env = GangEnvironment()
    seed = next(s for s in range(50) if env.reset(seed=s, task="medium") and env.reveal()["gang"])
    env.reset(seed=seed, task="medium")
    gang = env.reveal()["gang"]
    before = {x: env.investigate_network(x)["mutual_count"] for x in gang}
    handles = {x: env.inspect(x)["handle"] for x in gang}
    ips = {x: env.check_ip(x)["ip"] for x in gang}
    for _ in range(env.settings.evade_at):
        env.step(call("get_policy"))
    env.step(call("inspect", account_id=gang[0]))
    evasion = env.reveal()["evasion"]
    assert evasion["dropped_follows"] > 0
    after = {x: env.investigate_network(x)["mutual_count"] for x in gang}
    assert sum(after.values()) < sum(before.values())
    renamed = [x for x in gang if env.inspect(x)["handle"] != handles[x]]
    assert len(renamed) == evasion["renamed"]
    moved = [x for x in gang if env.check_ip(x)["ip"] != ips[x]]
    assert len(moved) == evasion["rotated_ips"]
    easy = GangEnvironment()
    easy.reset(seed=seed, task="easy")
    for _ in range(25):
        easy.step(call("get_policy"))
    assert easy.reveal()["evasion"] == {}


def _features(env: GangEnvironment, account: str) -> dict[str, float]:
    p, n = env.inspect(account), env.investigate_network(account)
    im, b, ip = env.reverse_image_search(account), env.analyze_bio(account), env.check_ip(account)
    return {
        "age_days": p["age_days"],
        "posts": p["posts"],
        "followers": p["followers"],
        "following": p["following"],
        "email_verified": float(p["email_verified"]),
        "handle_changed": float(p["handle_changed_days_ago"] is not None),
        "posts_per_day": p["posts"] / p["age_days"],
        "follow_ratio": p["followers"] / (1 + p["following"]),
        "mutual_count": n["mutual_count"],
        "web_matches": im["web_matches"],
        "same_photo": len(im["same_photo_accounts"]),
        "template_score": b["template_score"],
        "similar_bios": len(b["similar_bios"]),
        "ip_shared": ip["shared_count"],
        "ip_hosting": float(ip["ip_type"] == "hosting"),
        "ip_residential": float(ip["ip_type"] == "residential"),
        "spam_bio": float(any(w in b["bio"] for w in ("DM for", "link in bio", "follow back"))),
    }


def test_no_single_observed_feature_separates_gang_from_honest():
    env = GangEnvironment()
    rows: dict[str, list[float]] = {}
    labels: list[bool] = []
    for task, n in (("medium", 80), ("hard", 8)):
        for seed in split_seeds("eval", n):
            env.reset(seed=seed, task=task)
            gang = set(env.reveal()["gang"])
            for account in env.world.accounts:
                for name, value in _features(env, account.id).items():
                    rows.setdefault(name, []).append(float(value))
                labels.append(account.id in gang)
    assert sum(labels) > 200
    aucs = {name: roc_auc_score(labels, vals) for name, vals in rows.items()}
    best = max(max(a, 1 - a) for a in aucs.values())
    assert best <= 0.80, aucs
    assert best >= 0.6  # the signals are weak, not absent


def test_explicit_step_limit_overrides_the_task_limit():
    assert GangEnvironment(max_steps=10).reset(seed=1, task="hard").steps_left == 10
    assert GangEnvironment(clean_share=1.0).reset(seed=1, task="hard").result["alerts"]
    env = GangEnvironment(clean_share=1.0)
    env.reset(seed=4, task="medium")
    assert env.reveal()["gang"] == [] and env.reveal()["clean"]
