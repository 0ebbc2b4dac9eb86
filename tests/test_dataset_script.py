"""scripts/build_dataset.py: saves a loadable dataset; a Hub push offline fails clearly."""

from __future__ import annotations

import datasets
import pytest

from scripts import build_dataset as build_dataset_script


def test_saves_then_refuses_an_offline_push_with_a_clear_message(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "ds"
    argv = ["--env", "support,gang", "--tasks", "easy,hard", "--n", "4", "--split", "eval"]
    with pytest.raises(SystemExit, match="HF_HUB_OFFLINE is set"):
        build_dataset_script.main([*argv, "--out", str(out), "--push-to-hub", "someone/aml"])
    ds = datasets.load_from_disk(str(out))
    assert len(ds) == 8 and ds["env"][:2] == ["support", "gang"]
    assert set(ds["task"]) == {"easy", "hard"} and set(ds["split"]) == {"eval"}
