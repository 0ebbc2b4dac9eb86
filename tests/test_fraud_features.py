"""The reference's leak is gone: no observed feature or risk score separates the ring.

The reference system's risk score named the fraudsters (freezing the top risk scored 0.86 against
an oracle's 0.875). Here every account feature in the defender's opening view, the vendor risk
score included, separates ring accounts from legitimate ones with ROC AUC <= 0.80 over many
seeds, and a policy that freezes the top-risk accounts scores far below the honest heuristic.
"""

from __future__ import annotations

import statistics

from sklearn.metrics import roc_auc_score

from env.fraud.environment import FraudEnvironment
from env.fraud.policies import POLICIES, _RolePolicy
from env.rollout import play
from env.seeds import split_seeds

from conftest import call

FEATURES = ("age_days", "devices", "refund_rate", "night_share", "avg_amount", "risk_score")


def test_no_single_opening_feature_separates_the_ring():
    env = FraudEnvironment()
    labels: list[int] = []
    columns: dict[str, list[float]] = {k: [] for k in FEATURES}
    for seed in split_seeds("eval", 400):
        obs = env.reset(seed=seed, task="defender")
        ring = set(env.reveal()["ring_accounts"])
        if not ring:
            continue
        for account in obs.result["accounts"]:
            labels.append(int(account["id"] in ring))
            for key in FEATURES:
                columns[key].append(account[key])
    assert 0.15 < statistics.mean(labels) < 0.5
    for key, values in columns.items():
        auc = roc_auc_score(labels, values)
        assert max(auc, 1 - auc) <= 0.80, (key, auc)
        assert max(auc, 1 - auc) >= 0.55, f"{key} should still carry a weak signal"


def test_merchant_features_do_not_name_the_colluding_merchant():
    env = FraudEnvironment(family="merchant_collusion")
    labels: list[int] = []
    columns: dict[str, list[float]] = {"risk_score": [], "refund_rate": []}
    for seed in split_seeds("eval", 200):
        obs = env.reset(seed=seed, task="defender")
        colluder = env.reveal()["colluding_merchant"]
        if colluder is None:
            continue
        for merchant in obs.result["merchants"]:
            labels.append(int(merchant["id"] == colluder))
            for key in columns:
                columns[key].append(merchant[key])
    for key, values in columns.items():
        auc = roc_auc_score(labels, values)
        assert max(auc, 1 - auc) <= 0.80, (key, auc)


class FreezeTopRisk(_RolePolicy):
    """The reference's winning shortcut: freeze the highest risk scores, then accuse."""

    def start(self, env, observation):
        accounts = observation.result.get("accounts", [])
        ranked = sorted(accounts, key=lambda a: -a["risk_score"])
        self.queue = [a["id"] for a in ranked[:3]]

    def defend(self, observation):
        if self.queue:
            return call("freeze", account_id=self.queue.pop(0))
        return call("close_case", verdict="fraud")


def test_freezing_the_top_risk_scores_is_far_below_honest_play():
    env = FraudEnvironment()
    seeds = split_seeds("eval", 80)
    top = [play(env, FreezeTopRisk(s), "defender", s).report.grade.total for s in seeds]
    honest = [play(env, POLICIES["heuristic"](s), "defender", s).report.grade.total for s in seeds]
    assert statistics.mean(top) <= statistics.mean(honest) - 0.25


def test_opening_features_keep_their_types_ranges_and_digits():
    """Each opening feature has the type, range and rounding the tools print (an int age and
    device count, rates to 3 digits, amounts to cents), whatever the draws."""
    env, bounds = FraudEnvironment(), {"refund_rate": 0.9, "night_share": 0.95}
    for seed in range(60):
        for account in env.reset(seed=seed, task="defender").result["accounts"]:
            assert type(account["age_days"]) is int and 1 <= account["age_days"] <= 5000
            assert type(account["devices"]) is int and 1 <= account["devices"] <= 9
            for key in ("refund_rate", "night_share", "risk_score"):
                value = account[key]
                assert 0.0 <= value <= bounds.get(key, 1.0) and round(value, 3) == value, key
            assert (
                account["avg_amount"] > 0
                and round(account["avg_amount"], 2) == account["avg_amount"]
            )
