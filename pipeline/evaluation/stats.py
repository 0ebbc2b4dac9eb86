"""Statistics for evaluation results: 95% bootstrap intervals, tables, before/after comparisons.

An evaluation (``pipeline.evaluation.episodes.evaluate``) returns one row per played episode. A mean grade
over 100 episodes moves by a few hundredths from seed to seed, so a claim such as "training raised
the grade by 0.10" needs an interval. This module resamples the episode rows (a seeded
``numpy.random.Generator``, so the same file always gives the same interval) to put a 95% percentile
bootstrap interval on every mean, per task and per hidden category (typology), and compares two
result files episode by episode (paired on task and seed when both played the same worlds). It also
writes those tables as CSV and a bar chart with error bars as PNG, for ``scripts/evaluate.py`` and
``scripts/compare_results.py``.
"""

from __future__ import annotations

import csv
import json
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

N_RESAMPLES = 2000
"""Bootstrap resamples: the 2.5/97.5 percentiles of 2000 means are stable to ~0.002."""
CONFIDENCE = 0.95
METRICS: dict[str, Callable[[dict[str, Any]], float]] = {
    "grade": lambda row: float(row["grade"]),
    "decision_rate": lambda row: float(row.get("decision") is not None),
    "decision_accuracy": lambda row: float(row.get("decision_correct", 0.0)),
    "valid_call_rate": lambda row: valid_call_rate(row),
}
"""Per-episode quantities that get a mean and an interval (name -> value of one row)."""
GROUPINGS = {"task": "task", "category": "category"}


def valid_call_rate(row: dict[str, Any]) -> float:
    """Share of the episode's steps that were valid tool calls (1 - errors / steps).

    Rows without ``n_errors`` (older result files) count as NaN, so they drop out of the mean."""
    if "n_errors" not in row:
        return float("nan")
    steps = int(row.get("steps") or 0)
    if steps == 0:
        return 0.0
    return max(0.0, 1.0 - int(row["n_errors"]) / steps)


def bootstrap_interval(
    values: Sequence[float],
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
    confidence: float = CONFIDENCE,
) -> dict[str, float]:
    """Mean of ``values`` with its percentile bootstrap interval; NaN values are ignored."""
    data = np.asarray([v for v in values if v == v], dtype=float)
    if data.size == 0:
        return {"n": 0, "mean": float("nan"), "low": float("nan"), "high": float("nan")}
    mean = float(data.mean())
    if data.size == 1:
        return {"n": 1, "mean": mean, "low": mean, "high": mean}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(n_resamples, data.size))
    means = data[idx].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return {"n": int(data.size), "mean": mean, "low": float(low), "high": float(high)}


def interval_table(
    episodes: Iterable[dict[str, Any]],
    by: str | None = None,
    metrics: Sequence[str] = ("grade", "decision_rate", "decision_accuracy", "valid_call_rate"),
    seed: int = 0,
) -> dict[str, dict[str, dict[str, float]]]:
    """``{group: {metric: interval}}`` over the rows, grouped by a row key (None: one group
    ``all``)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in episodes:
        groups["all" if by is None else str(row.get(by, "unknown"))].append(row)
    return {
        name: {m: bootstrap_interval([METRICS[m](r) for r in rows], seed) for m in metrics}
        for name, rows in sorted(groups.items())
    }


def intervals(result: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """Overall, per-task and per-category intervals of one evaluation result."""
    episodes = result["episodes"]
    return {
        "overall": interval_table(episodes, None, seed=seed)["all"],
        "per_task": interval_table(episodes, "task", seed=seed),
        "per_category": interval_table(episodes, "category", seed=seed),
    }


def paired_difference(
    before: Sequence[dict[str, Any]],
    after: Sequence[dict[str, Any]],
    metric: str = "grade",
    seed: int = 0,
) -> dict[str, Any]:
    """Interval of ``mean(after) - mean(before)``.

    When both results played the same (task, seed) worlds the difference is paired per world
    (tighter: the world's difficulty cancels); otherwise the two samples resample independently."""
    value = METRICS[metric]
    key = lambda row: (row["task"], row["seed"])  # noqa: E731
    b_map = {key(r): value(r) for r in before}
    a_map = {key(r): value(r) for r in after}
    shared = sorted(set(b_map) & set(a_map))
    if shared and len(shared) == len(b_map) == len(a_map):
        diff = bootstrap_interval([a_map[k] - b_map[k] for k in shared], seed)
        return {**diff, "paired": True}
    b = np.asarray([v for v in b_map.values() if v == v])
    a = np.asarray([v for v in a_map.values() if v == v])
    if a.size == 0 or b.size == 0:
        return {
            "n": 0,
            "mean": float("nan"),
            "low": float("nan"),
            "high": float("nan"),
            "paired": False,
        }
    rng = np.random.default_rng(seed)
    diffs = a[rng.integers(0, a.size, (N_RESAMPLES, a.size))].mean(axis=1) - b[
        rng.integers(0, b.size, (N_RESAMPLES, b.size))
    ].mean(axis=1)
    low, high = np.quantile(diffs, [(1 - CONFIDENCE) / 2, 1 - (1 - CONFIDENCE) / 2])
    return {
        "n": int(min(a.size, b.size)),
        "mean": float(a.mean() - b.mean()),
        "low": float(low),
        "high": float(high),
        "paired": False,
    }


def compare(
    before: dict[str, Any], after: dict[str, Any], metric: str = "grade", seed: int = 0
) -> dict[str, Any]:
    """Before/after table of one metric: overall and per task and category, with intervals of
    each side and of the difference (``significant``: the difference's interval excludes 0)."""
    out: dict[str, Any] = {"metric": metric}
    for label, by in (("overall", None), ("per_task", "task"), ("per_category", "category")):
        b_groups = _group(before["episodes"], by)
        a_groups = _group(after["episodes"], by)
        rows = {}
        for name in sorted(set(b_groups) | set(a_groups)):
            b_rows, a_rows = b_groups.get(name, []), a_groups.get(name, [])
            diff = paired_difference(b_rows, a_rows, metric, seed)
            rows[name] = {
                "before": bootstrap_interval([METRICS[metric](r) for r in b_rows], seed),
                "after": bootstrap_interval([METRICS[metric](r) for r in a_rows], seed),
                "difference": diff,
                "significant": bool(diff["n"] > 1 and (diff["low"] > 0 or diff["high"] < 0)),
            }
        out[label] = rows["all"] if by is None else rows
    return out


def _group(rows: Iterable[dict[str, Any]], by: str | None) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups["all" if by is None else str(row.get(by, "unknown"))].append(row)
    return groups


def load_result(path: str | Path) -> dict[str, Any]:
    """An evaluation JSON file (``scripts/evaluate.py --json``); checks it has episode rows."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("episodes"), list):
        raise ValueError(f"{path}: not an evaluation result (no 'episodes' list)")
    return data


def fmt(interval: dict[str, float]) -> str:
    """``0.512 [0.471, 0.553]``."""
    if interval["n"] == 0:
        return "-"
    return f"{interval['mean']:.3f} [{interval['low']:.3f}, {interval['high']:.3f}]"


def write_csv(table: dict[str, dict[str, dict[str, float]]], path: str | Path, label: str) -> Path:
    """One row per group of ``interval_table``: n, then mean/low/high of each metric."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    metrics = list(next(iter(table.values()))) if table else []
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        header = [label, "n"] + [f"{m}_{p}" for m in metrics for p in ("mean", "low", "high")]
        writer.writerow(header)
        for name, row in table.items():
            n = max((row[m]["n"] for m in metrics), default=0)
            cells = [round(row[m][p], 4) for m in metrics for p in ("mean", "low", "high")]
            writer.writerow([name, n, *cells])
    return path


def write_result_csv(result: dict[str, Any], path: str | Path, seed: int = 0) -> Path:
    """CSV of an evaluation: the overall row, then per task, then per category (``group`` col)."""
    table = intervals(result, seed)
    merged = {"all": table["overall"]}
    merged.update({f"task:{k}": v for k, v in table["per_task"].items()})
    merged.update({f"category:{k}": v for k, v in table["per_category"].items()})
    return write_csv(merged, path, "group")


def bar_chart(
    series: dict[str, dict[str, dict[str, float]]],
    path: str | Path,
    title: str,
    ylabel: str = "mean grade",
) -> Path:
    """Grouped bars with 95% error bars: ``series`` is ``{label: {group: interval}}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = sorted({g for table in series.values() for g in table})
    width = 0.8 / max(1, len(series))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(groups) + 2), 4.5))
    for i, (label, table) in enumerate(series.items()):
        xs, means, errs = [], [], [[], []]
        for j, group in enumerate(groups):
            iv = table.get(group)
            if iv is None or iv["n"] == 0:
                continue
            xs.append(j + (i - (len(series) - 1) / 2) * width)
            means.append(iv["mean"])
            errs[0].append(max(0.0, iv["mean"] - iv["low"]))
            errs[1].append(max(0.0, iv["high"] - iv["mean"]))
        ax.bar(xs, means, width, yerr=errs, capsize=3, label=label)
    bounds = [
        iv[k] for t in series.values() for iv in t.values() if iv["n"] for k in ("low", "high")
    ]
    if bounds and min(bounds) >= 0.0 and max(bounds) <= 1.0:
        ax.set_ylim(0.0, 1.05)  # shares and grades: the whole [0, 1] scale, even when all are 0
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=30, ha="right", fontsize="small")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize="medium")
    ax.grid(axis="y", alpha=0.3)
    if len(series) > 1:
        ax.legend(fontsize="small")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def result_chart(result: dict[str, Any], path: str | Path, seed: int = 0) -> Path:
    """PNG of one evaluation: mean grade with 95% intervals per task and per category."""
    table = intervals(result, seed)
    groups = {"all": table["overall"]["grade"]}
    groups.update({f"task:{k}": v["grade"] for k, v in table["per_task"].items()})
    groups.update({f"cat:{k}": v["grade"] for k, v in table["per_category"].items()})
    s = result.get("summary", {})
    title = f"{s.get('env', '?')} / {s.get('policy', '?')} ({s.get('split', '?')}): 95% bootstrap"
    return bar_chart({str(s.get("policy", "policy")): groups}, path, title)


def comparison_chart(
    before: dict[str, Any],
    after: dict[str, Any],
    path: str | Path,
    labels: tuple[str, str] = ("before", "after"),
    metric: str = "grade",
    seed: int = 0,
) -> Path:
    """PNG of two evaluations side by side, overall and per task/category, with 95% intervals."""
    series = {}
    for label, result in zip(labels, (before, after), strict=True):
        table = interval_table(result["episodes"], None, (metric,), seed)
        groups = {"all": table["all"][metric]}
        for prefix, by in (("task:", "task"), ("cat:", "category")):
            for k, v in interval_table(result["episodes"], by, (metric,), seed).items():
                groups[prefix + k] = v[metric]
        series[label] = groups
    return bar_chart(series, path, f"{metric}: {labels[0]} vs {labels[1]} (95% bootstrap)", metric)
