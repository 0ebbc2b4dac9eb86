"""pipeline.decoding.lockstep: many checkpoint episodes played at once give the sequential episodes."""

from __future__ import annotations

import pytest

import env
from env.rollout import play
from pipeline.decoding.lockstep import play_lockstep
from pipeline.evaluation.backends import CheckpointBackend, GenerationSettings
from pipeline.evaluation.episodes import evaluate
from pipeline.evaluation.model_policy import ModelPolicy

from conftest import tiny_model

SETTINGS = {"max_new_tokens": 6, "plan_max_new_tokens": 10, "max_idle_turns": 2}
JOBS = [("easy", 1_000_000_001), ("medium", 1_000_000_002), ("easy", 1_000_000_003)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lockstep") / "tiny"
    model, tokenizer = tiny_model(seed=5, style="full")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize("mode", ["interactive", "plan"])
def test_lockstep_episodes_equal_sequential_ones(checkpoint, mode) -> None:
    settings = GenerationSettings(**SETTINGS)
    backend = CheckpointBackend(checkpoint, settings)
    policies: dict[int, ModelPolicy] = {}

    def make_policy(shared, seed):
        policies[seed] = ModelPolicy(shared, "support", mode, seed, settings)
        return policies[seed]

    episodes, errors = play_lockstep("support", backend, make_policy, JOBS, batch_size=2)
    assert errors == 0 and [(e.task, e.seed) for e in episodes] == JOBS
    for (task, seed), episode in zip(JOBS, episodes, strict=True):
        alone = ModelPolicy(backend, "support", mode, seed, settings)
        expected = play(env.make("support"), alone, task, seed)
        assert policies[seed].messages == alone.messages  # same prompts, same greedy replies
        assert episode.report.steps == expected.report.steps
        assert episode.report.grade.total == expected.report.grade.total


def test_kept_caches_encode_less_and_change_no_episode(checkpoint, monkeypatch) -> None:
    """Each episode's keys and values are kept across turns: a turn encodes only what it adds."""
    import pipeline.decoding.lockstep as lockstep

    settings = GenerationSettings(**SETTINGS)
    backend = CheckpointBackend(checkpoint, settings)

    def play_counting() -> tuple[int, list]:
        tokens: list[int] = []
        handle = backend.model.register_forward_pre_hook(
            lambda _m, _a, kwargs: tokens.append(kwargs["input_ids"].numel()), with_kwargs=True
        )
        policies: dict[int, ModelPolicy] = {}

        def make_policy(shared, seed):
            policies[seed] = ModelPolicy(shared, "support", "interactive", seed, settings)
            return policies[seed]

        try:
            play_lockstep("support", backend, make_policy, JOBS, batch_size=4)
        finally:
            handle.remove()
        assert all(len(p.messages) > 4 for p in policies.values()), "several turns each"
        return sum(tokens), [policies[seed].messages for _, seed in JOBS]

    kept, conversations = play_counting()
    monkeypatch.setattr(lockstep, "ROW_CACHE_BYTES", 0)  # nothing fits: every turn encodes all
    encoded, again = play_counting()
    assert conversations == again
    assert kept < 0.8 * encoded


def test_evaluate_in_lockstep_gives_the_same_rows(checkpoint) -> None:
    spec = f"checkpoint:{checkpoint}"
    kwargs = dict(tasks="easy", episodes=2, progress=False, settings=SETTINGS)
    together = evaluate("support", spec, lockstep=8, **kwargs)
    alone = evaluate("support", spec, **kwargs)
    assert together["episodes"] == alone["episodes"]
    assert together["summary"]["episodes"] == 2


def test_a_failing_episode_raises_without_stalling_the_others(checkpoint) -> None:
    settings = GenerationSettings(**SETTINGS)
    backend = CheckpointBackend(checkpoint, settings)
    played: list[int] = []

    def make_policy(shared, seed):
        if seed == JOBS[1][1]:
            raise RuntimeError("policy could not be built")
        played.append(seed)
        return ModelPolicy(shared, "support", "interactive", seed, settings)

    with pytest.raises(RuntimeError, match="could not be built"):
        play_lockstep("support", backend, make_policy, JOBS, batch_size=4)
    assert sorted(played) == sorted([JOBS[0][1], JOBS[2][1]])  # they ran to the end


def test_lockstep_refuses_sampling(checkpoint) -> None:
    backend = CheckpointBackend(checkpoint, GenerationSettings(temperature=0.7))
    with pytest.raises(ValueError, match="greedy"):
        play_lockstep("support", backend, lambda shared, seed: None, JOBS)


def test_evaluate_cli_plays_checkpoints_in_lockstep(checkpoint, tmp_path) -> None:
    import json

    from scripts.evaluate import main

    out = tmp_path / "result.json"
    argv = ["--env", "support", "--tasks", "easy", "--episodes", "2", "--no-progress"]
    assert (
        main([*argv, "--policy", f"checkpoint:{checkpoint}", "--lockstep", "4", "--json", str(out)])
        == 0
    )
    rows = json.loads(out.read_text())["episodes"]
    alone = evaluate(
        "support", f"checkpoint:{checkpoint}", tasks="easy", episodes=2, progress=False
    )
    assert [r["steps"] for r in rows] == [r["steps"] for r in alone["episodes"]]
    assert [r["seed"] for r in rows] == [r["seed"] for r in alone["episodes"]]
    assert (
        main(
            [
                *argv,
                "--policy",
                f"checkpoint:{checkpoint}",
                "--prompt-style",
                "compact",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["summary"]["settings"] == {"prompt_style": "compact"}


def test_a_context_cap_ends_the_conversation_once_its_next_turn_would_not_fit(checkpoint) -> None:
    free = CheckpointBackend(checkpoint, GenerationSettings(**SETTINGS))
    opening = ModelPolicy(free, "support", "interactive", JOBS[0][1], free.settings)
    environment = env.make("support")
    opening.reset(environment, environment.reset(task=JOBS[0][0], seed=JOBS[0][1]))
    prompt, budget = free.encode(opening.messages, free.tool_schemas("support"))
    assert budget == SETTINGS["max_new_tokens"]  # uncapped: the whole turn budget

    capped_settings = GenerationSettings(**SETTINGS, max_context_tokens=len(prompt) + 4)
    capped = CheckpointBackend(checkpoint, capped_settings)
    assert capped.encode(opening.messages, capped.tool_schemas("support"))[1] == 4
    policy = ModelPolicy(capped, "support", "interactive", JOBS[0][1], capped_settings)
    play(env.make("support"), policy, *JOBS[0])
    replies = [m for m in policy.messages if m["role"] == "assistant"]
    assert len(replies) == 1  # the second turn's prompt (opening + reply + result) is over the cap
    uncapped = ModelPolicy(free, "support", "interactive", JOBS[0][1], free.settings)
    play(env.make("support"), uncapped, *JOBS[0])
    assert sum(m["role"] == "assistant" for m in uncapped.messages) > 1


def test_receding_horizon_turns_stop_at_their_first_call_and_keep_the_rows(checkpoint) -> None:
    """Steps mode plays only a turn's first call, so lockstep decoding may stop there."""
    from pipeline.decoding.trainer_sampling import first_call_reached
    from pipeline.evaluation.backends import load_backend

    tokenizer = load_backend(f"checkpoint:{checkpoint}", GenerationSettings()).tokenizer
    reached = first_call_reached(tokenizer)
    call = '<tool_call>{"name": "lookup_customer", "arguments": {"customer_id": "C-1"}}</tool_call>'
    ids = tokenizer(call, add_special_tokens=False)["input_ids"]
    assert reached(ids) and not reached(ids[:-3])
    assert reached(tokenizer(call + "\n" + call, add_special_tokens=False)["input_ids"])
    spec = f"checkpoint:{checkpoint}"
    kwargs = dict(tasks="easy", episodes=2, progress=False, settings=SETTINGS, mode="steps")
    assert (
        evaluate("support", spec, lockstep=8, **kwargs)["episodes"]
        == evaluate("support", spec, **kwargs)["episodes"]
    )
