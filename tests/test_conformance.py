"""Generic conformance of every registered environment (gymnasium's env_checker, for tool envs).

Parametrized over ``env.names()``, so an environment is checked the moment it is registered. A case
is skipped only while its module cannot be imported (environments are written in parallel).
Checks: determinism, no exception on random or malformed actions (hypothesis), grades in [0, 1],
no decision => no decision credit, no internal errors, no hidden label in observations or state
before the end, oracle >= heuristic >= every shortcut policy + margin, clean cases exist.

Conventions this relies on: ``reveal()`` returns a dict; a clean (no-crime) case says so with
``"clean": True`` (or a verdict such as ``clean``/``no_*``); the policy table holds ``heuristic``,
``oracle`` and ``random``, and every other policy is a shortcut that must rank below honest work.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import env as registry
from env.rollout import play
from env.seeds import split_seeds

SEEDS = 6  # per task for the ranking and the leak statistics
MARGIN = 0.05
CLEAN_WORDS = {"clean", "benign", "legitimate", "none", "no_crime", "no_fraud", "no_ring"}
LABEL = re.compile(r"[a-z][a-z_]{3,}")
ID_LIKE = re.compile(r"\b[A-Za-z]{1,4}-?\d{2,}\b")


def _load(name: str):
    try:
        return registry.env_class(name), registry.policies(name)
    except ImportError as exc:
        pytest.skip(f"env.{name} cannot be imported yet: {exc}")


@pytest.fixture(params=registry.names())
def name(request) -> str:
    return request.param


def _leaves(value: Any):
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, (list, tuple, set)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, str):
        yield value


def _is_clean(truth: dict) -> bool | None:
    if isinstance(truth.get("clean"), bool):
        return truth["clean"]
    verdict = truth.get("verdict")
    if isinstance(verdict, str):
        v = verdict.lower()
        return v in CLEAN_WORDS or v.startswith("no_")
    return None


def _episode_json(env, policy, task: str, seed: int) -> list[str]:
    episode = play(env, policy, task, seed)
    return [o.model_dump_json() for o in episode.observations]


def test_same_task_and_seed_replay_identically(name):
    cls, policies = _load(name)
    for task in cls.tasks:
        for seed in (0, 1_000_000_001):
            runs = [_episode_json(cls(), policies["heuristic"](seed), task, seed) for _ in (0, 1)]
            assert runs[0] == runs[1], (task, seed)


def test_grades_in_range_and_undecided_gets_no_decision_credit(name):
    cls, _ = _load(name)
    env = cls()
    for task in cls.tasks:
        totals = []
        for seed in (3, 4, 5):
            obs = env.reset(seed=seed, task=task)
            while not obs.done:
                obs = env.step({"tool": "no_such_tool", "arguments": {}})
                assert obs.error
            report = env.report()
            assert obs.grade is not None and obs.grade.decision is None
            assert not report.decision_reached
            assert report.grade.components.get("decision", 0.0) == 0.0
            assert all(0.0 <= v <= 1.0 for v in report.grade.components.values())
            assert 0.0 <= report.metrics.get("evidence_coverage", 0.0) <= 1.0
            totals.append(report.grade.total)
        assert sum(totals) / len(totals) <= 0.3, (task, totals, "an undecided episode scores high")
    assert env.internal_errors == 0


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.mark.parametrize("env_name", registry.names())
@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_random_and_malformed_actions_never_raise(env_name, data):
    cls, _ = _load(env_name)
    env = cls()
    task = data.draw(st.sampled_from(cls.tasks))
    obs = env.reset(seed=data.draw(st.integers(0, 10**6)), task=task)
    specs = cls.tool_specs_by_name()
    ids = sorted(set(ID_LIKE.findall(obs.model_dump_json()))) or ["x"]
    for _ in range(data.draw(st.integers(1, 12))):
        tool = data.draw(st.sampled_from([*specs, "", "nope"]))
        params = list(specs[tool].parameters.get("properties", {})) if tool in specs else []
        value = st.sampled_from(ids) | _json | st.lists(st.sampled_from(ids), max_size=3)
        args = data.draw(st.dictionaries(st.sampled_from([*params, "junk"]), value, max_size=4))
        action = data.draw(
            st.sampled_from(
                [{"tool": tool, "arguments": args}, {"tool": 5}, {"arguments": "x"}, "call", None]
            )
        )
        obs = env.step(action)
        assert math.isfinite(obs.reward)
        json.dumps(obs.model_dump(), default=str)
        if obs.done:
            assert obs.grade is not None and 0.0 <= obs.grade.total <= 1.0
            break
    assert 0.0 <= env.report().grade.total <= 1.0
    assert env.internal_errors == 0


def test_no_hidden_label_in_observations_or_state_before_the_end(name):
    cls, policies = _load(name)
    env = cls()
    public = " ".join(
        [json.dumps([s.openai_schema() for s in cls.tool_specs()]), cls.instructions, name]
        + list(cls.tasks)
    ).lower()
    episodes = []  # (labels of the truth, text seen before the end)
    for task in cls.tasks:
        for seed in split_seeds("eval", SEEDS):
            for policy in ("heuristic", "random"):
                episode = play(env, policies[policy](seed), task, seed)
                seen = [o.model_dump_json() for o in episode.observations if not o.done]
                env.reset(seed=seed, task=task)
                seen.append(env.state.model_dump_json())
                labels = {v for v in _leaves(episode.truth) if LABEL.fullmatch(v)}
                labels = {v for v in labels if not re.search(rf"\b{re.escape(v)}\b", public)}
                episodes.append((labels, " ".join(seen).lower()))
    every = set().union(*(labels for labels, _ in episodes))
    for label in sorted(every):
        pattern = re.compile(rf"\b{re.escape(label)}\b")
        hits_true = [bool(pattern.search(t)) for lab, t in episodes if label in lab]
        hits_other = [bool(pattern.search(t)) for lab, t in episodes if label not in lab]
        rate_true = sum(hits_true) / len(hits_true)
        rate_other = sum(hits_other) / len(hits_other) if hits_other else 0.0
        assert rate_true <= rate_other + 0.10, (
            f"hidden label {label!r} shows in {rate_true:.0%} of the observations of cases that "
            f"have it (vs {rate_other:.0%} of the others) before the end"
        )
    assert env.internal_errors == 0


def test_oracle_beats_heuristic_beats_every_shortcut(name):
    cls, policies = _load(name)
    assert {"heuristic", "oracle", "random"} <= set(policies)
    env = cls()
    means = {}
    for policy, factory in policies.items():
        grades = [
            play(env, factory(seed), task, seed).report.grade.total
            for task in cls.tasks
            for seed in split_seeds("eval", SEEDS)
        ]
        means[policy] = sum(grades) / len(grades)
    shortcuts = {p: g for p, g in means.items() if p not in ("heuristic", "oracle")}
    assert means["oracle"] >= means["heuristic"] - 0.02, means
    assert means["heuristic"] >= max(shortcuts.values()) + MARGIN, means
    assert env.internal_errors == 0


def test_clean_cases_exist(name):
    cls, _ = _load(name)
    env = cls()
    seen = []
    for task in cls.tasks:
        for seed in range(40):
            env.reset(seed=seed, task=task)
            seen.append(_is_clean(env.reveal()))
    assert any(v is True for v in seen) and any(v is False for v in seen), (
        f"{name}: reveal() must say which cases are clean (no crime) with 'clean': bool; "
        f"found {sorted(set(map(str, seen)))}"
    )


def test_episodes_are_isolated_between_instances(name):
    cls, policies = _load(name)
    task = cls.tasks[-1]
    solo = [_episode_json(cls(), policies["heuristic"](s), task, s) for s in (11, 12)]
    envs = [cls(), cls()]
    pols = [policies["heuristic"](s) for s in (11, 12)]
    obs = [e.reset(seed=s, task=task) for e, s in zip(envs, (11, 12), strict=True)]
    seen = [[o.model_dump_json()] for o in obs]
    for p, e, o in zip(pols, envs, obs, strict=True):
        p.reset(e, o)
    while not all(o.done for o in obs):  # interleave the two episodes step by step
        for i in (0, 1):
            if not obs[i].done:
                obs[i] = envs[i].step(pols[i].act(obs[i]))
                seen[i].append(obs[i].model_dump_json())
    assert seen == solo
