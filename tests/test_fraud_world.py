"""Fraud environment mechanics: roles, ticks, every tool's effect, endings and decisions."""

from __future__ import annotations

import pytest

from env.fraud.environment import DEFENDER_TOOLS, FRAUDSTER_TOOLS, FraudEnvironment
from env.fraud.policies import POLICIES
from env.fraud.txns import txn_id
from env.rollout import play

from conftest import call


def step(env: FraudEnvironment, tool: str, **arguments):
    return env.step(call(tool, **arguments))


def ring_seed(task: str = "defender", family: str | None = None) -> tuple[FraudEnvironment, int]:
    env = FraudEnvironment() if family is None else FraudEnvironment(family=family)
    for seed in range(100):
        env.reset(seed=seed, task=task)
        if env.world.ring:
            return env, seed
    raise AssertionError("no ring world in 100 seeds")


def test_observation_lists_only_the_roles_tools_and_the_other_side_is_an_error():
    env = FraudEnvironment()
    assert set(env.reset(seed=1, task="defender").tools) == set(DEFENDER_TOOLS)
    obs = step(env, "cashout_attempt", route_id="R1", amount=10.0)
    assert obs.error and "fraudster tool" in obs.error
    assert env.world.tick == 2, "a failed call still costs world time"
    assert set(env.reset(seed=1, task="fraudster").tools) == set(FRAUDSTER_TOOLS)
    obs = step(env, "freeze", account_id="U01")
    assert obs.error and "defender tool" in obs.error and env.world.tick == 1
    assert set(DEFENDER_TOOLS) | set(FRAUDSTER_TOOLS) == set(FraudEnvironment.tool_specs_by_name())


def test_same_task_and_seed_replay_byte_identically():
    runs = []
    for _ in range(2):
        env = FraudEnvironment()
        for task in FraudEnvironment.tasks:
            episode = play(env, POLICIES["heuristic"](7), task, 7)
            runs.append([o.model_dump_json() for o in episode.observations])
    assert runs[0] == runs[2] and runs[1] == runs[3]


def test_defender_tools_each_have_an_effect():
    env, _ = ring_seed("defender")
    alerts = env.reset(seed=env.seed, task="defender").result["alerts"]
    pending = [a["id"] for a in alerts if a["status"] == "pending"]
    assert pending, "the opening shows pending transactions that can be held"
    obs = step(env, "hold", transaction_id=pending[0])
    assert obs.result["result"]["held"] and env.engine.ledger.holds
    obs = step(env, "monitor", account_id="U01")
    assert "transactions" in obs.result["result"] and "U01" in env.engine.ledger.looked
    obs = step(env, "investigate_neighborhood", account_id="U02")
    assert {"shared_device", "same_tick_payouts"} <= set(obs.result["result"])
    obs = step(env, "challenge", account_id="U03")
    assert isinstance(obs.result["result"]["passed"], bool) and env.engine.ledger.challenges
    step(env, "freeze", account_id="U04")
    assert env.world.accounts["U04"].frozen and "U04" in step(env, "do_nothing").result["frozen"]
    step(env, "block_merchant", merchant_id="M1")
    assert env.world.merchants["M1"].blocked
    assert env.world.tick == 1 + env.step_count


def test_fraudster_tools_each_have_an_effect():
    env = FraudEnvironment()
    obs = env.reset(seed=3, task="fraudster")
    route = obs.result["routes"][0]
    before = route["source_funds"]
    obs = step(env, "split_payment", route_id="R1", amount=obs.result["transfer_cap"], parts=3)
    assert obs.result["routes"][0]["source_funds"] < before
    assert obs.result["routes"][0]["mule_staged"] > 0, "the transfer settled at the mule"
    staged = obs.result["routes"][0]["mule_staged"]
    obs = step(env, "cashout_attempt", route_id="R1", amount=staged)
    assert obs.result["laundered"] > 0 or obs.result["lost"] > 0
    hot = obs.result["routes"][0]["mule_alert"]
    obs = step(env, "delay")
    assert obs.result["routes"][0]["mule_alert"] < hot or hot == 0
    obs = step(env, "rotate_device", account_id=route["source"])
    assert obs.result["fresh_devices"] == env.config.fresh_devices - 1
    other = next(m for m in obs.result["merchants"] if m != route["merchant"])
    obs = step(env, "switch_merchant", route_id="R1", merchant_id=other)
    assert obs.result["routes"][0]["merchant"] == other
    obs = step(env, "rotate_mule", route_id="R1")
    assert obs.result["routes"][0]["mule"] != route["mule"]
    funds = obs.result["routes"][1]["source_funds"]
    obs = step(env, "refund_abuse", route_id="R2", amount=obs.result["transfer_cap"])
    assert obs.result["result"]["moved"] > 0 and obs.result["routes"][1]["source_funds"] < funds
    obs = step(env, "exit_scheme")
    assert obs.done and obs.grade.decision == "exit" and obs.grade.components["decision"] == 1.0


def test_cash_out_is_gradual_so_episodes_last():
    env = FraudEnvironment()
    for seed in range(20):
        episode = play(env, POLICIES["cashout_at_once"](seed), "fraudster", seed)
        assert episode.report.steps >= 3
        if episode.report.grade.decision == "threshold_reached":
            assert episode.report.steps >= 6, "even a rushing ring needs many withdrawals"
        first = episode.observations[1].result
        assert first["laundered"] <= env.config.cashout_cap * first["total"] + 1e-6
    for seed in range(20):
        episode = play(env, POLICIES["do_nothing"](seed), "defender", seed)
        assert episode.report.steps >= 8, "an unopposed ring needs many ticks"


def test_unopposed_ring_crosses_the_threshold_and_the_defender_gets_no_decision_credit():
    env = FraudEnvironment()
    crossed, shares = 0, []
    for seed in range(30):
        episode = play(env, POLICIES["do_nothing"](seed), "defender", seed)
        grade = episode.report.grade
        assert grade.decision is None and grade.components["decision"] == 0.0
        assert not episode.report.decision_reached
        w = env.world
        if w.ring:
            shares.append(w.laundered / w.total)
            crossed += w.laundered >= env.config.fraud_threshold * w.total
    assert crossed >= 5 and sum(shares) / len(shares) >= 0.55


def test_blocking_every_route_ends_the_episode_early():
    env = FraudEnvironment()
    ended = 0
    for seed in range(30):
        episode = play(env, POLICIES["oracle"](seed), "defender", seed)
        if env.world.ring:
            ended += episode.report.grade.decision == "routes_blocked"
            assert episode.report.steps < env.config.max_steps
    assert ended >= 15


@pytest.mark.parametrize("task", FraudEnvironment.tasks)
def test_undecided_episode_has_no_decision_credit(task):
    env = FraudEnvironment()
    for seed in range(10):
        report = play(env, POLICIES["do_nothing"](seed), task, seed).report
        assert report.grade.components["decision"] == 0.0 and report.grade.decision is None


def test_clean_worlds_exist_and_ask_for_a_clean_verdict():
    env = FraudEnvironment()
    clean = ring = 0
    for seed in range(60):
        env.reset(seed=seed, task="defender")
        verdict = env.reveal()["verdict"]
        obs = step(env, "close_case", verdict="clean")
        if verdict == "no_ring":
            clean += 1
            assert obs.grade.components["decision"] == 1.0 and obs.grade.total >= 0.9
        else:
            ring += 1
            assert obs.grade.components["decision"] == 0.0 and obs.grade.total < 0.6
    assert clean >= 5 and ring >= 30


def test_every_family_builds_its_ring():
    for family in ("refund_abuse", "mule_cashout", "merchant_collusion", "account_takeover"):
        env, _ = ring_seed("defender", family)
        truth = env.reveal()
        assert truth["family"] == family and len(truth["routes"]) == 2
        assert (truth["colluding_merchant"] is not None) == (family == "merchant_collusion")


def test_defender_observations_never_name_the_scheme():
    env = FraudEnvironment()
    for seed in range(30):
        episode = play(env, POLICIES["heuristic"](seed), "defender", seed)
        truth = episode.truth
        hidden = [truth["verdict"], "ring_role", "colluding", "blind_merchant"]
        if truth["family"]:
            hidden.append(truth["family"])
        for obs in episode.observations:
            if obs.done:
                break
            text = obs.model_dump_json()
            assert not [h for h in hidden if h in text], seed


class LazyRing:
    """A pluggable opponent (as a second model would be): it only ever waits."""

    def act(self, view):
        assert "routes" in view and "tick" in view
        return call("delay")


class GreedyBank:
    """A pluggable defender opponent: freezes the account it scores highest."""

    def act(self, view):
        assert {"alerts", "frozen", "suspicion"} <= set(view)
        ranked = sorted(
            (k for k in view["suspicion"] if k.startswith("U") and k not in view["frozen"]),
            key=lambda k: -view["suspicion"][k],
        )
        return call("freeze", account_id=ranked[0])


def test_the_other_side_is_pluggable():
    env, seed = ring_seed("defender")
    env.set_opponent(lambda role, rng: LazyRing())
    episode = play(env, POLICIES["do_nothing"](seed), "defender", seed)
    assert env.world.laundered == 0 and episode.report.steps == env.config.max_steps
    env.set_opponent(lambda role, rng: GreedyBank())
    obs = env.reset(seed=seed, task="fraudster")
    step(env, "split_payment", route_id="R1", amount=obs.result["transfer_cap"], parts=1)
    assert sum(a.frozen for a in env.world.accounts.values()) == 1
    env.set_opponent(None)
    env.reset(seed=seed, task="fraudster")
    assert type(env.opponent).__name__ == "ScriptedDefender"


def test_ids_follow_their_positions_past_the_preformatted_tables():
    """Users, home devices, merchants and transactions are named by position (``U07``, ``D016``,
    ``M3``, ``T0042``); the names are formatted once per process, and a world or an episode
    larger than those tables names the rest the same way."""
    env = FraudEnvironment(min_users=120, max_users=120, min_merchants=2, max_merchants=2)
    env.reset(seed=3, task="defender")
    ids = list(env.world.accounts)
    assert ids[:2] == ["U01", "U02"] and ids[98:101] == ["U99", "U100", "U101"]
    assert ids[-1] == "U120" and list(env.world.merchants) == ["M1", "M2"]
    accounts = list(env.world.accounts.values())
    at_home = [a for k, a in enumerate(accounts) if a.device == f"D{k + 10:03d}"]
    assert len(at_home) >= 90, "most accounts keep their own home device, D010 to D129"
    others = {a.device for a in accounts} - {a.device for a in at_home}
    assert all(len(d) == 4 and d[0] == "D" for d in others), others  # ring or shared devices
    for _ in range(6):
        step(env, "do_nothing")
    txns = env.world.txns
    assert [t.id for t in txns] == [f"T{k:04d}" for k in range(1, len(txns) + 1)]
    assert env.engine.find_txn(txns[-1].id) is txns[-1]
    assert [txn_id(k) for k in (7, 9999, 10000, 123456)] == ["T0007", "T9999", "T10000", "T123456"]
