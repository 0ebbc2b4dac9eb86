"""Gang env under hostile input: never raises, never errs internally, never shows hidden labels."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from env.gang.environment import GangEnvironment

TOOLS = [s.name for s in GangEnvironment.tool_specs()] + ["nope", ""]
VALUES = st.one_of(
    st.none(), st.integers(), st.text(max_size=12), st.sampled_from(["u10000", " u1 ", "x" * 50])
)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    calls=st.lists(
        st.tuples(
            st.sampled_from(TOOLS),
            st.dictionaries(st.sampled_from(["account_id", "other"]), VALUES, max_size=2),
        ),
        max_size=12,
    ),
)
def test_random_calls_never_raise_and_grade_stays_in_range(seed, calls):
    env = GangEnvironment()
    obs = env.reset(seed=seed, task="medium")
    ids = [a["account_id"] for a in obs.result["alerts"]]
    for i, (tool, args) in enumerate(calls):
        if i % 3 == 0 and ids:
            args = {"account_id": ids[i % len(ids)]}
        obs = env.step({"tool": tool, "arguments": args})
        if obs.done:
            break
    report = env.report()
    assert 0.0 <= report.grade.total <= 1.0
    assert all(0.0 <= v <= 1.0 for v in report.metrics.values())
    assert env.internal_errors == 0


def test_observations_never_carry_hidden_labels():
    env = GangEnvironment()
    hidden = ("gang_present", "gang_absent", "gang-template", "fanclub", "startup")
    for seed in range(8):
        obs = env.reset(seed=seed, task="medium")
        texts = [obs.model_dump_json(), env.state.model_dump_json()]
        for a in obs.result["alerts"] + [{"account_id": x} for x in obs.result["recently_active"]]:
            for tool in ("inspect", "investigate_network", "analyze_bio", "check_ip"):
                step = env.step({"tool": tool, "arguments": {"account_id": a["account_id"]}})
                texts.append(step.model_dump_json())
        blob = "\n".join(texts)
        for label in hidden:
            assert label not in blob
