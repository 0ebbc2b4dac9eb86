"""Steps mode: prompts cut along reference trajectories (pipeline/data/steps.py), their rewards and
their compact results.

What must hold: a row's prompt is the interactive conversation up to the cut (same messages, same
observation text); replaying its prefix reproduces the reference byte for byte, in another process
too; the reward of prefix + reply grades the episode but credits the reply only with its own calls;
at a decision cut the right decision out-scores the wrong one; compact results lose nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import env as registry
from env.base import ToolCallAction
from env.registry import references
from env.rollout import play, replay
from env.seeds import split_seeds
from pipeline.data.compact import compact_text, read_compact
from pipeline.data.dataset import build_dataset, build_rows
from pipeline.data.prompts import render_observation
from pipeline.data.steps import cut_points, episode_rng, parse_cuts, reference
from pipeline.evaluation.cuts import evaluate_cuts
from pipeline.training.config import ConfigError, load_config
from rewards.protocol import render_completion
from rewards.replay import CACHE
from rewards.score import score_batch

ROOT = Path(__file__).resolve().parents[1]
ENVS = registry.names()


@pytest.mark.parametrize("name", ENVS)
def test_compact_results_read_back_exactly(name: str) -> None:
    environment = registry.make(name)
    table = registry.policies(name)
    for task in environment.tasks or [""]:
        for seed in split_seeds("train", 3):
            for policy in ("heuristic", "random"):
                episode = play(environment, table[policy](seed), task or None, seed)
                for obs in episode.observations:
                    if obs.result is not None:
                        assert read_compact(compact_text(obs.result)) == obs.result


def test_compact_cells_that_look_like_other_values_stay_strings() -> None:
    value = {
        "a": "12",
        "b": "true",
        "c": "",
        "d": " padded",
        "e": [{"x": "1|2", "y": None, "z": [1, "a"]}, {"x": "[not json", "y": 2.5, "z": []}],
        "f": {"nested": True},
    }
    text = compact_text(value)
    assert read_compact(text) == value
    assert "e[2]: x|y|z" in text


def test_records_that_lack_keys_are_a_table_with_empty_cells() -> None:
    txns = [
        {"id": "T-1", "amount": 5.0, "memo": ""},
        {"id": "T-2", "amount": 7.5, "memo": "invoice", "invoice": "INV-1"},
        {"id": "T-3", "memo": "x"},
    ]
    text = compact_text({"transactions": txns})
    assert text.split("\n") == [
        "transactions[3]: id|amount|memo|invoice",
        'T-1|5.0|""|',
        "T-2|7.5|invoice|INV-1",
        "T-3||x|",
    ]
    assert read_compact(text) == {"transactions": txns}
    clash = [{"a": 1, "b": 2}, {"b": 3, "a": 4}]  # no one column order fits both: JSON
    assert read_compact(compact_text({"r": clash})) == {"r": clash}
    assert "r[2]" not in compact_text({"r": clash})


class DecodedResults:
    """A policy that reads every result only through its compact text."""

    def __init__(self, inner):
        self.inner = inner

    @staticmethod
    def _decoded(obs):
        if obs.result is None:
            return obs
        return obs.model_copy(update={"result": read_compact(compact_text(obs.result))})

    def reset(self, env, observation):
        self.inner.reset(env, self._decoded(observation))

    def act(self, observation):
        return self.inner.act(self._decoded(observation))


@pytest.mark.parametrize("name", ENVS)
def test_heuristic_grades_identically_when_it_reads_compact_results(name: str) -> None:
    environment = registry.make(name)
    heuristic = registry.policies(name)["heuristic"]
    for task in environment.tasks or [""]:
        for seed in split_seeds("eval", 5):
            plain = play(environment, heuristic(seed), task or None, seed)
            decoded = play(environment, DecodedResults(heuristic(seed)), task or None, seed)
            assert decoded.plan == plain.plan
            assert decoded.report.grade == plain.report.grade


def test_compact_results_are_shorter_for_record_lists() -> None:
    rows = build_rows("aml", ["easy"], 10, "train", mode="steps", result_style="full")
    compact = build_rows("aml", ["easy"], 10, "train", mode="steps", result_style="compact")
    full_chars = sum(len(m["content"]) for r in rows for m in r["prompt"])
    compact_chars = sum(len(m["content"]) for r in compact for m in r["prompt"])
    assert compact_chars < 0.85 * full_chars


def test_cut_specs_and_points() -> None:
    assert parse_cuts("decision") == ("decision", 0)
    assert parse_cuts("random:3") == ("random", 3)
    for bad in ("random:0", "every", "random:x"):
        with pytest.raises(ValueError, match="unknown cuts"):
            parse_cuts(bad)
    environment = registry.make("aml")
    ref = reference(environment, "easy", split_seeds("train", 1)[0])
    rng = episode_rng("aml", "easy", 0)
    assert cut_points(ref, "decision", rng) == [ref.decision_at]
    assert cut_points(ref, "all", rng) == list(range(ref.decision_at + 1))
    picked = cut_points(ref, "random:3", rng)
    assert len(picked) == 3 and picked == sorted(set(picked))


@pytest.mark.parametrize("name", ENVS)
def test_a_steps_row_is_the_interactive_conversation_up_to_its_cut(name: str) -> None:
    rows = build_rows(name, None, 4, "train", mode="steps", cuts="all", result_style="compact")
    environment = registry.make(name)
    assert rows, f"no steps rows for {name}"
    for row in rows:
        prefix = json.loads(row["prefix"])
        assert len(prefix) == row["cut"] and len(row["prompt"]) == 2 + 2 * row["cut"]
        assert row["prompt"][0]["role"] == "system" and row["prompt"][1]["role"] == "user"
        opening = environment.reset(seed=row["seed"], task=row["task"] or None)
        assert row["prompt"][1]["content"].endswith(render_observation(opening, "compact"))
        for i, call in enumerate(prefix):
            assistant, tool = row["prompt"][2 + 2 * i], row["prompt"][3 + 2 * i]
            function = assistant["tool_calls"][0]["function"]
            assert (function["name"], function["arguments"]) == (call["tool"], call["arguments"])
            obs = environment.step(ToolCallAction(**call))
            assert tool == {
                "role": "tool",
                "name": call["tool"],
                "content": render_observation(obs, "compact"),
            }
        assert not environment.done, "a cut must leave the episode open"


def test_steps_dataset_keeps_each_calls_own_arguments_and_mixes_envs() -> None:
    data = build_dataset(["aml", "support"], None, 3, "train", mode="steps", cuts="decision")
    assert set(data.column_names) == {"prompt", "env", "task", "seed", "split", "prefix", "cut"}
    assert set(data["env"]) == {"aml", "support"}
    for row in data:
        for message in row["prompt"]:
            for call in message.get("tool_calls") or []:
                assert None not in call["function"]["arguments"].values()


def test_detours_replace_calls_with_error_free_random_calls() -> None:
    environment = registry.make("aml")
    replaced = 0
    for seed in split_seeds("train", 8):
        honest = reference(environment, "easy", seed)
        wandering = reference(environment, "easy", seed, detour=0.5)
        assert wandering == reference(environment, "easy", seed, detour=0.5)  # seeded
        replaced += sum(a != b for a, b in zip(honest.calls, wandering.calls, strict=False))
        for obs, call in zip(wandering.observations[1:], wandering.calls, strict=True):
            if call not in honest.calls:
                assert obs.error is None
    assert replaced > 0


def _replay_observations(rows: list[dict]) -> str:
    out = []
    for row in rows:
        environment = registry.make(row["env"])
        obs = [environment.reset(seed=row["seed"], task=row["task"] or None)]
        for call in json.loads(row["prefix"]):
            obs.append(environment.step(ToolCallAction(**call)))
        out.append([o.model_dump(mode="json") for o in obs])
    return json.dumps(out, sort_keys=True)


def test_replaying_the_prefix_is_byte_identical_across_processes() -> None:
    rows = []
    for name in ENVS:
        rows += build_rows(name, None, 2, "eval", mode="steps", cuts="decision", detour=0.3)
    here = _replay_observations(rows)
    script = (
        "import json, sys; from tests.test_steps_mode import _replay_observations; "
        "sys.stdout.write(_replay_observations(json.loads(sys.stdin.read())))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps(rows),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONHASHSEED": "7", "PATH": "", "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == here


def _flipped_aml(call: dict, subject: str) -> dict:
    if call["tool"] == "file_sar":
        return {"tool": "close_alert", "arguments": {"reason": call["arguments"]["findings"]}}
    return {
        "tool": "file_sar",
        "arguments": {
            "findings": call["arguments"]["reason"],
            "typology": "structuring",
            "entities_involved": [subject],
        },
    }


def test_at_aml_decision_cuts_the_right_decision_outscores_the_wrong_one() -> None:
    rows = build_rows("aml", None, 60, "eval", mode="steps", cuts="decision")
    environment = registry.make("aml")
    scored = []
    for row in rows:
        ref = reference(environment, row["task"], row["seed"])
        right = ref.calls[row["cut"]]
        subject = ref.observations[0].result["subject_id"]
        for reply in (right, _flipped_aml(right, subject)):
            scored.append({**row, "completion": render_completion([reply])})
    results = score_batch(scored)
    wins = 0
    for i in range(0, len(results), 2):
        row = scored[i]
        outcome = CACHE.outcome(
            row["env"], row["task"], row["seed"], row["completion"], row["prefix"]
        )
        # The reference decides wrongly on a few hard cases: "right" is what the truth calls for.
        first_right = outcome.report.grade.components["decision"] == 1.0
        right, wrong = (results[i], results[i + 1])[:: 1 if first_right else -1]
        wins += right["total"] > wrong["total"] and right["grade"] > wrong["grade"]
    assert wins / len(rows) >= 0.99


def test_the_reply_is_credited_only_with_its_own_calls() -> None:
    row = build_rows("aml", ["easy"], 1, "eval", mode="steps", cuts="decision")[0]
    environment = registry.make("aml")
    ref = reference(environment, row["task"], row["seed"])
    terminal = render_completion([ref.calls[row["cut"]]])
    steps_row, plan_row = score_batch(
        [
            {**row, "completion": terminal},
            {**row, "prefix": None, "completion": render_completion(ref.calls)},
        ]
    )
    whole = replay(environment, row["task"], row["seed"], ref.calls)
    assert steps_row["grade"] == plan_row["grade"] == whole.grade.total
    assert steps_row["rewards"]["investigation"] == 0.0  # the prefix revealed the evidence
    assert plan_row["rewards"]["investigation"] > 0.0
    assert steps_row["rewards"]["execution"] == round(whole.step_rewards[-1], 6)  # its one step
    assert steps_row["n_calls"] == 1 and steps_row["decision_reached"]


def test_a_broken_prefix_scores_zero_with_a_reason() -> None:
    row = build_rows("aml", ["easy"], 1, "eval", mode="steps")[0]
    for bad in ("not json", json.dumps({"tool": "x"}), json.dumps([{"arguments": {}}])):
        result = score_batch([{**row, "prefix": bad, "completion": "<tool_call>{}</tool_call>"}])
        assert result[0]["total"] == 0.0 and result[0]["grade"] is None
        assert "prefix" in result[0]["parse_errors"][0]


def test_decision_cut_evaluation_ranks_the_reference_above_the_shortcuts() -> None:
    reference_run = evaluate_cuts("aml", "reference", ["easy"], 30)["summary"]
    always_file = evaluate_cuts("aml", "always_file", ["easy"], 30)["summary"]
    assert reference_run["decision_accuracy"] >= 0.9 and reference_run["valid_calls"] == 1.0
    assert always_file["decision_rate"] == 1.0
    assert always_file["decision_accuracy"] < 0.8
    assert reference_run["mean_grade"] > always_file["mean_grade"] + 0.3


def test_blind_decision_reference_flips_a_fair_coin_whatever_the_evidence() -> None:
    environment = registry.make("aml")
    blind = references("aml")["blind_decision"]
    agree, files = 0, 0
    seeds = split_seeds("train", 80)
    for seed in seeds:
        honest = reference(environment, "easy", seed)
        coin = play(environment, blind(seed), "easy", seed)
        assert coin.plan[:-1] == honest.calls[:-1]  # same investigation, only the decision differs
        files += coin.plan[-1]["tool"] == "file_sar"
        agree += coin.plan[-1]["tool"] == honest.calls[-1]["tool"]
    assert 0.3 <= files / len(seeds) <= 0.7
    assert 0.3 <= agree / len(seeds) <= 0.7


def test_steps_config_is_validated(tmp_path: Path) -> None:
    base = ROOT / "configs/cpu.yaml"
    cfg = load_config(base, ["data.mode=steps", "data.cuts=random:2", "data.detour=0.2"])
    assert (cfg.data.mode, cfg.data.cuts, cfg.data.detour) == ("steps", "random:2", 0.2)
    for bad, key in (
        ("data.cuts=sometimes", "data.cuts"),
        ("data.detour=1.5", "data.detour"),
        ("data.result_style=tiny", "data.result_style"),
    ):
        with pytest.raises(ConfigError, match=key):
            load_config(base, ["data.mode=steps", bad])


@pytest.mark.parametrize("name", ENVS)
def test_the_reference_reply_at_a_decision_cut_reaches_the_decision(name: str) -> None:
    """The reply is the rest of the case, past a refund or flag on to the terminal call."""
    summary = evaluate_cuts(name, "reference", None, 6)["summary"]
    assert summary["decision_rate"] == 1.0 and summary["valid_calls"] == 1.0
