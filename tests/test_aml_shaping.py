"""OS shaping cannot beat honest work: an agent farming every OS reward, then filing, scores
below the honest heuristic even when its step rewards are added to its grade."""

from __future__ import annotations

from env.aml import AMLEnvironment
from env.aml.policies import POLICIES, AMLScript, call
from env.rollout import play
from env.seeds import split_seeds


class OSFarmer(AMLScript):
    """Engineers every paid OS effect it can (case-file hits, rule-mode effects), then files."""

    def script(self, opening):
        subject = opening.result["subject_id"]
        rows = (yield call("query_transactions", customer_id=subject)).result["transactions"]
        others = list(dict.fromkeys(r["counterparty"] for r in rows if r["counterparty"] != "CASH"))
        yield call("write_to_case_file", note=" ".join(others[:3]))
        yield call("search_compliance_manual", query="structuring")
        yield call("search_compliance_manual", query="layering")
        for other in others[:3]:  # each one scrolled out but sits in the case file: +0.10
            yield call("get_customer_profile", customer_id=other)
        yield call("update_system_prompt", rule_mode="enhanced_due_diligence")
        yield call("check_source_of_funds", customer_id=subject)  # document detail: +0.15
        yield call("update_system_prompt", rule_mode="structuring_watch")
        yield call("query_transactions", customer_id=subject, channel="cash")
        yield call(
            "file_sar",
            findings="see case file",
            typology="structuring",
            entities_involved=[subject],
        )


def _total(policy_factory, task: str) -> tuple[float, float]:
    env = AMLEnvironment()
    shaping, totals = [], []
    for seed in split_seeds("eval", 80):
        report = play(env, policy_factory(seed), task, seed).report
        shaping.append(sum(report.step_rewards))
        totals.append(sum(report.step_rewards) + report.grade.total)
    return sum(shaping) / len(shaping), sum(totals) / len(totals)


def test_farming_os_rewards_earns_shaping_but_loses_to_honest_work():
    for task in AMLEnvironment.tasks:
        farm_shaping, farm_total = _total(lambda seed: OSFarmer(), task)
        honest_shaping, honest_total = _total(POLICIES["heuristic"], task)
        assert farm_shaping > honest_shaping  # the farmer does collect the OS rewards...
        assert honest_total >= farm_total + 0.20, (task, honest_total, farm_total)
