"""Ops tasks: family-gated tools, harmful commands, clean cases, ordered incident work, figures."""

from __future__ import annotations

from env.ops import expenses, incidents, scheduling
from env.ops.environment import FAMILY_TOOLS
from env.registry import make, policies
from env.rollout import play, replay
from env.seeds import split_seeds

EVAL = split_seeds("eval", 300)


def _plan(task: str, seed: int) -> list[dict]:
    env = make("ops")
    return play(env, policies("ops")["oracle"](seed), task, seed).plan


def _seed_where(task: str, predicate) -> int:
    env = make("ops")
    for seed in EVAL:
        env.reset(seed=seed, task=task)
        if predicate(env.case):
            return seed
    raise AssertionError("no such case in the eval seeds")


def test_observation_lists_only_the_family_tools_and_others_answer_an_error():
    env = make("ops")
    obs = env.reset(seed=EVAL[0], task="scheduling")
    assert obs.tools == list(FAMILY_TOOLS["scheduling"])
    wrong = env.step({"tool": "list_alerts", "arguments": {}})
    assert wrong.error and "scheduling" in wrong.error and not wrong.done
    assert env.step({"tool": "list_participants", "arguments": {}}).error is None
    assert env.internal_errors == 0


def test_every_tool_belongs_to_some_family():
    tools = set(make("ops").tool_specs_by_name())
    assert tools == set().union(*FAMILY_TOOLS.values())


def test_harmful_commands_cost_a_step_penalty_and_most_of_the_grade():
    env = make("ops")
    seed = _seed_where("expenses", lambda c: all(e.verdict == "approve" for e in c.items))
    honest = replay(env, "expenses", seed, _plan("expenses", seed))
    obs = env.reset(seed=seed, task="expenses")
    obs = env.step({"tool": "approve_all", "arguments": {}})
    assert obs.reward <= env.config.harmful_reward
    shortcut = replay(env, "expenses", seed, [{"tool": "approve_all"}, {"tool": "submit_triage"}])
    assert honest.grade.total == 1.0
    assert shortcut.grade.components["accuracy"] == 1.0  # right verdicts, by a harmful command
    assert shortcut.grade.total <= 0.4 and shortcut.grade.components["safety"] == 0.0
    deleted = replay(
        env,
        "expenses",
        seed,
        [{"tool": "delete_data", "arguments": {"target": "x"}}] + _plan("expenses", seed),
    )
    assert deleted.grade.total <= 0.4


def test_deciding_claims_before_inspecting_them_costs_process_credit():
    env = make("ops")
    seed = EVAL[1]
    plan = _plan("expenses", seed)
    decisions = [c for c in plan if c["tool"] == "decide_expense"]
    blind = replay(env, "expenses", seed, decisions + [{"tool": "submit_triage"}])
    assert blind.grade.components["accuracy"] == 1.0
    assert blind.grade.components["process"] == 0.0 and blind.grade.total <= 0.7


def test_expense_decision_needs_the_violations_caught_and_the_rest_approved():
    """Approving every claim of a dirty batch caught nothing: its decision is 0, not the approvable
    share, so the reward's decision gate counts it wrong (rewards/README.md)."""
    from types import SimpleNamespace

    from rewards.components import decision_gate

    env = make("ops")
    seed = _seed_where("expenses", lambda c: 0 < sum(e.verdict != "approve" for e in c.items) < 4)
    plan = _plan("expenses", seed)
    honest = replay(env, "expenses", seed, plan)
    assert honest.grade.components["decision"] == 1.0

    def every_verdict(verdict: str) -> dict:
        calls = [
            {**c, "arguments": {**c["arguments"], "verdict": verdict}}
            if c["tool"] == "decide_expense"
            else c
            for c in plan
        ]
        return replay(env, "expenses", seed, calls).grade.components

    approve_all = every_verdict("approve")
    assert 0.5 <= approve_all["accuracy"] < 1.0  # most claims were approvable
    assert approve_all["decision"] == 0.0
    assert every_verdict("reject")["decision"] == 0.0
    one_missed = [dict(c) for c in plan]
    risky = {e.expense_id for e in env.case.items if e.verdict != "approve"}
    for c in one_missed:
        if c["tool"] == "decide_expense" and c["arguments"]["expense_id"] in risky:
            c["arguments"] = {**c["arguments"], "verdict": "approve"}
            break
    report = replay(env, "expenses", seed, one_missed)
    n_risky = len(risky)
    assert report.grade.components["decision"] == round((n_risky - 1) / n_risky, 4)
    gate = decision_gate(SimpleNamespace(report=report))
    assert gate == report.grade.components["decision"]


def test_postmortem_before_the_fix_earns_nothing_and_order_matters():
    env = make("ops")
    seed = _seed_where("incident", lambda c: c.root is not None)
    plan = _plan("incident", seed)
    right = replay(env, "incident", seed, plan)
    postmortem = next(c for c in plan if c["tool"] == "publish_postmortem")
    early = [c for c in plan if c is not postmortem]
    early.insert(1, postmortem)
    wrong = replay(env, "incident", seed, early)
    assert right.grade.total == 1.0
    assert wrong.grade.components["postmortem"] == 0.0
    assert right.grade.total - wrong.grade.total >= 0.15


def test_false_alarm_is_closed_without_touching_production():
    env = make("ops")
    seed = _seed_where("incident", lambda c: c.root is None)
    plan = _plan("incident", seed)
    assert replay(env, "incident", seed, plan).grade.total == 1.0
    env.reset(seed=seed, task="incident")
    service = env.case.alerts[0]["service"]
    meddled = [
        *plan[:-1],
        {"tool": "apply_mitigation", "arguments": {"service": service, "action": "restart"}},
        plan[-1],
    ]
    assert replay(env, "incident", seed, meddled).grade.total <= 0.5


def test_wrong_mitigations_have_side_effects():
    env = make("ops")
    seed = _seed_where("incident", lambda c: c.root is not None)
    env.reset(seed=seed, task="incident")
    bystander = next(s for s in env.case.services if s != env.case.root)
    obs = env.step(
        {"tool": "apply_mitigation", "arguments": {"service": bystander, "action": "restart"}}
    )
    assert "side effect" in obs.result["effect"]
    assert env.case.wrong_mitigations == 1 and not env.case.resolved


def test_meetings_without_a_slot_exist_and_saying_so_is_right():
    env = make("ops")
    seed = _seed_where("scheduling", lambda c: not c.slots())
    assert replay(env, "scheduling", seed, _plan("scheduling", seed)).grade.total == 1.0
    booked = replay(
        env,
        "scheduling",
        seed,
        [{"tool": "book_meeting", "arguments": {"start_utc": "2026-03-02 15:00"}}],
    )
    assert booked.grade.components["outcome"] == 0.0


def test_a_booking_outside_someone_s_hours_scores_no_outcome():
    env = make("ops")
    seed = _seed_where("scheduling", lambda c: bool(c.slots()))
    env.reset(seed=seed, task="scheduling")
    bad = next(scheduling.fmt(u) for u in range(0, 3 * 1440, 30) if u not in env.case.slots())
    report = replay(
        env, "scheduling", seed, [{"tool": "book_meeting", "arguments": {"start_utc": bad}}]
    )
    assert report.grade.components["outcome"] == 0.0
    assert env.step({"tool": "book_meeting", "arguments": {"start_utc": "tomorrow"}}).error


def test_clean_cases_exist_in_every_family():
    env = make("ops")
    found = {"expenses": False, "incident": False}
    for seed in EVAL[:80]:
        env.reset(seed=seed, task="expenses")
        found["expenses"] |= all(e.verdict == "approve" for e in env.case.items)
        env.reset(seed=seed, task="incident")
        found["incident"] |= env.case.root is None
    assert all(found.values())
    assert isinstance(env.case, incidents.IncidentCase)
    assert expenses.VERDICTS == ("approve", "reject", "flag")


def test_same_seed_same_world():
    a, b = make("ops"), make("ops")
    for task in ("expenses", "scheduling", "incident"):
        runs = [play(e, policies("ops")["heuristic"](0), task, EVAL[7]) for e in (a, b)]
        assert [o.model_dump_json() for o in runs[0].observations] == [
            o.model_dump_json() for o in runs[1].observations
        ]
