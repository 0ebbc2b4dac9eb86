"""The six reward components: TRL signature, graded format, one shared replay, never raising."""

from __future__ import annotations

import pytest

from env.registry import make, policies
from env.rollout import play, replay
from env.seeds import split_seeds
from rewards import (
    REWARD_WEIGHTS_DEFAULT,
    build_reward_functions,
    decision_reward,
    execution_reward,
    format_reward,
    grade_reward,
    investigation_reward,
    os_mechanics_reward,
)
from rewards.components import WRONG_DECISION_PENALTY, decision_metrics
from rewards.protocol import render_completion
from rewards.replay import CACHE

ENV = "support"  # committed first; the AML figures live in test_audit_rewards.py
TASK = "easy"
SEED = split_seeds("eval", 1)[0]


def _kw(n: int, env: str = ENV, task: str = TASK, seed: int = SEED) -> dict:
    return {"env": [env] * n, "task": [task] * n, "seed": [seed] * n}


def _heuristic_plan(seed: int = SEED) -> tuple[str, object]:
    episode = play(make(ENV), policies(ENV)["heuristic"](seed), TASK, seed)
    return render_completion(episode.plan), episode


def test_build_reward_functions_names_weights_and_zero_weight_kept_for_logging():
    funcs, weights = build_reward_functions()
    assert [f.__name__ for f in funcs] == [
        "format_reward",
        "investigation_reward",
        "execution_reward",
        "grade_reward",
        "os_mechanics_reward",
        "decision_reward",
    ]
    assert weights == list(REWARD_WEIGHTS_DEFAULT.values())
    assert REWARD_WEIGHTS_DEFAULT["os_mechanics"] == 0.0  # already inside the AML grade
    funcs, weights = build_reward_functions({"os_mechanics": 0.3, "format": 0.5})
    assert [f.__name__ for f in funcs][0] == "format_reward" and weights[0] == 0.5
    assert funcs[-2] is os_mechanics_reward and weights[-2] == 0.3
    assert REWARD_WEIGHTS_DEFAULT["decision"] == 0.0  # logged; the gate of every other component
    with pytest.raises(ValueError, match="unknown reward component"):
        build_reward_functions({"style": 1.0})


def test_format_is_graded_json_below_unknown_below_invalid_below_valid():
    completions = [
        "",
        'Result: {"customer_id": "C-1", "verdict": "fine"}',
        '<tool_call>{"name": "teleport", "arguments": {}}</tool_call>',
        '<tool_call>{"name": "fetch_user_data", "arguments": {"nope": 1}}</tool_call>',
        '<tool_call>{"name": "fetch_user_data", "arguments": {"customer_id": "C-1"}}</tool_call>',
        _heuristic_plan()[0],
    ]
    scores = format_reward([None] * 6, completions, **_kw(6))
    assert scores[0] == 0.0 and scores[1] == 0.05
    assert scores[1] < scores[2] < scores[3] < scores[4] < scores[5] == 1.0


def test_execution_is_the_step_reward_sum_and_no_decision_grades_as_a_wrong_one():
    text, episode = _heuristic_plan()
    undecided = '<tool_call>{"name": "check_policy", "arguments": {"topic": "refunds"}}</tool_call>'
    kw = _kw(2)
    report = replay(
        make(ENV), TASK, SEED, [{"tool": "check_policy", "arguments": {"topic": "refunds"}}]
    )
    assert execution_reward(None, [text, undecided], **kw) == [
        pytest.approx(sum(episode.report.step_rewards)),
        pytest.approx(sum(report.step_rewards)),
    ]
    assert grade_reward(None, [text, undecided], **kw) == [
        episode.report.grade.total,
        -WRONG_DECISION_PENALTY,
    ]
    assert report.grade.total >= 0.0


def test_investigation_is_evidence_coverage_and_dummy_calls_earn_nothing():
    text, episode = _heuristic_plan()
    dummy = render_completion([{"tool": "check_policy", "arguments": {}}] * 3)
    scores = investigation_reward(None, [text, dummy], **_kw(2))
    assert scores[0] == pytest.approx(min(1.0, episode.report.metrics["evidence_coverage"]))
    assert scores[0] > 0.0 and scores[1] == 0.0


def test_one_replay_per_completion_shared_by_all_components():
    CACHE.clear()
    texts = [_heuristic_plan(s)[0] for s in split_seeds("eval", 3, 10)]
    kw = {"env": [ENV] * 3, "task": [TASK] * 3, "seed": split_seeds("eval", 3, 10)}
    funcs, _ = build_reward_functions()
    for fn in funcs:
        fn([None] * 3, texts, **kw)
    assert CACHE.replays == 3


def test_os_mechanics_is_none_for_envs_without_the_metric():
    assert os_mechanics_reward(None, [_heuristic_plan()[0]], **_kw(1)) == [None]


def test_broken_rows_score_zero_and_are_logged_without_raising():
    metrics, extras = {}, {}
    rows = {"env": ["nowhere", ENV, ENV], "task": [TASK, "impossible", TASK], "seed": [1, 1, None]}
    kw = {**rows, "log_metric": metrics.__setitem__, "log_extra": extras.__setitem__}
    funcs, _ = build_reward_functions()
    for fn in funcs:
        assert fn([None] * 3, ["x", "y", "z"], **kw) == [0.0, 0.0, 0.0]
    assert metrics["rewards/broken_rows"] == 3.0
    assert len(extras["parse_errors"]) == 3 and "nowhere" in extras["parse_errors"][0]
    assert format_reward([None], ["x"]) == [0.0]  # no dataset columns at all


def test_interactive_mode_reads_the_finished_environment_instead_of_replaying():
    _, episode = _heuristic_plan()
    env = make(ENV)
    replay(env, TASK, SEED, episode.plan)

    class Adapter:
        pass

    adapter = Adapter()
    adapter.env = env
    messages = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": c["tool"], "arguments": c["arguments"]}}
            ],
        }
        for c in episode.plan
    ]
    CACHE.clear()
    kw = {**_kw(1), "environments": [adapter]}
    assert grade_reward(None, [messages], **kw) == [episode.report.grade.total]
    assert format_reward(None, [messages], **kw) == [1.0]
    assert CACHE.replays == 0


def test_conversational_plan_completion_scores_like_its_text():
    text, _ = _heuristic_plan()
    as_messages = [{"role": "assistant", "content": text}]
    funcs, _ = build_reward_functions()
    for fn in funcs:
        assert fn(None, [as_messages], **_kw(1)) == fn(None, [text], **_kw(1))


def test_an_interactive_environment_that_never_started_scores_zero_without_raising():
    class Adapter:
        env = make(ENV)  # never reset: no world to grade

    kw = {**_kw(1), "environments": [Adapter()]}
    funcs, _ = build_reward_functions()
    for fn in funcs:
        assert fn(None, ["<tool_call>{}</tool_call>"], **kw) in ([0.0], [None])


def test_numpy_and_string_seeds_from_a_dataset_rebuild_the_same_episode():
    import numpy as np

    text, episode = _heuristic_plan()
    for seed in (np.int64(SEED), str(SEED)):
        kw = {"env": [ENV], "task": [TASK], "seed": [seed]}
        assert grade_reward(None, [text], **kw) == [episode.report.grade.total]


def test_decision_metrics_show_what_a_batch_decided_and_which_groups_split():
    """Two AML cases, two completions each: one clean case answered once right (close) and once
    wrong (always_file), one suspicious case filed twice. Only the first group splits."""
    env, pols = make("aml"), policies("aml")

    def episode(policy: str, seed: int):
        return play(env, pols[policy](seed), "easy", seed)

    def right(policy: str, seed: int) -> bool:
        return episode(policy, seed).report.grade.components["decision"] == 1.0

    seeds = split_seeds("eval", 30)
    clean = next(s for s in seeds if right("always_close", s))
    dirty = next(s for s in seeds if right("always_file", s))
    rows = [
        ("heuristic", clean),
        ("always_file", clean),
        ("always_file", dirty),
        ("heuristic", dirty),
    ]
    episodes = [episode(p, s) for p, s in rows]
    assert [e.report.grade.decision for e in episodes] == [
        "close_alert",
        "file_sar",
        "file_sar",
        "file_sar",
    ]
    metrics: dict[str, float] = {}
    kw = {
        "env": ["aml"] * 4,
        "task": ["easy"] * 4,
        "seed": [s for _, s in rows],
        "log_metric": metrics.__setitem__,
    }
    format_reward([None] * 4, [render_completion(e.plan) for e in episodes], **kw)
    assert metrics["decision/decided_rate"] == 1.0
    assert metrics["decision/right_rate"] == 0.75  # the clean case's filing is wrong
    assert metrics["decision/file_sar_share"] == 0.75
    assert metrics["decision/close_alert_share"] == 0.25
    assert metrics["decision/split_groups"] == 0.5  # the clean case's group only
    # The decision reward pays every right decision the same, whatever the grade paid for it.
    completions = [render_completion(e.plan) for e in episodes]
    assert decision_reward([None] * 4, completions, **kw) == [1.0, -1.0, 1.0, 1.0]
    grades = grade_reward([None] * 4, completions, **kw)
    assert grades[1] == -WRONG_DECISION_PENALTY and len({grades[0], grades[2], grades[3]}) == 3
    assert decision_reward([None], ["no call"], **_kw(1)) == [-1.0]  # undecided


def test_decision_shares_keep_decisions_of_earlier_batches_at_zero():
    seen = {"close_alert"}
    _, episode = _heuristic_plan()
    item = CACHE.outcome(ENV, TASK, SEED, render_completion(episode.plan))
    metrics = decision_metrics([item, item], ["a", "a"], seen)
    assert metrics["decision/close_alert_share"] == 0.0
    assert metrics[f"decision/{episode.report.grade.decision}_share"] == 1.0
    assert metrics["decision/split_groups"] == 0.0
    assert episode.report.grade.decision in seen
    assert decision_metrics([], [], seen) == {}
