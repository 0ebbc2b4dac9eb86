"""The decision probe's pieces: labels from the reference's decision, CV-chosen linear probes,
paired intervals, and the reset timer."""

from __future__ import annotations

import numpy as np

from benchmarks.bench_resets import reset_ms
from benchmarks.probe_decision import decision_rows, fit_probe, paired
from env.seeds import split_seeds


def test_verdict_is_the_references_decision_and_matches_the_hidden_truth():
    import env

    rows = decision_rows(12, "train")
    aml = env.make("aml")
    for row in rows:
        aml.reset(seed=row["seed"], task=row["task"])
        assert row["verdict"] == int(not aml.reveal()["clean"])
    assert 0 < sum(r["verdict"] for r in rows) < len(rows)


def test_probe_finds_a_linear_signal_and_not_a_missing_one():
    rng = np.random.default_rng(0)
    y = np.array([0, 1] * 30)
    signal = np.c_[y + 0.3 * rng.standard_normal(60), rng.standard_normal((60, 5))]
    probe, cv, c = fit_probe(signal, y, seed=0)
    assert cv >= 0.9 and (probe.predict(signal) == y).mean() >= 0.9
    _, cv_noise, _ = fit_probe(rng.standard_normal((60, 6)), y, seed=0)
    assert cv_noise <= 0.75


def test_paired_interval_is_over_the_same_cuts():
    same = paired([1, 0, 1, 0], [1, 0, 1, 0], seed=0)
    assert same["mean"] == same["low"] == same["high"] == 0.0
    better = paired([0] * 10, [1] * 10, seed=0)
    assert better["mean"] == 1.0 and better["low"] == 1.0


def test_reset_timer_measures_a_positive_time():
    assert 0 < reset_ms("gang", "easy", split_seeds("eval", 3), rounds=1) < 1000
