"""Bootstrap intervals and before/after comparisons on real evaluation results."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from pipeline.evaluation.episodes import evaluate
from pipeline.evaluation.stats import (
    bootstrap_interval,
    compare,
    comparison_chart,
    interval_table,
    intervals,
    paired_difference,
    result_chart,
    valid_call_rate,
    write_result_csv,
)
from scripts import compare_results

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    """Random and heuristic on the same 8 AML easy eval worlds."""
    return {
        name: evaluate("aml", name, tasks="easy", episodes=8, progress=False)
        for name in ("random", "heuristic")
    }


def test_interval_is_seeded_and_brackets_the_mean() -> None:
    values = [0.0, 1.0] * 20 + [0.5] * 10
    first = bootstrap_interval(values, seed=3)
    assert first == bootstrap_interval(values, seed=3)
    assert first["low"] < first["mean"] < first["high"]
    assert first["mean"] == pytest.approx(np.mean(values))
    assert bootstrap_interval(values, seed=4) != first


def test_interval_covers_the_true_mean_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(11)
    hits = 0
    for i in range(200):
        sample = rng.binomial(1, 0.3, size=80).tolist()
        iv = bootstrap_interval(sample, seed=i, n_resamples=1000)
        hits += iv["low"] <= 0.3 <= iv["high"]
    assert 0.88 <= hits / 200 <= 0.99


def test_interval_narrows_with_more_episodes() -> None:
    rng = np.random.default_rng(5)
    small = bootstrap_interval(rng.random(25).tolist())
    large = bootstrap_interval(rng.random(400).tolist())
    assert (large["high"] - large["low"]) < 0.6 * (small["high"] - small["low"])


def test_nan_values_drop_out_and_empty_is_nan() -> None:
    assert bootstrap_interval([1.0, float("nan"), 0.0])["n"] == 2
    assert math.isnan(bootstrap_interval([])["mean"])
    assert math.isnan(valid_call_rate({"steps": 3}))
    assert valid_call_rate({"steps": 4, "n_errors": 1}) == 0.75


def test_tables_per_task_and_category(results: dict[str, dict]) -> None:
    heuristic = results["heuristic"]
    table = intervals(heuristic)
    assert set(table["per_task"]) == {"easy"}
    categories = {row["category"] for row in heuristic["episodes"]}
    assert set(table["per_category"]) == categories
    assert table["overall"]["grade"]["mean"] == pytest.approx(
        heuristic["summary"]["mean_grade"], abs=1e-3
    )
    assert sum(v["grade"]["n"] for v in table["per_category"].values()) == 8
    assert interval_table(heuristic["episodes"])["all"]["decision_rate"]["mean"] == 1.0


def test_heuristic_beats_random_with_a_paired_interval(results: dict[str, dict]) -> None:
    diff = paired_difference(results["random"]["episodes"], results["heuristic"]["episodes"])
    assert diff["paired"] and diff["n"] == 8
    assert diff["low"] > 0.2
    same = paired_difference(results["heuristic"]["episodes"], results["heuristic"]["episodes"])
    assert same["mean"] == same["low"] == same["high"] == 0.0
    comparison = compare(results["random"], results["heuristic"])
    assert comparison["overall"]["significant"]
    assert not compare(results["heuristic"], results["heuristic"])["overall"]["significant"]


def test_csv_png_and_script(results: dict[str, dict], tmp_path) -> None:
    path = write_result_csv(results["heuristic"], tmp_path / "eval.csv")
    rows = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    assert rows[0]["group"] == "all" and rows[1]["group"] == "task:easy"
    assert (
        float(rows[0]["grade_low"]) <= float(rows[0]["grade_mean"]) <= float(rows[0]["grade_high"])
    )
    assert result_chart(results["heuristic"], tmp_path / "eval.png").read_bytes()[:8] == PNG_MAGIC
    chart = comparison_chart(results["random"], results["heuristic"], tmp_path / "cmp.png")
    assert chart.read_bytes()[:8] == PNG_MAGIC
    for name, result in results.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(result, default=str))
    out = tmp_path / "cmp.csv"
    argv = [str(tmp_path / "random.json"), str(tmp_path / "heuristic.json"), "--csv", str(out)]
    assert compare_results.main([*argv, "--png", str(tmp_path / "c.png")]) == 0
    first = next(csv.DictReader(out.read_text(encoding="utf-8").splitlines()))
    assert first["group"] == "all" and first["significant"] == "True"
    assert float(first["difference_low"]) > 0.2


def test_evaluate_cli_writes_interval_csv_and_chart(tmp_path, capsys) -> None:
    from scripts.evaluate import main

    csv_path, png_path = tmp_path / "e.csv", tmp_path / "e.png"
    argv = ["--policy", "heuristic", "--tasks", "easy", "--episodes", "3", "--no-progress"]
    assert main([*argv, "--csv", str(csv_path), "--png", str(png_path)]) == 0
    assert "95% bootstrap interval" in capsys.readouterr().out
    rows = list(csv.DictReader(csv_path.read_text(encoding="utf-8").splitlines()))
    assert rows[0]["group"] == "all" and rows[0]["n"] == "3"
    assert float(rows[0]["valid_call_rate_mean"]) > 0.9  # rows now carry n_errors
    assert png_path.read_bytes()[:8] == PNG_MAGIC
