"""scripts/evaluate.py and pipeline.evaluation.episodes: tables, JSON, seeds, any environment."""

from __future__ import annotations

import json

import pytest

from env.seeds import split_seeds
from pipeline.evaluation.episodes import evaluate, parse_tasks, resolve_policy
from scripts.evaluate import main


def test_cli_writes_summary_and_episodes_with_the_truth(tmp_path, capsys):
    out = tmp_path / "eval.json"
    main(
        [
            "--env",
            "aml",
            "--policy",
            "heuristic",
            "--episodes",
            "4",
            "--difficulty",
            "easy,hard",
            "--json",
            str(out),
            "--no-progress",
        ]
    )
    data = json.loads(out.read_text())
    summary, episodes = data["summary"], data["episodes"]
    assert 0.0 <= summary["mean_grade"] <= 1.0 and 0.0 <= summary["decision_accuracy"] <= 1.0
    assert set(summary["per_task"]) == {"easy", "hard"} and summary["per_category"]
    assert len(episodes) == 8
    first = episodes[0]
    assert first["seed"] == split_seeds("eval", 1)[0] and first["task"] == "easy"
    assert {"grade", "components", "decision", "steps"} <= set(first)
    assert first["truth"]["verdict"] in ("clean", "suspicious") and "typology" in first["truth"]
    printed = capsys.readouterr().out
    assert "mean grade" in printed and "decision acc." in printed and "hard" in printed


def test_same_arguments_play_the_same_seeds_and_grades():
    a = evaluate("aml", "random", "medium", 5, "eval", progress=False)
    b = evaluate("aml", "random", "medium", 5, "eval", progress=False)
    assert [e["grade"] for e in a["episodes"]] == [e["grade"] for e in b["episodes"]]
    shifted = evaluate("aml", "random", "medium", 5, "eval", seed_offset=5, progress=False)
    assert {e["seed"] for e in shifted["episodes"]}.isdisjoint(e["seed"] for e in a["episodes"])


def test_decision_accuracy_counts_right_verdicts_only():
    file_all = evaluate("aml", "always_file", "easy", 30, "eval", progress=False)["summary"]
    close_all = evaluate("aml", "always_close", "easy", 30, "eval", progress=False)["summary"]
    assert file_all["decision_accuracy"] + close_all["decision_accuracy"] == pytest.approx(1.0)


def test_tasks_are_checked_and_all_expands():
    assert parse_tasks("aml", "all") == ["easy", "medium", "hard"]
    with pytest.raises(ValueError, match="unknown task"):
        parse_tasks("aml", "impossible")


def test_policy_specs_resolve_to_registry_or_model_policies(monkeypatch):
    assert hasattr(resolve_policy("oracle", "aml", 0), "act")
    with pytest.raises(KeyError, match="unknown policy"):
        resolve_policy("psychic", "aml", 0)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    model = resolve_policy("openai:some-model", "aml", 0, mode="plan")
    assert type(model).__module__ == "pipeline.evaluation.model_policy"


def test_other_environments_work_through_tasks():
    import env

    other = next(n for n in env.names() if n != "aml")
    try:
        env.env_class(other)
    except ImportError:
        pytest.skip(f"env.{other} cannot be imported yet")
    result = evaluate(other, "heuristic", "all", 2, "eval", progress=False)
    assert len(result["episodes"]) == 2 * len(env.env_class(other).tasks)


def test_cli_scores_steps_replies_at_decision_cuts(tmp_path, capsys):
    out = tmp_path / "cuts.json"
    argv = ["--env", "aml", "--mode", "steps", "--cuts", "decision", "--difficulty", "easy"]
    for policy in ("always_file", "reference"):
        assert main([*argv, "--policy", policy, "--episodes", "8", "--json", str(out)]) == 0
        summary = json.loads(out.read_text())["summary"]
        assert summary["prompts"] == 8 and summary["decision_rate"] == 1.0
        assert summary["cuts"] == "decision" and summary["valid_calls"] == 1.0
    assert summary["decision_accuracy"] == 1.0  # the reference decides AML easy right
    assert "8 cut prompts (decision)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--mode steps"):
        main(["--env", "aml", "--policy", "always_file", "--cuts", "decision"])
