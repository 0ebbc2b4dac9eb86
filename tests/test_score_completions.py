"""scripts/score_completions.py: policy plans reproduce evaluation grades; bad rows named."""

from __future__ import annotations

import json

import pytest

from env.registry import make, policies
from env.rollout import play
from env.seeds import split_seeds
from scripts import score_completions


def _evaluated_grades(env_name: str, task: str, n: int) -> list[float]:
    """Grades as evaluation computes them: pipeline.evaluation.episodes when present, else play()."""
    try:
        from pipeline.evaluation.episodes import evaluate
    except ImportError:
        env, heuristic = make(env_name), policies(env_name)["heuristic"]
        return [
            play(env, heuristic(seed), task, seed).report.grade.total
            for seed in split_seeds("eval", n)
        ]
    result = evaluate(env_name, "heuristic", [task], n, "eval", progress=False)
    by_seed = {episode["seed"]: episode["grade"] for episode in result["episodes"]}
    return [by_seed[seed] for seed in split_seeds("eval", n)]


@pytest.mark.parametrize("env_name", ["aml", "support"])
def test_heuristic_plans_reproduce_the_evaluated_grades(env_name, tmp_path):
    pytest.importorskip(f"env.{env_name}.environment")
    pytest.importorskip(f"env.{env_name}.policies")
    out = tmp_path / "plans.jsonl"
    argv = ["--policy", "heuristic", "--env", env_name, "--tasks", "medium", "--seeds", "0:12"]
    assert score_completions.main([*argv, "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["seed"] for r in rows] == split_seeds("eval", 12)
    expected = _evaluated_grades(env_name, "medium", 12)
    assert [r["rewards"]["grade"] for r in rows] == pytest.approx(expected)
    assert [r["policy_grade"] for r in rows] == pytest.approx(expected)
    assert all(r["parse_errors"] == [] and r["n_calls"] > 0 for r in rows)


def test_malformed_rows_are_named_and_the_others_still_scored(tmp_path, capsys):
    good = {"env": "support", "task": "easy", "seed": 5, "completion": "prose"}
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({"env": "support", "task": "easy", "completion": ""}),
        json.dumps({**good, "env": "atlantis"}),
        "",
        json.dumps({**good, "completion": '{"name": "close_ticket", "arguments": {}}'}),
    ]
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("\n".join(lines) + "\n")
    assert score_completions.main(["--in", str(src), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "row 2: not JSON" in err
    assert "row 3: missing key(s) seed" in err
    assert "row 4: unknown environment 'atlantis'" in err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r.get("line") for r in rows if "error" in r] == [2, 3, 4]
    scored = [r for r in rows if "error" not in r]
    assert len(scored) == 2 and scored[1]["n_calls"] == 1
    assert scored[1]["rewards"]["format"] > 0 and set(scored[0]["rewards"]) == {
        "format",
        "investigation",
        "execution",
        "grade",
        "os_mechanics",
        "decision",
    }


def test_unreadable_input_file_is_a_clear_error(tmp_path):
    with pytest.raises(SystemExit, match="cannot read"):
        score_completions.main(["--in", str(tmp_path / "missing.jsonl"), "--out", "x"])
