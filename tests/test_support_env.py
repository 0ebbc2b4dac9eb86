"""Support tickets: seeded worlds, ordered process, replies that must state facts, figures."""

from __future__ import annotations

from env.registry import make, policies
from env.rollout import play, replay
from env.seeds import split_seeds
from env.support.policies import compose_reply

EVAL = split_seeds("eval", 300)


def _cases(outcome: str, task: str = "easy", n: int = 8):
    """(seed, opening, env) for the first ``n`` eval seeds whose hidden outcome is ``outcome``."""
    env = make("support")
    found = []
    for seed in split_seeds("eval", 400):
        opening = env.reset(seed=seed, task=task)
        if env.world.truth.outcome == outcome:
            found.append((seed, opening.result["ticket"], env.world))
        if len(found) == n:
            return found
    raise AssertionError(f"no {outcome} case in 400 seeds")


def _refund_calls(ticket, world, policy_first: bool, amount: float | None = None):
    order_id = world.truth.refund_order
    amount = world.truth.refund_amount if amount is None else amount
    fetch = {"tool": "fetch_user_data", "arguments": {"customer_id": ticket["customer_id"]}}
    policy = [{"tool": "check_policy", "arguments": {"topic": t}} for t in ("refunds", "abuse")]
    refund = {"tool": "issue_refund", "arguments": {"order_id": order_id, "amount": amount}}
    reply = {
        "tool": "reply_to_customer",
        "arguments": {"message": compose_reply("refund_ok", order_id, amount, "")},
    }
    close = {"tool": "close_ticket", "arguments": {"resolution": "refunded"}}
    middle = [*policy, refund] if policy_first else [refund, *policy]
    return [fetch, *middle, reply, close]


def test_refund_before_policy_check_scores_clearly_lower_than_the_right_order():
    env = make("support")
    for seed, ticket, world in _cases("refund_ok"):
        right = replay(env, "easy", seed, _refund_calls(ticket, world, policy_first=True))
        wrong = replay(env, "easy", seed, _refund_calls(ticket, world, policy_first=False))
        assert right.grade.total == 1.0
        assert right.grade.total - wrong.grade.total >= 0.12, seed
        assert wrong.grade.components["process"] < right.grade.components["process"]


def test_opened_items_lose_the_restocking_fee_of_this_seed():
    env = make("support")
    seed, ticket, world = next(
        case
        for case in _cases("refund_ok", n=20)
        if case[2].order(case[2].truth.refund_order).opened
    )
    order = world.order(world.truth.refund_order)
    fee = world.policy.restocking_fee
    assert world.truth.refund_amount == round(order.amount * (100 - fee) / 100, 2)
    full = replay(env, "easy", seed, _refund_calls(ticket, world, True, amount=order.amount))
    assert full.grade.components["refund"] == 0.0 and full.grade.total <= 0.75


def test_same_seed_same_ticket_and_different_seeds_differ():
    a, b = make("support"), make("support")
    openings = [a.reset(seed=s, task="hard").model_dump_json() for s in EVAL[:20]]
    assert openings == [b.reset(seed=s, task="hard").model_dump_json() for s in EVAL[:20]]
    assert len(set(openings)) == 20


def test_policy_numbers_change_per_seed_and_claims_are_sometimes_contradicted():
    env = make("support")
    windows, outcomes = set(), set()
    for seed in EVAL[:120]:
        env.reset(seed=seed, task="easy")
        windows.add(env.world.policy.refund_window)
        outcomes.add(env.world.truth.outcome)
    assert len(windows) == 3
    assert {"refund_denied", "no_duplicate", "delayed"} <= outcomes  # clean, no-money cases
    assert {"refund_ok", "duplicate", "lost"} <= outcomes


def test_a_reply_earns_credit_only_for_the_facts_it_states():
    env = make("support")
    seed, ticket, world = _cases("refund_ok", n=1)[0]
    calls = _refund_calls(ticket, world, policy_first=True)

    def reply_score(message: str) -> float:
        calls[-2] = {"tool": "reply_to_customer", "arguments": {"message": message}}
        return replay(env, "easy", seed, calls).grade.components["reply"]

    order = world.truth.refund_order
    assert reply_score(f"We refunded ${world.truth.refund_amount:.2f} for order {order}.") == 1.0
    assert reply_score("Thanks for reaching out, all sorted!") == 0.0
    assert reply_score(f"Order {order}.") == 0.5
    assert reply_score(f"Order {order} cannot be refunded, {world.truth.refund_amount}") == 0.0
    assert reply_score(f"Order {order} {world.truth.refund_amount} " + "x" * 700) == 0.0


def test_takeover_needs_records_before_escalation_and_no_money():
    env = make("support")
    seed, ticket, world = _cases("takeover", task="medium", n=1)[0]
    reply = {
        "tool": "reply_to_customer",
        "arguments": {"message": "Our security team has it; please reset your password."},
    }
    fetch = {"tool": "fetch_user_data", "arguments": {"customer_id": ticket["customer_id"]}}
    policy = {"tool": "check_policy", "arguments": {"topic": "account_security"}}
    escalate = {"tool": "escalate", "arguments": {"queue": "security", "reason": "takeover"}}
    close = {"tool": "close_ticket", "arguments": {"resolution": "escalated"}}
    good = replay(env, "medium", seed, [fetch, policy, escalate, reply, close])
    blind = replay(env, "medium", seed, [escalate, fetch, policy, reply, close])
    assert good.grade.total == 1.0 and blind.grade.total < 0.9
    assert good.metrics["evidence_coverage"] == 1.0


def test_bad_input_is_an_error_and_no_decision_earns_nothing():
    env = make("support", max_steps=3)
    obs = env.reset(seed=EVAL[0], task="hard")
    assert env.report().metrics["evidence_coverage"] == 0.0
    assert env.step({"tool": "fetch_user_data", "arguments": {"customer_id": "C-0"}}).error
    assert env.step({"tool": "issue_refund", "arguments": {"order_id": "O-1", "amount": 5}}).error
    cid = obs.result["ticket"]["customer_id"]
    last = env.step({"tool": "fetch_user_data", "arguments": {"customer_id": cid}})
    assert last.done and last.grade.total == 0.0 and last.grade.decision is None
    assert env.internal_errors == 0


def test_refunds_cannot_exceed_what_was_charged():
    env = make("support")
    seed, ticket, world = _cases("refund_ok", n=1)[0]
    env.reset(seed=seed, task="easy")
    order = world.order(world.truth.refund_order)
    args = {"order_id": order.order_id, "amount": order.amount + 1}
    assert env.step({"tool": "issue_refund", "arguments": args}).error


def test_heuristic_reads_only_observations_and_reaches_full_coverage():
    env = make("support")
    episode = play(env, policies("support")["heuristic"](0), "hard", EVAL[5])
    assert episode.report.metrics["evidence_coverage"] == 1.0
    assert episode.report.decision_reached


def test_reply_checks_read_amounts_in_any_spelling_and_phrases_loosely():
    from env.common.text import fact_coverage, mentions

    assert mentions("Refunded $1,250.00 today", 1250.0)
    assert not mentions("Refunded $1,250.01 today", 1250.0)
    assert mentions("Your billing-tier 2 team", ("billing tier 2",))
    assert fact_coverage("order O-1 refunded 9.5", ["O-1", 9.5, ("password",)], 100) == 2 / 3
    assert fact_coverage(None, ["O-1"], 100) == 0.0
