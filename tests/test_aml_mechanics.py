"""AML mechanics: memory and page faults, the case file, async traces, rule modes, rewards, grade."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from env.aml import AMLEnvironment

from conftest import call


def case(category: str, task: str = "easy", where=lambda env: True) -> AMLEnvironment:
    env = AMLEnvironment()
    for seed in range(2000):
        env.reset(seed=seed, task=task)
        if env.world.category == category and where(env):
            return env
    raise AssertionError(f"no {category} case found")


def test_all_18_tools_with_typed_arguments():
    specs = AMLEnvironment.tool_specs_by_name()
    assert len(specs) == 18
    assert {n for n, s in specs.items() if s.terminal} == {"file_sar", "close_alert"}
    sar = specs["file_sar"].parameters["properties"]
    assert len(sar["typology"]["enum"]) == 5 and sar["entities_involved"]["type"] == "array"
    modes = specs["update_system_prompt"].parameters["properties"]["rule_mode"]["enum"]
    assert "enhanced_due_diligence" in modes and len(modes) == 5


def test_evicted_id_is_a_page_fault_unless_the_case_file_kept_it():
    env = case("layering")
    subj = env.world.subject
    txns = env.step(call("query_transactions", customer_id=subj)).result["transactions"]
    first, second = [t["id"] for t in txns if t["channel"] == "wire"][:2]
    env.step(call("write_to_case_file", note=f"keep {first}"))
    env.step(call("search_compliance_manual", query="layering"))
    env.step(call("assess_risk", customer_id=subj))  # the transaction list has scrolled out
    faulted = env.step(call("request_wire_trace", transaction_id=second))
    assert faulted.result["memory"]["page_faults"] == [second] and env.memory.faults == 1
    cost = env.config.action_cost
    assert faulted.reward == pytest.approx(cost + env.config.page_fault_penalty)
    kept = env.step(call("request_wire_trace", transaction_id=first))
    assert kept.result["memory"]["served_from_case_file"] == [first]
    assert env.memory.avoided == 1 and env.memory.faults == 1
    assert kept.reward == pytest.approx(cost + env.config.case_file_reward)
    again = env.step(call("request_wire_trace", transaction_id=first))  # resident now
    assert "memory" not in again.result and env.memory.avoided == 1


def test_case_file_pays_only_when_it_serves_an_evicted_id_and_at_most_three_times():
    env = case("mule_ring")
    subj = env.world.subject
    overlap = env.step(call("check_device_overlap", customer_id=subj)).result
    mules = [s["customer_id"] for d in overlap["devices"] for s in d["shared_with"]]
    note = env.step(call("write_to_case_file", note=" ".join(mules)))
    assert note.reward == pytest.approx(env.config.action_cost)  # writing alone earns nothing
    env.step(call("search_compliance_manual", query="mule"))
    env.step(call("search_compliance_manual", query="device"))
    paid = env.step(call("get_customer_profile", customer_id=mules[0]))
    assert paid.reward == pytest.approx(env.config.action_cost + env.config.case_file_reward)
    assert paid.result["memory"]["served_from_case_file"] == [mules[0]]


def test_wire_trace_before_eta_is_a_timeout_and_after_eta_completes():
    env = case("layering")
    wire = next(t for t in env.world.txns.values() if t.id in env.world.traces)
    job = env.step(call("request_wire_trace", transaction_id=wire.id)).result
    assert 2 <= job["eta_steps"] <= 4
    early = env.step(call("retrieve_async_result", job_id=job["job_id"]))
    assert early.result["status"] == "pending"
    assert early.reward == pytest.approx(env.config.action_cost + env.config.async_timeout_penalty)
    for _ in range(job["eta_steps"]):
        env.step(call("search_compliance_manual", query="layering"))
    done = env.step(call("retrieve_async_result", job_id=job["job_id"]))
    assert done.result["status"] == "done" and done.result["reference"].startswith("WT-")
    assert env.os.timeouts == 1 and env.os.traces_completed == 1


def test_enhanced_due_diligence_reveals_the_ownership_chain_that_standard_withholds():
    env = case("sanctions_evasion", "hard", lambda e: len(e.world.entities) >= 5)
    company = env.world.parties[env.world.subject].company
    standard = env.step(call("query_beneficial_ownership", company_id=company)).result
    assert not standard["complete"] and "withheld" in standard["note"]
    assert not any(layer["owner_type"] == "person" for layer in standard["layers"])
    mode = env.step(call("update_system_prompt", rule_mode="enhanced_due_diligence"))
    assert mode.reward == pytest.approx(env.config.action_cost)  # paid on effect, not on call
    full = env.step(call("query_beneficial_ownership", company_id=env.world.subject))
    assert full.result["complete"]
    assert any(layer["owner_type"] == "person" for layer in full.result["layers"])
    assert full.reward == pytest.approx(env.config.action_cost + env.config.rule_reward)
    assert env.os.rule_effects == 1


def test_rule_modes_change_later_results_structuring_watch_and_trade_scrutiny():
    env = case("structuring")
    subj = env.world.subject
    env.step(call("update_system_prompt", rule_mode="structuring_watch"))
    rows = env.step(call("query_transactions", customer_id=subj)).result["transactions"]
    assert any(r.get("flag") == "near_threshold" for r in rows)
    env = case("trade_based", "hard", lambda e: e.world.variant == "phantom_shipment")
    inv = next(iter(env.world.invoices))
    plain = env.step(call("verify_customs_invoice", invoice_id=inv)).result
    assert "manifest" not in plain
    env.step(call("update_system_prompt", rule_mode="trade_scrutiny"))
    checked = env.step(call("verify_customs_invoice", invoice_id=inv)).result
    assert checked["manifest"] == "no vessel or container record"


def test_rule_mode_without_effect_earns_nothing_and_os_spam_scores_no_os_credit():
    env = case("mule_ring")
    for mode in ("structuring_watch", "trade_scrutiny"):
        obs = env.step(call("update_system_prompt", rule_mode=mode))
        assert obs.reward == pytest.approx(env.config.action_cost)
    env.step(call("check_device_overlap", customer_id=env.world.subject))
    assert env.os.rule_effects == 0
    assert env.report().metrics["os_mechanics"] == 0.0


def test_no_decision_by_the_step_limit_gives_no_decision_credit():
    env = AMLEnvironment(max_steps=3)
    env.reset(seed=1, task="easy")
    for _ in range(3):
        obs = env.step(call("search_compliance_manual", query="x"))
    assert obs.done and obs.grade.decision is None
    assert obs.grade.components["decision"] == 0.0 and obs.grade.total <= env.config.w_os
    assert not env.report().decision_reached


def test_grade_components_for_a_correct_sar_and_a_wrong_closure():
    env = case("trade_based", where=lambda e: e.world.variant == "over_invoicing")
    w = env.world
    cited = " ".join(sorted(next(iter(ids)) for ids in w.facts.values()))
    obs = env.step(
        call(
            "file_sar",
            findings=f"Over-priced invoices {cited}",
            typology="trade_based",
            entities_involved=sorted(w.entities),
        )
    )
    parts = obs.grade.components
    assert parts["decision"] == parts["entity_f1"] == parts["typology"] == 1.0
    assert parts["key_findings"] == 1.0 and obs.grade.total >= 0.85
    env.reset(seed=env.seed, task="easy")
    wrong = env.step(call("close_alert", reason="looks fine"))
    assert wrong.grade.components["decision"] == 0.0 and wrong.grade.total == 0.0


def test_clean_case_closure_needs_the_exculpatory_evidence_for_full_credit():
    env = case("seasonal_cash_business", where=lambda e: "verified_funds" in e.world.facts)
    bare = env.step(call("close_alert", reason="seasonal business")).grade
    env.reset(seed=env.seed, task="easy")
    ids = " ".join(next(iter(ids)) for ids in env.world.facts.values())
    cited = env.step(call("close_alert", reason=f"verified: {ids}")).grade
    assert bare.components["decision"] == cited.components["decision"] == 1.0
    assert bare.total < 0.45 < 0.85 < cited.total


def test_bad_input_is_an_error_observation_not_an_exception():
    env = AMLEnvironment()
    env.reset(seed=3, task="medium")
    for action in (
        call("get_customer_profile", customer_id="C-00000"),
        call("query_transactions"),
        call("file_sar", findings="x", typology="fraud", entities_involved=[]),
        call("update_system_prompt", rule_mode="god_mode"),
        call("retrieve_async_result", job_id="JOB-9"),
        call("write_to_case_file", note="x" * 10_000),
        call("no_such_tool"),
    ):
        obs = env.step(action)
        assert obs.error and not obs.done
    assert env.internal_errors == 0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(data=st.data())
def test_random_calls_with_real_ids_never_raise_and_grades_stay_in_range(data):
    env = AMLEnvironment()
    task = data.draw(st.sampled_from(AMLEnvironment.tasks))
    env.reset(seed=data.draw(st.integers(0, 10**9)), task=task)
    ids = sorted(env.world.ids | {"JOB-1", "JOB-2", env.world.alert["alert_id"]})
    specs = AMLEnvironment.tool_specs_by_name()
    value = (
        st.sampled_from(ids)
        | st.text(max_size=30)
        | st.lists(st.sampled_from(ids), max_size=4)
        | st.floats(allow_nan=False)
        | st.sampled_from(["standard", "trade_scrutiny", "network_expansion", "copper wire"])
        | st.sampled_from(["structuring", "layering", "trade_based", "mule_ring"])
    )
    for _ in range(data.draw(st.integers(1, 35))):
        name = data.draw(st.sampled_from(list(specs)))
        props = list(specs[name].parameters["properties"])
        keys = data.draw(st.lists(st.sampled_from([*props, "extra"]), max_size=4, unique=True))
        obs = env.step(call(name, **{k: data.draw(value) for k in keys}))
        assert obs.reward <= 3 * 0.10 + 0.15  # case-file pays (max 3) and one rule pay
        if obs.done:
            break
    report = env.report()
    assert 0.0 <= report.grade.total <= 1.0
    assert 0.0 <= report.metrics["evidence_coverage"] <= 1.0
    assert 0.0 <= report.metrics["os_mechanics"] <= 1.0
    assert env.internal_errors == 0
